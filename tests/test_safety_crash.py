"""Crash at every write step of apply and revert, by exception and by SIGKILL.

The steps are not listed by hand: a traced run records every failpoint the command passes, and each
one is then made to fail. After each failure graph.py is pristine or patched (never torn), verify
tells which, and running the command again finishes the job with no temp file left behind.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests import realdata
from tests.conftest import need, sha256, snapshot
from tests.helpers import check_pyc, make_pyc, tool

VERSION = "2.10.0"
TEMP = "*.torch-lazylog.tmp"


def _tree(base: Path, name: str) -> Path:
    torch_dir = need(lambda: realdata.release_tree(VERSION, base / name))
    assert isinstance(torch_dir, Path)
    graph = torch_dir / "_inductor" / "graph.py"
    make_pyc(graph, "timestamp", 0)
    make_pyc(graph, "unchecked-hash", 2)
    foreign = graph.parent / "__pycache__" / "graph.cpython-399.pyc"  # another interpreter's
    foreign.write_bytes(b"\0" * 16)
    return torch_dir


def _points(command: str, tmp_path: Path) -> list[str]:
    torch_dir = _tree(tmp_path, f"trace-{command}")
    if command == "revert":
        assert tool("apply", "--torch-dir", str(torch_dir)).returncode == 0
    trace = tmp_path / f"trace-{command}.txt"
    done = tool(command, "--torch-dir", str(torch_dir), env={"TORCH_LAZYLOG_TRACE": str(trace)})
    assert done.returncode == 0, done.stderr
    points = trace.read_text().split()
    assert len(points) == len(set(points))
    return points


def _without_pycache(snap: dict[str, tuple[bytes, int, int]]) -> dict[str, tuple[bytes, int, int]]:
    return {k: v for k, v in snap.items() if "__pycache__" not in k}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    base = tmp_path_factory.mktemp("traces")
    return {command: _points(command, base) for command in ("apply", "revert")}


def test_every_write_step_is_traced(traces: dict[str, list[str]]) -> None:
    apply_points, revert_points = traces["apply"], traces["revert"]
    for label in ("undo", "graph", "RECORD", "pyc-graph.cpython-311.pyc", "pyc-graph.cpython-311.opt-2.pyc"):
        for stage in ("written", "fsynced", "commit", "committed"):
            assert f"{stage}:{label}" in apply_points
    assert "commit:pyc-graph.cpython-399.pyc" in apply_points
    assert {"written:graph", "commit:RECORD", "commit:undo", "committed:undo"} <= set(revert_points)


@pytest.mark.parametrize("action", ["exception", "kill"])
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_crash_at_every_step_recovers(
    command: str,
    action: str,
    traces: dict[str, list[str]],
    tmp_path: Path,
    run: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    points = traces[command]
    for index, point in enumerate(points):
        torch_dir = _tree(tmp_path, f"{index}")
        site = torch_dir.parent
        graph = torch_dir / "_inductor" / "graph.py"
        pristine = snapshot(site)
        original = sha256(graph.read_bytes())
        if command == "revert":
            assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
        patched = json.loads(run("verify", "--torch-dir", str(torch_dir), "--json").stdout)["sha256"]
        if command == "apply":
            patched = None  # not known yet: anything but the original must be the one patched form

        if action == "exception":
            monkeypatch.setenv("TORCH_LAZYLOG_FAILPOINT", point)
            failed = run(command, "--torch-dir", str(torch_dir))
            monkeypatch.delenv("TORCH_LAZYLOG_FAILPOINT")
            assert failed.exit_code == 4, (point, failed.output)
            assert "injected failure" in failed.stderr
            assert not list(site.rglob(TEMP)), f"{point}: temp file left after a caught failure"
        else:
            died = tool(
                command, "--torch-dir", str(torch_dir), env={"TORCH_LAZYLOG_FAILPOINT": f"{point}@kill"}
            )
            assert died.returncode == -signal.SIGKILL, (point, died.stderr)

        now = sha256(graph.read_bytes())
        verify = run("verify", "--torch-dir", str(torch_dir), "--json")
        report = json.loads(verify.stdout)
        if now == original:
            assert report["state"] == "eager" and verify.exit_code == 1, (point, report)
        else:
            assert patched in (None, now), f"{point}: graph.py is torn"
            assert report["state"] == "patched", (point, report)
            assert verify.exit_code == 0 or report["problems"], (point, report)

        again = run(command, "--torch-dir", str(torch_dir))
        assert again.exit_code == 0, (point, again.output)
        assert not list(site.rglob(TEMP)), f"{point}: temp file left after recovery"
        final = run("verify", "--torch-dir", str(torch_dir), "--json")
        if command == "apply":
            assert final.exit_code == 0, (point, final.stdout)
        else:
            assert final.exit_code == 1 and json.loads(final.stdout)["problems"] == [], (point, final.stdout)
            assert _without_pycache(snapshot(site)) == _without_pycache(pristine), point
        for optimize, name in ((0, "graph.cpython-311.pyc"), (2, "graph.cpython-311.opt-2.pyc")):
            seen = check_pyc(graph.parent / "__pycache__" / name, graph, optimize)
            assert seen["fresh"] and seen["same_code"], (point, name, seen)
