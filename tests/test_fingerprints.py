"""The releases table in patches/ is generated from the real wheels, by any Python, and shown in the README."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from patcher.core.exitcodes import ExitCode
from tests import realdata
from tests.conftest import need

# Their outcome does not depend on the Python running pytest (see pyproject.toml's markers).
pytestmark = pytest.mark.runner_independent

ROOT = Path(__file__).resolve().parent.parent
RELEASES_FILE = ROOT / "patches" / "lazy_implicit_fallback.releases.json"


def _wheels() -> list[str]:
    return [str(need(lambda v=v: realdata.wheel(v))) for v in realdata.ALL_RELEASES]  # type: ignore[misc]


# The runner makes the table from every wheel once (each release's graph.py parsed by libcst): the
# check over every wheel passes under each other CPython below and under the oldest libcst.


def test_regenerated_table_is_byte_identical(tmp_path: Path, run: Callable[..., Result]) -> None:
    out = tmp_path / "releases.json"
    result = run("fingerprint", "--output", str(out), *_wheels())
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == RELEASES_FILE.read_bytes()


def test_check_notices_a_missing_release(run: Callable[..., Result]) -> None:
    result = run("fingerprint", "--check", _wheels()[-1])
    assert result.exit_code == ExitCode.DIFFERS
    assert "differs from the one these wheels give" in result.stdout


def test_readme_table_is_generated_from_patches() -> None:
    """The release page shows the table `fingerprint --markdown` renders from the shipped releases
    table, which the wheels regenerate byte for byte above."""
    from patcher.install import definitions
    from patcher.install.fingerprint import releases_table
    from tests.docs import pages, text

    table = releases_table(definitions.load().releases)
    assert table.count("\n") == len(realdata.ALL_RELEASES) + 2
    assert any(table in text(page) for page in pages()), "no page shows the release table"


OTHERS = realdata.other_pythons()


def _other(index: int) -> Path:
    """The index-th CPython on this machine other than the runner (any runner: 3.10 to 3.13)."""
    if index < len(OTHERS):
        return OTHERS[index]
    message = f"this machine has {len(OTHERS)} other CPython(s); the test wants at least {index + 1}"
    if realdata.IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def _checkout(
    python: Path, *args: str, cwd: Path | None = None, requirements: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """This checkout, run as it is (never installed) by `python` with only the tool's dependencies."""
    venv = need(lambda: realdata.deps_venv(python, requirements))
    assert isinstance(venv, Path)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "patcher", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )


@pytest.mark.parametrize("index", [0, 1, 2])
def test_fingerprints_do_not_depend_on_the_python_version(index: int) -> None:
    python = _other(index)
    done = _checkout(python, "fingerprint", "--check", *_wheels())
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"matches {len(realdata.ALL_RELEASES)} wheel(s)" in done.stdout


@pytest.mark.parametrize("index", [0, 1, 2])
def test_the_tool_runs_on_other_pythons(index: int, tmp_path: Path) -> None:
    """apply, verify and revert under each other CPython (ROCm images ship 3.10 and 3.12)."""
    from tests.conftest import snapshot
    from tests.helpers import check_pyc, make_pyc

    python = _other(index)
    venv_python = need(lambda: realdata.deps_venv(python))
    assert isinstance(venv_python, Path)
    torch_dir = need(lambda: realdata.release_tree("2.10.0", tmp_path / "site"))
    assert isinstance(torch_dir, Path)
    graph = torch_dir / "_inductor" / "graph.py"
    pyc = make_pyc(graph, "checked-hash", 0, python=str(venv_python / "bin" / "python"))
    pristine = snapshot(torch_dir.parent)

    def run(*args: str) -> int:
        return _checkout(python, *args, "--torch-dir", str(torch_dir), cwd=tmp_path).returncode

    assert [run("verify"), run("apply"), run("verify")] == [1, 0, 0]
    seen = check_pyc(pyc, graph, 0, python=str(venv_python / "bin" / "python"))
    assert seen["fresh"] and seen["same_code"]
    assert [run("revert"), run("verify")] == [0, 1]
    assert {k: v for k, v in snapshot(torch_dir.parent).items() if "__pycache__" not in k} == {
        k: v for k, v in pristine.items() if "__pycache__" not in k
    }


def test_fingerprints_under_the_oldest_libcst_allowed() -> None:
    """The canonical form is the project's: the oldest libcst pyproject.toml allows gives the same
    table as the newest (the runner's, which regenerates it byte for byte above)."""
    from importlib.metadata import version

    lower = next(r for r in realdata.tool_dependencies() if r.startswith("libcst"))
    oldest = re.search(r">=([\d.]+)", lower)
    assert oldest, lower
    pins = [r for r in realdata.tool_dependencies() if not r.startswith("libcst")] + [
        f"libcst=={oldest[1]}.0"
    ]
    done = _checkout(Path(sys.executable), "fingerprint", "--check", *_wheels(), requirements=pins)
    assert done.returncode == 0, done.stdout + done.stderr
    probe = _checkout(Path(sys.executable), "--version", requirements=pins)
    assert probe.returncode == 0
    venv = realdata.deps_venv(Path(sys.executable), pins)
    ask = "import sys; print(sys.version, sys.base_prefix)"
    asked = subprocess.run(
        [str(venv / "bin" / "python"), "-c", ask], capture_output=True, text=True, check=True
    )
    assert asked.stdout.strip() == f"{sys.version} {sys.base_prefix}", "not the runner's Python"
    assert version("libcst") != f"{oldest[1]}.0", "the runner should have the newest libcst, not the oldest"
