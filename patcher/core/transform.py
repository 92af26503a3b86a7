"""The pure rewrite of graph.py: bytes in, bytes out, or a reason not to. No I/O here.

The site is the one argument `error.operator_str(target, args, kwargs)` (eager) or
`LazyString(error.operator_str, target, args, kwargs)` (lazy) of the implicit-fallback `log.info`
in `GraphLowering.call_function`. libcst finds and checks it, entering only that method; the edit
is a splice at the argument's byte offsets, so every other byte of the file stays as it was. The
fingerprint is a hash of the enclosing `if`/`elif` branch in the project's canonical form
(patcher.core.canonical), so it depends neither on the Python that computes it nor on formatting.
"""

from __future__ import annotations

import ast
import itertools
import warnings
from typing import NamedTuple

try:
    import libcst as cst
except ImportError as exc:  # the single-file build, an install without its dependencies, or a
    # libcst directory built for another Python (its native parser does not load); the command line
    # says what to mount when it runs from the single file (patcher.cli.commands)
    from patcher.core.errors import missing

    raise missing("libcst", "read a graph.py that is not a known release's bytes") from exc

from patcher.core.canonical import Uncovered, canonical, digest
from patcher.core.edits import line_edit
from patcher.core.outcome import Outcome, Refused, Rewritten, Site, Unchanged
from patcher.core.spec import PatchSpec


class _Found(NamedTuple):
    lazy: bool
    arg: cst.Arg
    call: cst.Call | None
    branch: cst.If | None


class _SiteFinder(cst.CSTVisitor):
    """Enters only the classes and functions on the scope path; records arguments of either form."""

    def __init__(self, scope: list[str], forms: dict[bool, cst.Call]) -> None:
        super().__init__()
        self._scope = scope
        self._depth = 0
        self._entered: list[bool] = []
        self._forms = {lazy: canonical(call) for lazy, call in forms.items()}
        self._names = {_last_name(call.func) for call in forms.values()}
        self._branches: list[cst.If] = []
        self._calls: list[cst.Call] = []
        self.found: list[_Found] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.ClassDef, cst.FunctionDef)):
            # timid: a call in any other class or function (a nested one included) is not the site
            entered = self._depth < len(self._scope) and node.name.value == self._scope[self._depth]
            self._entered.append(entered)
            self._depth += entered
            return entered
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.ClassDef, cst.FunctionDef)):
            self._depth -= self._entered.pop()  # libcst leaves the nodes it skipped too
        super().on_leave(original_node)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        # The site is a call statement (`log.info(...)`) in the scope: nothing else is entered.
        inside = self._depth == len(self._scope)
        return inside and any(isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) for s in node.body)

    def visit_If_body(self, node: cst.If) -> None:
        self._branches.append(node)

    def leave_If_body(self, node: cst.If) -> None:
        self._branches.pop()

    def visit_Call(self, node: cst.Call) -> None:
        self._calls.append(node)

    def leave_Call(self, original_node: cst.Call) -> None:
        self._calls.pop()

    def visit_Arg(self, node: cst.Arg) -> None:
        value = node.value
        if not isinstance(value, cst.Call) or _last_name(value.func) not in self._names:
            return  # the cheap filter: most arguments are not calls of operator_str or LazyString
        try:
            shape = canonical(value)
        except Uncovered:
            return
        for lazy, wanted in self._forms.items():
            if shape == wanted:
                call = self._calls[-1] if self._calls else None  # the call this is an argument of
                branch = self._branches[-1] if self._branches else None
                self.found.append(_Found(lazy, node, call, branch))


def _last_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _imports_name(module: cst.Module, module_name: str, name: str) -> bool:
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.ImportFrom) or small.module is None or small.relative:
                continue
            if isinstance(small.names, cst.ImportStar) or module.code_for_node(small.module) != module_name:
                continue
            for alias in small.names:
                bound = alias.asname.name if alias.asname else alias.name
                if module.code_for_node(alias.name) == name and module.code_for_node(bound) == name:
                    return True
    return False


def _not_python(exc: Exception) -> Refused:
    """The one refusal of a source libcst, ast or compile() rejects."""
    return Refused(f"graph.py is not valid Python ({type(exc).__name__}: {str(exc).splitlines()[0]})")


def _call(code: str) -> cst.Call:
    call = cst.parse_expression(code)
    assert isinstance(call, cst.Call), "patch definitions name calls"
    return call


