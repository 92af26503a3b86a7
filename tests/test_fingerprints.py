"""The releases table in patches/ is generated from the real wheels, by any Python, and shown in the README."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests import realdata
from tests.conftest import need, need_python

ROOT = Path(__file__).resolve().parent.parent
RELEASES_FILE = ROOT / "patches" / "lazy_implicit_fallback.releases.json"


def _wheels() -> list[str]:
    return [str(need(lambda v=v: realdata.wheel(v))) for v in realdata.ALL_RELEASES]  # type: ignore[misc]


def test_regenerated_table_is_byte_identical(tmp_path: Path, run: Callable[..., Result]) -> None:
    out = tmp_path / "releases.json"
    result = run("fingerprint", "--output", str(out), *_wheels())
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == RELEASES_FILE.read_bytes()
    check = run("fingerprint", "--check", *_wheels())
    assert check.exit_code == 0, check.output


def test_check_notices_a_missing_release(run: Callable[..., Result]) -> None:
    result = run("fingerprint", "--check", *_wheels()[:-1])
    assert result.exit_code == 1
    assert "differs" in result.stderr


def test_readme_table_is_generated_from_patches(run: Callable[..., Result]) -> None:
    result = run("fingerprint", "--markdown", *_wheels())
    assert result.exit_code == 0
    assert result.stdout.count("\n") == len(realdata.ALL_RELEASES) + 2
    assert result.stdout in (ROOT / "README.md").read_text()


def _tool_venv(python: Path) -> Path:
    venv = realdata.CACHE / "venvs" / f"tool-{python.name}"
    if not (venv / "bin" / "python").exists():
        subprocess.run([str(python), "-m", "venv", str(venv)], check=True, capture_output=True)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return venv


@pytest.mark.parametrize("minor", ["3.10", "3.12"])
def test_fingerprints_do_not_depend_on_the_python_version(minor: str) -> None:
    venv = _tool_venv(need_python(minor))
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [str(venv / "bin" / "torch-lazylog"), "fingerprint", "--check", *_wheels()],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"matches {len(realdata.ALL_RELEASES)} wheel(s)" in done.stdout
    assert sys.version_info[:2] != tuple(int(x) for x in minor.split("."))


@pytest.mark.parametrize("minor", ["3.10", "3.12"])
def test_the_tool_runs_on_other_pythons(minor: str, tmp_path: Path) -> None:
    """apply, verify and revert under Python 3.10 (the ROCm ubuntu22.04 images) and 3.12."""
    from tests.conftest import snapshot
    from tests.helpers import check_pyc, make_pyc

    venv = _tool_venv(need_python(minor))
    torch_dir = need(lambda: realdata.release_tree("2.10.0", tmp_path / "site"))
    assert isinstance(torch_dir, Path)
    graph = torch_dir / "_inductor" / "graph.py"
    pyc = make_pyc(graph, "checked-hash", 0, python=str(venv / "bin" / "python"))
    pristine = snapshot(torch_dir.parent)
    tool = str(venv / "bin" / "torch-lazylog")

    def run(*args: str) -> int:
        return subprocess.run([tool, *args, "--torch-dir", str(torch_dir)], capture_output=True).returncode

    assert [run("verify"), run("apply"), run("verify")] == [1, 0, 0]
    seen = check_pyc(pyc, graph, 0, python=str(venv / "bin" / "python"))
    assert seen["fresh"] and seen["same_code"]
    assert [run("revert"), run("verify")] == [0, 1]
    assert {k: v for k, v in snapshot(torch_dir.parent).items() if "__pycache__" not in k} == {
        k: v for k, v in pristine.items() if "__pycache__" not in k
    }
