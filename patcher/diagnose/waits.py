"""A thread that waits on a lock file, recognised by what its code does, whatever package holds the
code: torch's FileBaton, aiter's copy of it, any other. Pure: from a function's source, a frame's
line and the string locals py-spy shows.

A poll: the frame's line lies in a `while` loop that calls `sleep`. A wait for a file to vanish:
that loop's test asks whether a path exists (`while os.path.exists(P)`, `while p.exists()`). Its
path: P evaluated with the frame's string locals; or, when P is an attribute the class's
`__init__` set from a parameter (`self.lock_file_path`), that argument of the call that built the
object in the caller's function (`FileBaton(os.path.join(build_directory, "lock"))`), evaluated
with the caller's string locals.
"""

from __future__ import annotations

import ast
import functools
import posixpath
from collections.abc import Callable, Mapping
from typing import NamedTuple

EXISTS = ("exists", "isfile", "lexists", "is_file")  # a test that a path is there
CUT = "..."  # how py-spy ends a repr it cut short


class Spelling(NamedTuple):
    """A path's text as far as the locals spell it (text, not a pathlib.Path): whole (`cut` False),
    or a head py-spy cut short and the tail joined after it (the one file that completes it is looked
    for on disk)."""

    head: str
    cut: bool = False
    tail: str = ""


Locals = dict[str, str]  # a frame's locals by name, as py-spy shows them


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _calls(node: ast.AST, names: tuple[str, ...]) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and _name(n.func) in names]


def _around(tree: ast.AST, line: int, kind: type[ast.AST]) -> list[ast.AST]:
    """The nodes of `kind` whose lines hold `line`, outermost first."""

    def lines(node: ast.AST) -> tuple[int, int]:
        first = int(getattr(node, "lineno", 0))
        return first, int(getattr(node, "end_lineno", None) or first)

    found = [n for n in ast.walk(tree) if isinstance(n, kind) and lines(n)[0] <= line <= lines(n)[1]]
    return sorted(found, key=lambda n: lines(n)[0])


def poll(tree: ast.Module, line: int) -> ast.While | None:
    """The innermost `while` loop around `line` that sleeps between its tries."""
    loops = [n for n in _around(tree, line, ast.While) if isinstance(n, ast.While) and _calls(n, ("sleep",))]
    return loops[-1] if loops else None


def vanishing(loop: ast.While) -> ast.expr | None:
    """The path whose existence the loop's test asks for: the loop waits for it to vanish. (A test
    of `not exists(...)` waits for a file to appear: no lock.)"""
    tests = loop.test.values if isinstance(loop.test, ast.BoolOp) else [loop.test]
    for call in (t for t in tests if isinstance(t, ast.Call) and _name(t.func) in EXISTS):
        if call.args:
            return call.args[0]
        if isinstance(call.func, ast.Attribute):  # `p.exists()`: the path is the object
            return call.func.value
    return None


def string(shown: str) -> Spelling | None:
    """A string local as py-spy shows it (in quotes; cut with `...`); None for any other value."""
    if len(shown) < 2 or shown[0] != shown[-1] or shown[0] not in "\"'":
        return None
    text = shown[1:-1]
    return Spelling(text[: -len(CUT)], cut=True) if text.endswith(CUT) else Spelling(text)


def _joined(parts: list[Spelling | None]) -> Spelling | None:
    """posixpath.join of the parts; after a part py-spy cut short, only whole ones (its tail)."""
    done = [p for p in parts if p is not None]
    if not done or len(done) < len(parts):
        return None
    cut = next((i for i, p in enumerate(done) if p.cut), len(done))
    head = posixpath.join(*(p.head for p in done[: cut + 1]))
    rest = done[cut + 1 :]
    if cut == len(done):
        return Spelling(head)
    if done[cut].tail or any(p.cut for p in rest):
        return None
    return Spelling(head, True, "/" + posixpath.join(*(p.head for p in rest)) if rest else "")


Resolve = Callable[[ast.expr], "Spelling | None"]  # a value of the object's own (`self.x`, `self.m()`)


def evaluate(
    node: ast.expr, found: Mapping[str, str | Spelling], resolve: Resolve | None = None
) -> Spelling | None:
    """A path expression of strings: a local, a constant, `os.path.join(...)`, `a / b`, `a + b`,
    an f-string of locals, and what `resolve` makes of `self.ATTR` and `self.METHOD()`; None for
    anything else."""
    again = functools.partial(evaluate, found=found, resolve=resolve)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return Spelling(node.value)
    if isinstance(node, ast.Name):
        value = found.get(node.id)
        return value if isinstance(value, Spelling) or value is None else string(value)
    if resolve is not None and (_own(node) is not None):
        return resolve(node)
    if isinstance(node, ast.Call) and _name(node.func) in ("join", "Path", "PurePath") and not node.keywords:
        return _joined([again(a) for a in node.args])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _joined([again(node.left), again(node.right)])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _concatenated([again(node.left), again(node.right)])
    if isinstance(node, ast.JoinedStr):
        values = [v.value if isinstance(v, ast.FormattedValue) else v for v in node.values]
        return _concatenated([again(v) for v in values])
    return None


