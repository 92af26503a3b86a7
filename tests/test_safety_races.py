"""Concurrency, hardlinks and symlinks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from tests.conftest import sha256, snapshot

RACERS = 8


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "patcher", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _listing(torch_dir: Path) -> set[str]:
    return {str(p.relative_to(torch_dir)) for p in torch_dir.rglob("*")}


def test_eight_concurrent_applies_rewrite_once(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    files_before = _listing(torch_dir)
    procs = [_spawn("apply", "--torch-dir", str(torch_dir)) for _ in range(RACERS)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert sum(r["changed"] for r in reports) == 1
    assert {r["state"] for r in reports} == {"patched"}
    assert len({r["sha256"] for r in reports}) == 1
    assert run("verify", "--torch-dir", str(torch_dir)).exit_code == 0
    assert _listing(torch_dir) == files_before, "the lock (or a temp file) left something inside torch/"


def test_apply_racing_revert_ends_consistent(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.11.0")
    pristine = snapshot(torch_dir.parent)
    files_before = _listing(torch_dir)
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    procs = [_spawn("revert" if i % 2 else "apply", "--torch-dir", str(torch_dir)) for i in range(RACERS)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert json.loads(out)["state"] in ("patched", "pristine")
    final = run("verify", "--torch-dir", str(torch_dir), "--json")
    report = json.loads(final.stdout)
    if report["state"] == "pristine":
        assert final.exit_code == 1 and report["problems"] == []
        assert snapshot(torch_dir.parent) == pristine
    else:
        assert final.exit_code == 0, final.stdout
    assert _listing(torch_dir) == files_before


def test_hardlinked_graph_py_keeps_the_other_links_bytes(
    release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    record = next(torch_dir.parent.glob("torch-*.dist-info")) / "RECORD"
    store = tmp_path / "uv-cache"
    store.mkdir()
    os.link(graph, store / "graph.py")  # uv's default link mode on Linux
    os.link(record, store / "RECORD")
    shared = {p.name: p.read_bytes() for p in store.iterdir()}

    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    assert {p.name: p.read_bytes() for p in store.iterdir()} == shared
    assert graph.stat().st_ino != (store / "graph.py").stat().st_ino
    assert graph.read_bytes() != shared["graph.py"]

    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert {p.name: p.read_bytes() for p in store.iterdir()} == shared
    assert graph.read_bytes() == shared["graph.py"]


def test_symlinked_graph_py_is_refused_not_written_through(
    release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    target = tmp_path / "store" / "graph.py"
    target.parent.mkdir()
    graph.rename(target)
    graph.symlink_to(target)
    stored = sha256(target.read_bytes())
    before = snapshot(torch_dir.parent)

    verify = run("verify", "--torch-dir", str(torch_dir))
    assert verify.exit_code == 1  # reading through the link is fine
    result = run("apply", "--torch-dir", str(torch_dir))
    assert result.exit_code == 4
    assert "symbolic link" in result.stderr and "--link-mode=copy" in result.stderr
    assert sha256(target.read_bytes()) == stored
    assert snapshot(torch_dir.parent) == before


def test_symlinked_torch_dir_is_refused(
    release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    real = release("2.10.0")
    link = tmp_path / "elsewhere" / "torch"
    link.parent.mkdir()
    link.symlink_to(real, target_is_directory=True)
    before = snapshot(real.parent)
    result = run("apply", "--torch-dir", str(link))
    assert result.exit_code == 4
    assert "symbolic link" in result.stderr
    assert snapshot(real.parent) == before
