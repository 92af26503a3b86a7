"""The pure rewrite of graph.py: bytes in, bytes out, or a reason not to. No I/O here.

The site is the one argument `error.operator_str(target, args, kwargs)` (eager) or
`LazyString(error.operator_str, target, args, kwargs)` (lazy) of the implicit-fallback `log.info`
in `GraphLowering.call_function`. Its fingerprint is a hash of the enclosing `if`/`elif` branch
(test and body) as a libcst tree without whitespace or comments, so it does not depend on the
Python that computes it (`ast.dump` does) nor on formatting.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from patcher.edits import Edit, line_edit
from patcher.spec import PatchSpec

Form = Literal["eager", "lazy"]

# Formatting tokens: their presence or spelling never changes what the code does.
_FORMATTING = (
    cst.SimpleWhitespace,
    cst.ParenthesizedWhitespace,
    cst.TrailingWhitespace,
    cst.EmptyLine,
    cst.Comment,
    cst.Newline,
    cst.Comma,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.Semicolon,
    cst.Colon,
    cst.Dot,
    cst.AssignEqual,
    cst.MaybeSentinel,
)
_FORMATTING_FIELDS = frozenset({"indent", "header", "footer", "leading_lines"})


def canonical(node: cst.CSTNode) -> list[object]:
    """The node as nested lists of type names and values, formatting left out."""
    out: list[object] = [type(node).__name__]
    for field in dataclasses.fields(node):
        if field.name in _FORMATTING_FIELDS:
            continue
        value = getattr(node, field.name)
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, _FORMATTING) or item is None:
                continue
            if isinstance(item, cst.CSTNode):
                out.append([field.name, canonical(item)])
            elif isinstance(item, (str, int, bool)):
                out.append([field.name, item])
    return out


def _digest(value: object) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class Site:
    form: Form
    fingerprint: str
    code: str  # the branch's test and body, for messages and diffs


@dataclass(frozen=True)
class Rewritten:
    source: bytes
    edit: Edit
    before: Site


@dataclass(frozen=True)
class Unchanged:
    """The site is already in the requested form."""

    site: Site


@dataclass(frozen=True)
class Refused:
    reason: str


Outcome = Rewritten | Unchanged | Refused


@dataclass(frozen=True)
class _Candidate:
    form: Form
    arg: cst.Arg
    call: cst.Call | None
    scope: str
    branch: cst.If | None


class _SiteFinder(cst.CSTVisitor):
    def __init__(self, eager: cst.BaseExpression, lazy: cst.BaseExpression) -> None:
        super().__init__()
        self._forms: list[tuple[Form, list[object], list[object]]] = [
            ("eager", canonical(eager), canonical(_callee(eager))),
            ("lazy", canonical(lazy), canonical(_callee(lazy))),
        ]
        self._last_names = {_last_name(_callee(eager)), _last_name(_callee(lazy))}
        self._scope: list[str] = []
        self._branches: list[cst.If] = []
        self._calls: list[cst.Call] = []
        self.found: list[_Candidate] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scope.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scope.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scope.append(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scope.pop()

    def visit_If_body(self, node: cst.If) -> None:
        self._branches.append(node)

    def leave_If_body(self, node: cst.If) -> None:
        self._branches.pop()

    def visit_Call(self, node: cst.Call) -> None:
        self._calls.append(node)

    def leave_Call(self, original_node: cst.Call) -> None:
        self._calls.pop()

    def visit_Arg(self, node: cst.Arg) -> None:
        if not isinstance(node.value, cst.Call) or _last_name(node.value.func) not in self._last_names:
            return  # the cheap filter: most arguments are not calls of operator_str or LazyString
        callee = canonical(node.value.func)
        for form, whole, wanted_callee in self._forms:
            if callee == wanted_callee and canonical(node.value) == whole:
                self.found.append(
                    _Candidate(
                        form=form,
                        arg=node,
                        call=self._calls[-1] if self._calls else None,
                        scope=".".join(self._scope),
                        branch=self._branches[-1] if self._branches else None,
                    )
                )


def _last_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _callee(expr: cst.BaseExpression) -> cst.BaseExpression:
    assert isinstance(expr, cst.Call), "patch definitions name calls"
    return expr.func


def _imports_name(module: cst.Module, module_name: str, name: str) -> bool:
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.ImportFrom) or small.module is None or small.relative:
                continue
            if module.code_for_node(small.module) != module_name:
                continue
            if isinstance(small.names, cst.ImportStar):
                continue
            for alias in small.names:
                bound = alias.asname.name if alias.asname else alias.name
                if module.code_for_node(alias.name) == name and module.code_for_node(bound) == name:
                    return True
    return False


def _site(module: cst.Module, candidate: _Candidate) -> Site:
    assert candidate.branch is not None
    branch = candidate.branch
    fingerprint = _digest(
        {
            "scope": candidate.scope,
            "test": canonical(branch.test),
            "body": canonical(branch.body),
        }
    )
    code = module.code_for_node(branch.with_changes(orelse=None, leading_lines=()))
    return Site(form=candidate.form, fingerprint=fingerprint, code=code)


def _expected_call(spec: PatchSpec, form: Form) -> cst.BaseExpression:
    argument = spec.eager if form == "eager" else spec.lazy
    return cst.parse_expression(f"{spec.call}({spec.message}, {argument})")


def _compile(source: bytes) -> None:
    with warnings.catch_warnings():  # a vendor file's invalid escapes are not ours to report
        warnings.simplefilter("ignore")
        compile(source, "graph.py", "exec", dont_inherit=True)


def parse(source: bytes) -> cst.Module | Refused:
    try:
        _compile(source)
        return cst.parse_module(source)
    except UnicodeDecodeError as exc:
        return Refused(
            f"graph.py is not valid text in its declared encoding ({exc.reason} at byte {exc.start})"
        )
    except (SyntaxError, ValueError, cst.ParserSyntaxError) as exc:
        return Refused(f"graph.py is not valid Python ({type(exc).__name__}: {str(exc).splitlines()[0]})")


def find_site(module: cst.Module, spec: PatchSpec) -> tuple[Site, _Candidate] | Refused:
    eager = cst.parse_expression(spec.eager)
    lazy = cst.parse_expression(spec.lazy)
    finder = _SiteFinder(eager, lazy)
    module.visit(finder)
    found = finder.found
    if not found:
        return Refused(f"the argument `{spec.eager}` (or its lazy form) is not in graph.py")
    if len(found) > 1:
        return Refused(
            f"the argument `{spec.eager}` (or its lazy form) occurs {len(found)} times; expected once"
        )
    (candidate,) = found
    expected = _expected_call(spec, candidate.form)
    if candidate.call is None or canonical(candidate.call) != canonical(expected):
        shown = module.code_for_node(candidate.call).strip() if candidate.call else "no call"
        return Refused(
            f"the log call differs from the known one: expected `{module.code_for_node(expected)}`, "
            f"found `{' '.join(shown.split())}`"
        )
    if candidate.scope != spec.scope:
        return Refused(f"the log call is in `{candidate.scope or '<module>'}`, expected `{spec.scope}`")
    if candidate.branch is None:
        return Refused("the log call is not inside an `if`/`elif` branch")
    if not _imports_name(module, spec.import_module, spec.import_name):
        return Refused(
            f"graph.py does not import `{spec.import_name}` from `{spec.import_module}` at module level"
        )
    return _site(module, candidate), candidate


def rewrite(source: bytes, spec: PatchSpec, to: Form = "lazy") -> Outcome:
    """Turn the site into form `to`; every other byte stays as it was."""
    module = parse(source)
    if isinstance(module, Refused):
        return module
    located = find_site(module, spec)
    if isinstance(located, Refused):
        return located
    site, candidate = located
    if site.form == to:
        return Unchanged(site)
    replacement = cst.parse_expression(spec.lazy if to == "lazy" else spec.eager)
    new_module = module.deep_replace(candidate.arg.value, replacement)
    assert isinstance(new_module, cst.Module)
    new_source = new_module.bytes
    try:
        _compile(new_source)
    except (SyntaxError, ValueError) as exc:  # pragma: no cover - replacing an expression by an expression
        return Refused(f"the rewritten graph.py would not compile ({exc})")
    return Rewritten(source=new_source, edit=line_edit(source, new_source), before=site)


def site_of(source: bytes, spec: PatchSpec) -> Site | Refused:
    module = parse(source)
    if isinstance(module, Refused):
        return module
    located = find_site(module, spec)
    return located if isinstance(located, Refused) else located[0]
