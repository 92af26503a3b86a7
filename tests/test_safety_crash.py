"""Crash at every write step of apply and revert, by exception and by SIGKILL.

The steps are injected from outside the tool (tests.faults stands in for `os` inside patcher.install.fsio).
A traced run records every write step the command passes, and the list must equal the one derived
here from the files each command writes; each step is then made to fail. After each failure
graph.py is pristine or patched (never torn), verify tells which, and running the command again
finishes the job with no temp file left behind.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from patcher.install import fsio
from tests import faults, realdata
from tests.conftest import need, snapshot
from tests.helpers import cache_tag, check_pyc, crash_points, foreign_pyc_name, make_pyc, tool

VERSION = "2.10.0"
TEMP = "*.torch-lazylog.tmp"
EAGER = b"error.operator_str(target, args, kwargs),"
LAZY = b"LazyString(error.operator_str, target, args, kwargs),"


def _tree(base: Path, name: str) -> Path:
    torch_dir = need(lambda: realdata.release_tree(VERSION, base / name))
    assert isinstance(torch_dir, Path)
    graph = torch_dir / "_inductor" / "graph.py"
    make_pyc(graph, "timestamp", 0)
    make_pyc(graph, "unchecked-hash", 2)
    foreign = graph.parent / "__pycache__" / foreign_pyc_name()  # another interpreter's
    foreign.write_bytes(b"\0" * 16)
    return torch_dir


POINTS = [(command, point) for command in ("apply", "revert") for point in crash_points(command)]


def _points(command: str, tmp_path: Path) -> list[str]:
    torch_dir = _tree(tmp_path, f"trace-{command}")
    if command == "revert":
        assert tool("apply", "--torch-dir", str(torch_dir)).returncode == 0
    trace = tmp_path / f"trace-{command}.txt"
    done = tool(command, "--torch-dir", str(torch_dir), env=faults.env(None, trace=trace))
    assert done.returncode == 0, done.stderr
    return trace.read_text().split()


def _without_pycache(snap: dict[str, tuple[bytes, int, int]]) -> dict[str, tuple[bytes, int, int]]:
    return {k: v for k, v in snap.items() if "__pycache__" not in k}


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_the_crash_cases_are_every_traced_write_step(command: str, tmp_path: Path) -> None:
    """The parametrised crash cases below are exactly the steps a real run passes, in order."""
    assert _points(command, tmp_path) == crash_points(command)


def _record_row_matches(site: Path, graph: bytes) -> bool:
    record = next(site.glob("torch-*.dist-info")).joinpath("RECORD").read_text()
    digest = base64.urlsafe_b64encode(hashlib.sha256(graph).digest()).rstrip(b"=").decode()
    return f"torch/_inductor/graph.py,sha256={digest},{len(graph)}" in record


@pytest.mark.parametrize("action", ["exception", "kill"])
@pytest.mark.parametrize(("command", "point"), POINTS)
def test_crash_at_step_recovers(
    command: str,
    point: str,
    action: str,
    tmp_path: Path,
    run: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch_dir = _tree(tmp_path, "site")
    site = torch_dir.parent
    graph = torch_dir / "_inductor" / "graph.py"
    pristine = snapshot(site)
    original = graph.read_bytes()
    patched = original.replace(EAGER, LAZY)  # independent of the tool: the one-argument change
    assert patched != original
    if command == "revert":
        assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
        assert graph.read_bytes() == patched

    if action == "exception":
        with monkeypatch.context() as patch:
            patch.setattr(fsio, "os", faults.Faults(os, point, "raise", None))
            failed = run(command, "--torch-dir", str(torch_dir))
        assert failed.exit_code == 4, failed.output
        assert f"injected failure at {point}" in failed.stderr
        assert not list(site.rglob(TEMP)), "temp file left after a caught failure"
    else:
        died = tool(command, "--torch-dir", str(torch_dir), env=faults.env(point, "kill"))
        assert died.returncode == -signal.SIGKILL, died.stderr

    now = graph.read_bytes()
    assert now in (original, patched), "graph.py is torn"
    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    report = json.loads(verify.stdout)
    if now == original:
        assert verify.exit_code == 1, report
        assert report["state"] in ("pristine", "record-only", "revert-interrupted"), report
    else:
        # lazy either way; complete only when RECORD lists the patched bytes (RECORD is committed last)
        complete = _record_row_matches(site, now)
        unchecked = graph.parent / "__pycache__" / f"graph.{cache_tag()}.opt-2.pyc"
        runs_lazy = bool(check_pyc(unchecked, graph, 2)["fresh"])  # Python -OO runs the old code if not
        assert verify.exit_code == (0 if runs_lazy else 1), report
        assert report["state"] == ("patched" if complete else "apply-interrupted"), report
        assert (report["next"] is None) == (complete and runs_lazy), report

    again = run(command, "--torch-dir", str(torch_dir))
    assert again.exit_code == 0, again.output
    assert not list(site.rglob(TEMP)), "temp file left after recovery"
    final = run("verify", "--torch-dir", str(torch_dir), "--json")
    if command == "apply":
        assert final.exit_code == 0, final.stdout
        assert graph.read_bytes() == patched and _record_row_matches(site, patched)
    else:
        assert final.exit_code == 1 and json.loads(final.stdout)["problems"] == [], final.stdout
        assert _without_pycache(snapshot(site)) == _without_pycache(pristine)
    for optimize, name in ((0, f"graph.{cache_tag()}.pyc"), (2, f"graph.{cache_tag()}.opt-2.pyc")):
        seen = check_pyc(graph.parent / "__pycache__" / name, graph, optimize)
        assert seen["fresh"] and seen["same_code"], (name, seen)
