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
from typing import NamedTuple

EXISTS = ("exists", "isfile", "lexists", "is_file")  # a test that a path is there
CUT = "..."  # how py-spy ends a repr it cut short


class Path(NamedTuple):
    """A path as far as the locals tell it: whole (`cut` False: head + tail), or a head py-spy cut
    short and the tail joined after it (the one file that completes it is looked for on disk)."""

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


def string(shown: str) -> Path | None:
    """A string local as py-spy shows it (in quotes; cut with `...`); None for any other value."""
    if len(shown) < 2 or shown[0] != shown[-1] or shown[0] not in "\"'":
        return None
    text = shown[1:-1]
    return Path(text[: -len(CUT)], cut=True) if text.endswith(CUT) else Path(text)


def _joined(parts: list[Path | None]) -> Path | None:
    """posixpath.join of the parts; after a part py-spy cut short, only whole ones (its tail)."""
    done = [p for p in parts if p is not None]
    if not done or len(done) < len(parts):
        return None
    cut = next((i for i, p in enumerate(done) if p.cut), len(done))
    head = posixpath.join(*(p.head for p in done[: cut + 1]))
    rest = done[cut + 1 :]
    if cut == len(done):
        return Path(head)
    if done[cut].tail or any(p.cut for p in rest):
        return None
    return Path(head, True, "/" + posixpath.join(*(p.head for p in rest)) if rest else "")


def evaluate(node: ast.expr, found: Locals) -> Path | None:
    """A path expression of strings: a local, a constant, `os.path.join(...)`, `a / b`, `a + b`,
    an f-string of locals; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return Path(node.value)
    if isinstance(node, ast.Name):
        return string(found[node.id]) if node.id in found else None
    if isinstance(node, ast.Call) and _name(node.func) in ("join", "Path", "PurePath") and not node.keywords:
        return _joined([evaluate(a, found) for a in node.args])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _joined([evaluate(node.left, found), evaluate(node.right, found)])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _concatenated([evaluate(node.left, found), evaluate(node.right, found)])
    if isinstance(node, ast.JoinedStr):
        values = [v.value if isinstance(v, ast.FormattedValue) else v for v in node.values]
        return _concatenated([evaluate(v, found) for v in values])
    return None


def _concatenated(parts: list[Path | None]) -> Path | None:
    if any(p is None or p.cut for p in parts):
        return None
    return Path("".join(p.head for p in parts if p is not None))


class Wait(NamedTuple):
    """A loop waiting for a file to vanish: the path, if the locals tell it."""

    path: Path | None


def _parameter(tree: ast.Module, line: int, attribute: str) -> tuple[str, int, str] | None:
    """For `self.ATTR` in a method around `line`: its class's name, and the position and name of
    the `__init__` parameter ATTR was set from (`self.ATTR = PARAM`)."""
    classes = [c for c in _around(tree, line, ast.ClassDef) if isinstance(c, ast.ClassDef)]
    if not classes:
        return None
    cls = classes[-1]
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef) or method.name != "__init__":
            continue
        names = [a.arg for a in method.args.args[1:]]
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Assign)
                and any(_is_self(t, attribute) for t in node.targets)
                and isinstance(node.value, ast.Name)
                and node.value.id in names
            ):
                return cls.name, names.index(node.value.id), node.value.id
    return None


def _is_self(node: ast.expr, attribute: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attribute
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


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


def waited(source: str, line: int, own: Locals, caller: tuple[str, int, Locals] | None) -> Wait | None:
    """Whether the frame at `line` of `source` waits for a file to vanish, and the file's path as far
    as its locals (or its caller's: source, line, locals) tell it. None: not such a wait."""
    tree = _parsed(source)
    loop = poll(tree, line) if tree is not None else None
    path = vanishing(loop) if loop is not None else None
    if tree is None or path is None:
        return None
    found = evaluate(path, own)
    if found is not None or caller is None:
        return Wait(found)
    if not (isinstance(path, ast.Attribute) and isinstance(path.value, ast.Name) and path.value.id == "self"):
        return Wait(None)
    built = _parameter(tree, line, path.attr)
    outer = _parsed(caller[0])
    if built is None or outer is None:
        return Wait(None)
    argument = _built_with(outer, caller[1], *built)
    return Wait(evaluate(argument, caller[2]) if argument is not None else None)


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
