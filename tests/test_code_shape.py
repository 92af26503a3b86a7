"""The shape the code keeps: short functions, and no test hooks in what ships."""

from __future__ import annotations

import ast
from pathlib import Path

PATCHER = Path(__file__).resolve().parent.parent / "patcher"


def test_no_function_in_patcher_is_over_40_lines() -> None:
    long = []
    for path in sorted(PATCHER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                assert node.end_lineno is not None
                if node.end_lineno - start + 1 > 40:
                    long.append(f"{path.relative_to(PATCHER)}:{node.name}")
    assert long == []


def test_the_shipped_tool_has_no_test_hooks() -> None:
    text = "".join(p.read_text() for p in sorted(PATCHER.rglob("*.py")))
    for hook in ("FAILPOINT", "TORCH_LAZYLOG_TRACE", "TORCH_LAZYLOG_TEST"):
        assert hook not in text
