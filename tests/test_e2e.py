"""End to end on real torch: venvs with torch 2.10.0, 2.11.0, 2.12.1 (CUDA builds, run on the CPU) and
2.13.0 (CPU build), the tool installed from this checkout, Inductor compiling for real."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from patcher import runtime
from tests import realdata
from tests.conftest import need

ROOT = Path(__file__).resolve().parent.parent
DEEP = 16  # fan-in-2 chain depth: the eager text is large, the patched compile is not

pytestmark = pytest.mark.e2e


def _venv(version: str) -> Path:
    venv = need(lambda: realdata.torch_venv(version))
    assert isinstance(venv, Path)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return venv


def _tool(venv: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [str(venv / "bin" / "torch-lazylog"), *args, "--json"], capture_output=True, text=True, timeout=1800
    )
    assert done.stdout, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def _graph(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3.*/site-packages/torch/_inductor/graph.py"))
    assert len(found) == 1
    return found[0]


def _pristine_sha(version: str) -> str:
    return hashlib.sha256(need(lambda: realdata.graph_source(version))).hexdigest()  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["2.10.0", "2.11.0", "2.12.1"])
def test_real_torch_end_to_end(version: str) -> None:
    venv = _venv(version)
    python = str(venv / "bin" / "python")
    code, report = _tool(venv, "revert")  # a previous, interrupted run may have left it patched
    assert code == 0, report
    graph = _graph(venv)
    original = graph.read_bytes()
    assert hashlib.sha256(original).hexdigest() == _pristine_sha(version), (
        "the cached venv's torch is not pristine"
    )

    code, report = _tool(venv, "verify", "--runtime")
    assert code == 1 and report["state"] == "eager", report
    checks = {c["name"]: c["passed"] for c in report["checks"]}
    assert checks["not_formatted_when_filtered"] is False
    assert checks["info_text_identical"] and checks["error_carries_operator_text"]

    before = runtime.probe(python, depth=DEEP, phases=("filtered",))
    assert before["error"] is None, before
    assert before["calls"]["filtered"] >= 1
    assert before["runs"][0]["correct"] is True

    code, report = _tool(venv, "apply")
    assert code == 0 and report["changed"] is True and report["release"] == version, report
    code, report = _tool(venv, "verify")
    assert code == 0, report
    code, report = _tool(venv, "verify", "--runtime")
    assert code == 0, report
    assert {c["name"]: c["passed"] for c in report["checks"]} == {
        "static": True,
        "compiled_result_correct": True,
        "not_formatted_when_filtered": True,
        "info_text_identical": True,
        "error_carries_operator_text": True,
    }

    after = runtime.probe(python, depth=DEEP, phases=("filtered",))
    assert after["error"] is None, after
    assert after["calls"]["filtered"] == 0
    assert after["runs"][0]["correct"] is True

    code, report = _tool(venv, "revert")
    assert code == 0 and report["changed"] is True, report
    assert graph.read_bytes() == original
    code, report = _tool(venv, "verify", "--runtime")
    assert code == 1 and report["state"] == "eager", report


def test_real_torch_2_13_is_natively_lazy() -> None:
    venv = _venv("2.13.0")
    code, report = _tool(venv, "verify", "--runtime")
    assert code == 0, report
    assert (report["state"], report["release"]) == ("native", "2.13.0")
    assert all(c["passed"] for c in report["checks"])
    code, report = _tool(venv, "apply")
    assert code == 0 and report["changed"] is False and report["state"] == "native"


def test_runtime_check_reports_an_interpreter_without_torch(tmp_path: Path) -> None:
    venv = tmp_path / "no-torch"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    result = runtime.probe(str(venv / "bin" / "python"), phases=("filtered",))
    assert result["error"] is not None and "import torch failed" in result["error"]


def _user_caches() -> set[str]:
    import tempfile

    home = Path.home()
    places = [Path(tempfile.gettempdir()), home / ".cache", home / ".triton", home / ".cache" / "torch"]
    return {
        str(p)
        for place in places
        if place.is_dir()
        for p in place.iterdir()
        if "torch" in p.name or "triton" in p.name
    }


def test_runtime_check_leaves_no_compiled_artifacts() -> None:
    venv = _venv("2.13.0")
    before = _user_caches()
    code, report = _tool(venv, "verify", "--runtime")
    assert code == 0, report
    assert _user_caches() == before


def test_runtime_check_without_importable_torch_is_an_environment_error(tmp_path: Path) -> None:
    site = need(lambda: realdata.release_tree("2.10.0", tmp_path / "site"))
    venv = tmp_path / "no-torch"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    done = subprocess.run(
        [str(_venv("2.13.0") / "bin" / "torch-lazylog"), "verify", "--runtime", "--python", str(venv / "bin" / "python"),
         "--torch-dir", str(site)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    assert "import torch failed" in done.stderr
