"""No test hooks in what ships, and no test module that imports another."""

from __future__ import annotations

import ast
from pathlib import Path

PATCHER = Path(__file__).resolve().parent.parent / "patcher"


def test_the_shipped_tool_has_no_test_hooks() -> None:
    text = "".join(p.read_text() for p in sorted(PATCHER.rglob("*.py")))
    for hook in ("FAILPOINT", "TORCH_LAZYLOG_TRACE", "TORCH_LAZYLOG_TEST"):
        assert hook not in text


def test_no_test_module_imports_another() -> None:
    """What two test modules share lives in a helper module (tests/helpers.py, tests/diagnosing.py):
    a test module imported by another runs its module-level code there, and its private names become
    another file's API."""
    tests = PATCHER.parent / "tests"
    imports = []
    for path in sorted(tests.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.ImportFrom):  # `from tests import test_x` names the module too
                names += [f"{node.module}.{alias.name}" for alias in node.names]
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            imports += [f"{path.relative_to(tests)}: {name}" for name in names if ".test_" in f".{name}"]
    assert imports == []