def _find(source: bytes, module: cst.Module, spec: PatchSpec) -> _Found | Refused:
    finder = _SiteFinder(spec.scope.split("."), {False: _call(spec.eager), True: _call(spec.lazy)})
    module.visit(finder)
    # timid: the finder enters only the scope; the same text anywhere else in the file is a refusal too
    count = max(len(finder.found), sum(source.count(text.encode()) for text in (spec.eager, spec.lazy)))
    if not finder.found:
        return Refused(f"`{spec.scope}` passes no `{spec.eager}` (nor its lazy form) to `{spec.call}`")
    if count > 1:
        return Refused(f"the argument `{spec.eager}` (or its lazy form) occurs {count} times; expected once")
    (found,) = finder.found
    expected = _call(f"{spec.call}({spec.message}, {spec.lazy if found.lazy else spec.eager})")
    if found.call is None or canonical(found.call) != canonical(expected):
        if found.branch is not None:  # its diff against the nearest release shows what differs
            branch = found.branch.with_changes(orelse=None, leading_lines=())
            return Refused(
                "the log call differs from the known one", module.code_for_node(branch), found.lazy
            )
        shown = module.code_for_node(found.call).strip() if found.call else "no call"
        return Refused(
            f"the log call differs from the known one: expected `{module.code_for_node(expected)}`, "
            f"found `{' '.join(shown.split())}`",
            lazy=found.lazy,
        )
    if found.branch is None:
        return Refused("the log call is not inside an `if`/`elif` branch")
    if not _imports_name(module, spec.import_module, spec.import_name):
        return Refused(
            f"graph.py does not import `{spec.import_name}` from `{spec.import_module}` at module level",
            cause="import",
        )
    return found


def _span(source: bytes, tree: ast.Module, scope: list[str], text: bytes) -> tuple[int, int] | None:
    """Byte offsets of the one call in `scope` whose source is exactly `text` (ast's columns are bytes)."""
    body: list[ast.stmt] = tree.body
    node: ast.AST = tree
    for name in scope:
        named = [n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name]
        if len(named) != 1:
            return None  # timid: the scope is ambiguous in ast's view
        node = named[0]
        body = named[0].body
    # the offset each line starts at; lines end at \n, \r\n and \r, as the tokenizer counts them
    starts = [0, *itertools.accumulate(len(line) for line in source.splitlines(keepends=True))]
    spans = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and call.end_lineno is not None and call.end_col_offset is not None:
            start = starts[call.lineno - 1] + call.col_offset
            end = starts[call.end_lineno - 1] + call.end_col_offset
            if source[start:end] == text:
                spans.append((start, end))
    return spans[0] if len(spans) == 1 else None


def _located(source: bytes, spec: PatchSpec) -> tuple[cst.Module, _Found, Site] | Refused:
    """The one site finder: the parsed module, the argument found and its site."""
    try:
        module = cst.parse_module(source)
    except UnicodeDecodeError as exc:
        return Refused(
            f"graph.py is not valid text in its declared encoding ({exc.reason} at byte {exc.start})"
        )
    except (SyntaxError, ValueError, cst.ParserSyntaxError) as exc:
        return _not_python(exc)
    found = _find(source, module, spec)
    if isinstance(found, Refused):
        return found
    assert found.branch is not None
    branch = found.branch.with_changes(orelse=None, leading_lines=())  # the branch alone, for messages
    try:
        shape = {"scope": spec.scope, "test": canonical(branch.test), "body": canonical(branch.body)}
    except Uncovered as exc:
        return Refused(f"its implicit-fallback branch cannot be fingerprinted: {exc}")
    return module, found, Site(found.lazy, digest(shape), module.code_for_node(branch))


def site_of(source: bytes, spec: PatchSpec) -> Site | Refused:
    located = _located(source, spec)
    return located if isinstance(located, Refused) else located[2]


def rewrite(source: bytes, spec: PatchSpec) -> Outcome:
    """Make the site lazy; every other byte stays as it was."""
    located = _located(source, spec)
    if isinstance(located, Refused):
        return located
    module, found, site = located
    if site.lazy:
        return Unchanged(site)
    encoding = "utf-8" if module.encoding == "utf-8-sig" else module.encoding  # the BOM is not ours to add
    old = module.code_for_node(found.arg.value).encode(encoding)
    # The argument's text, when it occurs once in the file, can only be there; otherwise ask ast.
    at = source.find(old)
    unique = at != -1 and source.find(old, at + 1) == -1
    try:  # libcst accepts what this Python may not: ast, and compile() (`return` outside a function)
        with warnings.catch_warnings():  # a vendor file's invalid escapes are not ours to report
            warnings.simplefilter("ignore")
            tree = None if unique else ast.parse(source, "graph.py")
            span = (at, at + len(old)) if tree is None else _span(source, tree, spec.scope.split("."), old)
            if span is None:  # timid: libcst and ast disagree about where the argument is
                return Refused(f"the argument `{spec.eager}` could not be located by its byte offsets")
            new_source = source[: span[0]] + spec.lazy.encode(encoding) + source[span[1] :]
            compile(new_source, "graph.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return _not_python(exc)
    return Rewritten(source=new_source, edit=line_edit(source, new_source), before=site)
