"""Bytecode is never left stale: every mode x optimisation level, other interpreters, pycache prefix."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests.conftest import need_other_python
from tests.helpers import MODES, OPT_LEVELS, cache_tag, check_pyc, make_pyc, tool

FLAGS = {"timestamp": 0, "checked-hash": 3, "unchecked-hash": 1}


def _other_python() -> str:
    """Any CPython on this machine other than the runner: its cache tag is not ours."""
    return str(need_other_python())


def _assert_fresh(pycs: dict[int, Path], graph: Path, mode: str, python: str = sys.executable) -> None:
    for optimize, path in pycs.items():
        seen = check_pyc(path, graph, optimize, python)
        assert seen == {"flags": FLAGS[mode], "magic_ok": True, "fresh": True, "same_code": True}, (
            path,
            seen,
        )


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_and_level_runs_the_current_source(
    mode: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    graph = release("2.10.0") / "_inductor" / "graph.py"
    torch_dir = graph.parent.parent
    pycs = {opt: make_pyc(graph, mode, opt) for opt in OPT_LEVELS}
    _assert_fresh(pycs, graph, mode)
    original = graph.read_bytes()

    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    assert graph.read_bytes() != original
    _assert_fresh(pycs, graph, mode)
    assert run("verify", "--torch-dir", str(torch_dir)).exit_code == 0

    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert graph.read_bytes() == original
    _assert_fresh(pycs, graph, mode)


def test_a_stale_unchecked_pyc_fails_verify_and_apply_repairs_it(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    graph = release("2.10.0") / "_inductor" / "graph.py"
    torch_dir = graph.parent.parent
    pyc = make_pyc(graph, "unchecked-hash", 0)  # compiled from the original source
    stale = pyc.read_bytes()
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    pyc.write_bytes(stale)  # as if something restored the old cache (an image layer, a copy)

    result = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["state"] == "patched"
    assert any("stale unchecked-hash pyc" in p for p in report["problems"])

    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    _assert_fresh({0: pyc}, graph, "unchecked-hash")
    assert run("verify", "--torch-dir", str(torch_dir)).exit_code == 0


def test_another_interpreters_pyc_is_removed(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    other = _other_python()
    graph = release("2.10.0") / "_inductor" / "graph.py"
    foreign = make_pyc(graph, "unchecked-hash", 0, python=other)
    own = make_pyc(graph, "timestamp", 0)
    assert foreign.name != own.name and foreign.exists()
    assert run("apply", "--torch-dir", str(graph.parent.parent)).exit_code == 0
    assert not foreign.exists()
    _assert_fresh({0: own}, graph, "timestamp")


def test_the_given_interpreter_rebuilds_its_own_pyc(
    release: Callable[[str], Path], run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _other_python()
    graph = release("2.10.0") / "_inductor" / "graph.py"
    torch_dir = graph.parent.parent
    monkeypatch.setenv("PYTHONPATH", str(torch_dir.parent))  # the given interpreter imports this torch
    foreign = make_pyc(graph, "checked-hash", 1, python=other)
    ours = make_pyc(graph, "timestamp", 0)
    assert run("apply", "--python", other, "--torch-dir", str(torch_dir)).exit_code == 0
    _assert_fresh({1: foreign}, graph, "checked-hash", python=other)
    assert not ours.exists(), f"{cache_tag()} is not the target interpreter's tag: its pyc must go"
    assert run("revert", "--python", other, "--torch-dir", str(torch_dir)).exit_code == 0
    _assert_fresh({1: foreign}, graph, "checked-hash", python=other)


def test_pycache_prefix_is_honoured(
    release: Callable[[str], Path],
    run: Callable[..., Result],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph = release("2.10.0") / "_inductor" / "graph.py"
    prefix = tmp_path / "pycache-prefix"
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(prefix))
    prefixed = make_pyc(graph, "unchecked-hash", 0, env=env)
    assert prefixed.is_relative_to(prefix)
    local = make_pyc(graph, "timestamp", 2)
    # The tool's own interpreter is the target here: it starts with the prefix, as a user's would.
    applied = tool("apply", "--torch-dir", str(graph.parent.parent), env={"PYTHONPYCACHEPREFIX": str(prefix)})
    assert applied.returncode == 0, applied.stderr
    _assert_fresh({0: prefixed}, graph, "unchecked-hash")
    _assert_fresh({2: local}, graph, "timestamp")
    assert run("verify", "--torch-dir", str(graph.parent.parent)).exit_code == 0


def test_a_corrupt_pyc_beside_a_patched_torch_is_removed_not_compiled(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """A pyc file with a header no Python writes (random bytes): apply removes it, exit 0."""
    torch_dir = release("2.10.0")
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    junk = torch_dir / "_inductor" / "__pycache__" / f"graph.{cache_tag()}.opt-1.pyc"
    junk.parent.mkdir(exist_ok=True)
    junk.write_bytes(bytes(range(100)))
    result = run("apply", "--torch-dir", str(torch_dir))
    assert result.exit_code == 0, result.output
    assert not junk.exists()
    assert run("verify", "--torch-dir", str(torch_dir)).exit_code == 0
