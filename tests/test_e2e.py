"""End to end on real torch: venvs with torch 2.10.0, 2.11.0, 2.12.1 (CUDA builds, run on the CPU) and
2.13.0 (CPU build), the tool installed from this checkout, Inductor compiling for real."""

from __future__ import annotations

import hashlib
import shlex
import subprocess
import sys
from pathlib import Path
from unittest.mock import ANY

import pytest

from patcher.install import runtime
from tests import realdata
from tests.conftest import need, torch_venv
from tests.helpers import probe_under_coverage, venv_tool

DEEP = 16  # fan-in-2 chain depth: the eager text is large, the patched compile is not

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("shared_torch_venvs")]


def _graph(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3.*/site-packages/torch/_inductor/graph.py"))
    assert len(found) == 1
    return found[0]


def _pristine_sha(version: str) -> str:
    return hashlib.sha256(need(lambda: realdata.graph_source(version))).hexdigest()  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["2.10.0", "2.11.0", "2.12.1"])
def test_real_torch_end_to_end(version: str, tmp_path: Path) -> None:
    venv = torch_venv(version)
    python = str(venv / "bin" / "python")
    code, report = venv_tool(venv, "revert")  # a previous, interrupted run may have left it patched
    assert code == 0, report
    graph = _graph(venv)
    original = graph.read_bytes()
    assert hashlib.sha256(original).hexdigest() == _pristine_sha(version), (
        "the cached venv's torch is not pristine"
    )

    code, report = venv_tool(venv, "verify", "--runtime")
    assert code == 1 and report["state"] == "pristine", report
    checks = {c["name"]: c["passed"] for c in report["checks"]}
    assert checks["not_formatted_when_filtered"] is False
    assert checks["info_text_identical"] and checks["error_carries_operator_text"]

    deep: dict[str, object] = {"depth": DEEP, "expect_graph": str(graph)}
    before = probe_under_coverage(Path(python), deep, tmp_path)
    assert before["error"] is None, before
    assert before["checks"][:2] == [
        {"name": "compiled_result_correct", "passed": True, "detail": ANY},
        {"name": "not_formatted_when_filtered", "passed": False, "detail": ANY},
    ]

    code, report = venv_tool(venv, "apply")
    assert code == 0 and report["changed"] is True and report["release"] == version, report
    code, report = venv_tool(venv, "verify")
    assert code == 0, report
    code, report = venv_tool(venv, "verify", "--runtime")
    assert code == 0, report
    assert (
        f"{len(report['checks'])} checks passed" in report["message"]
    )  # the sentence counts what JSON lists
    assert {c["name"]: c["passed"] for c in report["checks"]} == {
        "static": True,
        "compiled_result_correct": True,
        "not_formatted_when_filtered": True,
        "info_text_identical": True,
        "error_carries_operator_text": True,
    }

    after = probe_under_coverage(Path(python), deep, tmp_path)
    assert after["error"] is None, after
    assert after["checks"][:2] == [
        {"name": "compiled_result_correct", "passed": True, "detail": ANY},
        {"name": "not_formatted_when_filtered", "passed": True, "detail": ANY},
    ]

    code, report = venv_tool(venv, "revert")
    assert code == 0 and report["changed"] is True, report
    assert graph.read_bytes() == original
    code, report = venv_tool(venv, "verify", "--runtime")
    assert code == 1 and report["state"] == "pristine", report


def test_real_torch_2_13_is_natively_lazy() -> None:
    venv = torch_venv("2.13.0")
    code, report = venv_tool(venv, "verify", "--runtime")
    assert code == 0, report
    assert (report["state"], report["release"]) == ("ships-lazy", "2.13.0")
    assert all(c["passed"] for c in report["checks"])
    code, report = venv_tool(venv, "apply")
    assert code == 0 and report["changed"] is False and report["state"] == "ships-lazy"


def test_runtime_check_reports_an_interpreter_without_torch(tmp_path: Path) -> None:
    venv = tmp_path / "no-torch"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    result = runtime.probe(str(venv / "bin" / "python"), str(tmp_path / "graph.py"))  # no torch to have it
    assert result["error"] is not None and "import torch failed" in result["error"]


def _user_caches() -> dict[str, tuple[int, int]]:
    """Every file (size, mtime) under the places Inductor and Triton cache to by default."""
    import tempfile

    home = Path.home()
    places = [Path(tempfile.gettempdir()), home / ".cache", home / ".triton"]
    roots = [
        p
        for place in places
        if place.is_dir()
        for p in place.iterdir()
        if ("torch" in p.name or "triton" in p.name) and p.resolve() != realdata.CACHE.resolve()
    ]
    found = {}
    for root in roots:
        for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
            st = path.lstat()
            found[str(path)] = (st.st_size, st.st_mtime_ns)
    return found


def test_runtime_check_leaves_no_compiled_artifacts() -> None:
    venv = torch_venv("2.13.0")
    before = _user_caches()
    code, report = venv_tool(venv, "verify", "--runtime")
    assert code == 0, report
    assert _user_caches() == before


def test_runtime_check_without_importable_torch_is_an_environment_error(tmp_path: Path) -> None:
    site = need(lambda: realdata.release_tree("2.10.0", tmp_path / "site"))
    venv = tmp_path / "no-torch"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    done = subprocess.run(
        [sys.executable, "-m", "patcher", "verify", "--runtime", "--python", str(venv / "bin" / "python"),
         "--torch-dir", str(site)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    assert "but it finds no torch" in done.stderr  # said by locating, before anything is imported


def test_the_probe_module_itself_on_real_torch(tmp_path: Path) -> None:
    venv = torch_venv("2.13.0")
    python = venv / "bin" / "python"
    params: dict[str, object] = {"depth": 4, "expect_graph": str(_graph(venv))}
    result = probe_under_coverage(python, params, tmp_path)
    assert result["error"] is None, result
    assert [c["name"] for c in result["checks"]] == [
        "compiled_result_correct", "not_formatted_when_filtered", "info_text_identical", "error_carries_operator_text",
    ]  # fmt: skip
    assert all(c["passed"] for c in result["checks"]), result
    elsewhere = probe_under_coverage(python, {**params, "expect_graph": str(tmp_path / "graph.py")}, tmp_path)
    assert elsewhere["checks"] == [] and elsewhere["graph_py"].endswith("graph.py")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    missing = probe_under_coverage(bare / "bin" / "python", params, tmp_path)
    assert missing["error"].startswith("import torch failed"), missing


def test_the_reinstall_advice_resolves_on_the_index() -> None:
    """Where only a reinstall helps (graph.py edited after apply), the printed command names the
    distribution's own version (METADATA: 2.10.0, not version.py's 2.10.0+cu128) and the venv's
    interpreter, and pip resolves it: its --dry-run exits 0."""
    venv = torch_venv("2.10.0")
    graph = _graph(venv)
    original = graph.read_bytes()
    try:
        assert venv_tool(venv, "apply")[0] == 0
        patched = graph.read_bytes()
        graph.write_bytes(patched + b"# edited after apply\n")
        code, report = venv_tool(venv, "revert")
        assert code == 3 and report["state"] == "edited", report
        advice = report["next"]
        assert advice == f"{venv / 'bin' / 'python'} -m pip install --force-reinstall --no-deps torch==2.10.0"
        done = subprocess.run(
            [*shlex.split(advice), "--dry-run", "--quiet"],
            capture_output=True,
            text=True,
            env=realdata.pip_env(),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        graph.write_bytes(patched)
    finally:
        assert venv_tool(venv, "revert")[0] == 0
        assert graph.read_bytes() == original
