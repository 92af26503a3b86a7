"""The real-data cache keys an environment by what it is: a venv's `bin/python` is a link that a venv
made again under the same name (`rm -rf .venv && python3.12 -m venv .venv`) points at another
Python, and Python 3.10's venv links a venv made from a venv's python to that link."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import realdata
from tests.conftest import need_other_python


def _venv(python: Path, where: Path) -> Path:
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    return where


def test_an_interpreter_is_its_resolved_file_and_its_version(tmp_path: Path) -> None:
    runner = _venv(Path(sys.executable), tmp_path / "runner")
    other = need_other_python()
    assert realdata.interpreter(runner / "bin" / "python") == (Path(sys.executable).resolve(), sys.version)
    path, version = realdata.interpreter(other)
    assert path == other.resolve() and version != sys.version


def test_a_cached_venv_is_ready_only_while_it_runs_the_python_it_was_made_by(tmp_path: Path) -> None:
    venv = _venv(Path(sys.executable).resolve(), tmp_path / "cached")
    (venv / ".ready").touch()
    assert realdata._ready(venv)
    # Its link now leads to another Python, as when the venv it was made through is made again.
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(need_other_python())
    assert not realdata._ready(venv)
