"""The console script's fast path (no click) and click's path print the same for the same argv."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from patcher.cli.entry import plain

CLICK = "import sys; from patcher.cli.app import main; sys.argv[0] = 'torch-lazylog'; main()"


def _run(fast: bool, args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    head = [sys.executable, "-m", "patcher"] if fast else [sys.executable, "-c", CLICK]
    done = subprocess.run([*head, *args], capture_output=True, text=True, env={**os.environ, **(env or {})})
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    ("argv", "fast"),
    [
        (["verify"], True),
        (["verify", "--torch-dir", "D", "--json", "-v"], True),
        (["verify", "--torch-dir=D", "--python=P"], True),
        (["apply", "--dry-run", "--torch-dir", "D"], True),
        (["revert", "--verbose"], True),
        (["verify", "--runtime"], False),
        (["revert", "--dry-run"], False),
        (["verify", "--torch-dir"], False),
        (["verify", "--torch-dir", "--json"], False),
        (["verify", "--json", "--json"], True),  # a flag twice is the flag, for click too
        (["verify", "--torch-dir", "A", "--torch-dir", "B"], False),
        (["verify", "--help"], False),
        (["verify", "-vv"], False),
        (["verify", "--json=yes"], False),
        (["fingerprint", "x.whl"], False),
        (["--version"], False),
        ([], False),
    ],
)
def test_only_plain_command_lines_skip_click(argv: list[str], fast: bool) -> None:
    assert (plain(argv) is not None) == fast


def test_the_environment_variables_count_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_LAZYLOG_TORCH_DIR", "/from/env")
    monkeypatch.setenv("TORCH_LAZYLOG_PYTHON", "")  # empty is unset, as click reads it
    options = plain(["verify"])
    assert options is not None and options["--torch-dir"] == "/from/env" and options["--python"] is None
    options = plain(["verify", "--torch-dir", "/given"])
    assert options is not None and options["--torch-dir"] == "/given"


@pytest.mark.parametrize(
    "args",
    [
        ["verify"],
        ["verify", "--json"],
        ["apply", "--dry-run"],
        ["apply", "--json"],
        ["revert"],
        ["verify", "--python", "/nonexistent/python", "--json"],
    ],
)
def test_both_paths_print_the_same(args: list[str], release: Callable[[str], Path], tmp_path: Path) -> None:
    fast_dir = release("2.10.0")
    slow_dir = tmp_path / "twin" / "torch"
    shutil.copytree(fast_dir.parent, slow_dir.parent)
    if args[0] == "revert":
        for torch_dir in (fast_dir, slow_dir):
            assert _run(True, ["apply", "--torch-dir", str(torch_dir)])[0] == 0
    fast = _run(True, [*args, "--torch-dir", str(fast_dir)])
    slow = _run(False, [*args, "--torch-dir", str(slow_dir)])
    same = tuple(
        part.replace(str(slow_dir.parent), str(fast_dir.parent)) if isinstance(part, str) else part
        for part in slow
    )
    assert fast == same
