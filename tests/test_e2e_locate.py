"""End to end on real torch: `verify --runtime` runs in the environment the tool was given, and says
so when that environment keeps it from exercising Inductor's path. The shared cached torch venvs are
read, patched and reverted by this checkout's tool, never installed into."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import torch_venv
from tests.helpers import probe_under_coverage

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("shared_torch_venvs")]


def _tool(python: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "patcher", *args, "--python", str(python), "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        timeout=1800,
    )
    assert done.stdout, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


@pytest.mark.parametrize("switch", ["TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE"])
def test_runtime_check_switched_off_by_the_environment_exits_4_with_the_reason(switch: str) -> None:
    python = torch_venv("2.10.0") / "bin" / "python"
    assert _tool(python, "apply")[0] == 0
    try:
        code, report = _tool(python, "verify", "--runtime", env={switch: "1"})
        assert code == 4, report
        assert report["state"] == "patched" and report["checks"] == [], report
        message = report["message"]
        assert message.startswith("Expected the runtime check to exercise Inductor's"), message
        assert f"but {switch}=1 in the environment switches torch.compile off" in message
        assert "could not run (no check failed" in message
    finally:
        assert _tool(python, "revert")[0] == 0


def test_the_probe_names_the_switch_and_reports_no_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """patcher.in_target.inductor itself, under coverage, with torch.compile switched off."""
    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")
    venv = torch_venv("2.13.0")
    (graph,) = venv.glob("lib/python3.*/site-packages/torch/_inductor/graph.py")
    result = probe_under_coverage(venv / "bin" / "python", {"depth": 2, "expect_graph": str(graph)}, tmp_path)
    assert result["error"] is None and result["checks"] == [], result
    assert result["unable"].startswith(
        "TORCH_COMPILE_DISABLE=1 in the environment switches torch.compile off"
    )


def test_runtime_check_imports_the_torch_on_pythonpath(tmp_path: Path) -> None:
    """An interpreter whose only torch is on PYTHONPATH (the server's): located, and imported by the
    runtime check, in that environment."""
    venv = torch_venv("2.13.0")
    (site,) = venv.glob("lib/python3.*/site-packages")
    bare = tmp_path / "bare"
    subprocess.run([str(venv / "bin" / "python"), "-m", "venv", "--without-pip", str(bare)], check=True)
    code, report = _tool(bare / "bin" / "python", "verify", "--runtime", env={"PYTHONPATH": str(site)})
    assert code == 0, report
    assert (report["torch_dir"], report["state"]) == (str(site / "torch"), "ships-lazy")
    assert len(report["checks"]) == 5 and all(c["passed"] for c in report["checks"]), report


def test_runtime_with_torch_dir_alone_runs_in_the_interpreter_that_owns_it() -> None:
    """`verify --runtime --torch-dir DIR` from a Python without torch: the probe runs in DIR's owner
    (the venv's python, found as docs/finding-torch.md says), never in the tool's own Python."""
    venv = torch_venv("2.13.0")
    (torch_dir,) = venv.glob("lib/python3.*/site-packages/torch")
    done = subprocess.run(
        [sys.executable, "-m", "patcher", "verify", "--runtime", "--torch-dir", str(torch_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    report = json.loads(done.stdout)
    assert (done.returncode, report["state"]) == (0, "ships-lazy"), report
    names = {check["name"]: check["passed"] for check in report["checks"]}
    assert names.get("not_formatted_when_filtered") is True and all(names.values()), report["checks"]