def _own(node: ast.expr) -> str | None:
    """`self.ATTR` (ATTR) or `self.METHOD()` without arguments (METHOD())."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords and _is_self(node.func, None):
        return node.func.attr + "()" if isinstance(node.func, ast.Attribute) else None
    return node.attr if isinstance(node, ast.Attribute) and _is_self(node, None) else None


def _concatenated(parts: list[Spelling | None]) -> Spelling | None:
    if any(p is None or p.cut for p in parts):
        return None
    return Spelling("".join(p.head for p in parts if p is not None))


class Wait(NamedTuple):
    """A loop waiting for a file to vanish: the path, if the locals tell it."""

    path: Spelling | None


def _is_self(node: ast.expr, attribute: str | None) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and (attribute is None or node.attr == attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef]:
    """The class's methods, `__init__` first (what it sets is what every other method sees)."""
    found = [m for m in cls.body if isinstance(m, ast.FunctionDef)]
    return sorted(found, key=lambda m: m.name != "__init__")


def _built_with(tree: ast.Module, line: int, cls: str, position: int, keyword: str) -> ast.expr | None:
    """The argument that the function around `line` passed to build a `cls` (the last such call
    before `line`)."""
    functions = [f for f in _around(tree, line, ast.FunctionDef) if isinstance(f, ast.FunctionDef)]
    scope: ast.AST = functions[-1] if functions else tree
    calls = sorted((c for c in _calls(scope, (cls,)) if c.lineno <= line), key=lambda c: c.lineno)
    for call in reversed(calls):
        if len(call.args) > position:
            return call.args[position]
        named = [k.value for k in call.keywords if k.arg == keyword]
        if named:
            return named[0]
    return None


class _Object(NamedTuple):
    """The object whose method waits: its class, and the call that built it in the caller's function."""

    cls: ast.ClassDef
    caller: tuple[ast.Module, int, Locals] | None

    def arguments(self, init: ast.FunctionDef) -> dict[str, Spelling]:
        """`__init__`'s parameters as the caller passed them."""
        if self.caller is None:
            return {}
        outer, line, found = self.caller
        given = {}
        for position, name in enumerate(a.arg for a in init.args.args[1:]):
            argument = _built_with(outer, line, self.cls.name, position, name)
            value = evaluate(argument, found) if argument is not None else None
            if value is not None:
                given[name] = value
        return given

    def value(self, node: ast.expr, depth: int) -> Spelling | None:
        """`self.ATTR`: what a method assigns it (`__init__`'s first, with its parameters as the
        caller passed them); `self.METHOD()`: the one expression the method returns."""
        wanted = _own(node)
        if wanted is None or depth > 8:  # a chain of attributes this deep is a loop
            return None
        resolve: Resolve = functools.partial(self.value, depth=depth + 1)
        for method in _methods(self.cls):
            found = self.arguments(method) if method.name == "__init__" else {}
            if wanted == method.name + "()":
                returns = [n.value for n in ast.walk(method) if isinstance(n, ast.Return) and n.value]
                return evaluate(returns[0], found, resolve) if len(returns) == 1 else None
            for assigned in ast.walk(method):
                if isinstance(assigned, ast.Assign) and any(_is_self(t, wanted) for t in assigned.targets):
                    return evaluate(assigned.value, found, resolve)
        return None


def waited(source: str, line: int, own: Locals, caller: tuple[str, int, Locals] | None) -> Wait | None:
    """Whether the frame at `line` of `source` waits for a file to vanish, and the file's path as far
    as its locals (or its caller's: source, line, locals) tell it. None: not such a wait."""
    tree = _parsed(source)
    loop = poll(tree, line) if tree is not None else None
    path = vanishing(loop) if loop is not None else None
    if tree is None or path is None:
        return None
    classes = [c for c in _around(tree, line, ast.ClassDef) if isinstance(c, ast.ClassDef)]
    outer = _parsed(caller[0]) if caller is not None else None
    built = (outer, caller[1], caller[2]) if outer is not None and caller is not None else None
    resolve = functools.partial(_Object(classes[-1], built).value, depth=0) if classes else None
    return Wait(evaluate(path, own, resolve))


EXCLUSIVE = ("O_CREAT", "O_EXCL")  # the flags of a file created only when it is not there


def keeps_open(source: str, line: int) -> bool:
    """Whether the class whose method waits at `line` is FileBaton's protocol by its code's shape:
    a method keeps (`self.X = os.open(...)`) a file it creates exclusively (O_CREAT | O_EXCL)."""
    tree = _parsed(source)
    classes = [c for c in _around(tree, line, ast.ClassDef) if isinstance(c, ast.ClassDef)] if tree else []
    for node in ast.walk(classes[-1]) if classes else ():
        if isinstance(node, ast.Assign) and any(_is_self(t, None) for t in node.targets):
            for call in _calls(node.value, ("open",)):
                flags = {
                    n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in ast.walk(call)
                }
                if all(f in flags for f in EXCLUSIVE):
                    return True
    return False


def polls(source: str, line: int) -> bool:
    """Whether `line` lies in a loop that sleeps between its tries."""
    tree = _parsed(source)
    return tree is not None and poll(tree, line) is not None


@functools.lru_cache(maxsize=64)
def _parsed(source: str) -> ast.Module | None:
    """One parse a source (threads and ranks idle in the same file share it); never mutated."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None
