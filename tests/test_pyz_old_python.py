"""The single file under Debian bullseye's own Python 3.9 (a debootstrapped root, run by chroot): one
sentence naming that Python, the torch it would import and the way that works for it, exit 4, no
traceback; and that way, taken from a Python 3.10+, patches that torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from patcher import pyz
from patcher.cli import zipmain
from patcher.core.exitcodes import ExitCode
from tests import bullseye
from tests.conftest import need
from tests.helpers import readme_json_fields

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def chroot() -> Path:
    root = need(bullseye.root)
    assert isinstance(root, Path)
    return root


@pytest.fixture
def inside(chroot: Path) -> Iterator[Path]:
    """A directory of this test's own in the shared root (/tmp/<unique>), removed afterwards."""
    work = chroot / "tmp" / f"pyz-{uuid.uuid4().hex}"
    work.mkdir()
    try:
        pyz.build(work / pyz.NAME)
        yield work
    finally:
        shutil.rmtree(work)


def _in_root(chroot: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["chroot", str(chroot), "env", "-i", "PATH=/usr/bin:/bin", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_root_is_bullseyes_python_older_than_the_tool_supports(chroot: Path) -> None:
    done = _in_root(chroot, "python3", "-c", "import sys; print(sys.version_info[:2] < (3, 10), sys.version)")
    assert done.returncode == 0 and done.stdout.startswith("True 3.9."), done.stderr


@pytest.mark.parametrize("args", [["verify"], ["--help"], ["apply", "--dry-run"], []])
def test_one_sentence_and_exit_4_on_python_3_9(chroot: Path, inside: Path, args: list[str]) -> None:
    file = f"/{inside.relative_to(chroot)}/{pyz.NAME}"
    done = _in_root(chroot, "python3", file, *args)
    version = _in_root(chroot, "python3", "-c", "import platform; print(platform.python_version())").stdout
    assert done.returncode == 4 == zipmain.ENVIRONMENT == ExitCode.ENVIRONMENT, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"torch-lazylog: error: Expected Python 3.10 or newer to run {file}, ")
    assert f"`python3.10 {file} apply" in done.stderr  # the file as it was run, not a name it lacks
    assert f"but this is Python {version.strip()} (/usr/bin/python3)" in done.stderr
    assert "apply --torch-dir DIR/torch`" in done.stderr  # no torch in this root to name


def test_the_sentence_names_the_torch_and_its_way_patches_it(
    chroot: Path, inside: Path, release: Callable[[str], Path]
) -> None:
    """A real 2.10.0 tree on the 3.9 Python's path: the sentence names that torch directory, nothing
    is written, and the command it gives, run by a Python 3.10+ over the same files, patches it."""
    torch_dir = release("2.10.0")
    site = inside / "site"
    shutil.copytree(torch_dir.parent, site)
    file = f"/{inside.relative_to(chroot)}/{pyz.NAME}"
    before = sorted((p.relative_to(site), p.read_bytes()) for p in site.rglob("*") if p.is_file())
    done = _in_root(chroot, f"PYTHONPATH=/{site.relative_to(chroot)}", "python3", file, "apply", "--json")
    assert done.returncode == 4 and done.stderr == "", done.stderr
    report = json.loads(done.stdout)
    assert (report["command"], report["exit_code"], report["changed"]) == ("apply", 4, False)
    assert list(report) == readme_json_fields()  # the shape every entry prints, null where not known
    assert [name for name, value in report.items() if value not in (None, [])] == [
        "command", "state", "changed", "exit_code", "message"
    ]  # fmt: skip
    way = f"apply --torch-dir /{(site / 'torch').relative_to(chroot)}`"
    assert way in report["message"], report["message"]
    assert sorted((p.relative_to(site), p.read_bytes()) for p in site.rglob("*") if p.is_file()) == before

    outside = str(chroot / way.removeprefix("apply --torch-dir /").rstrip("`"))
    applied = subprocess.run(
        [sys.executable, str(inside / pyz.NAME), "apply", "--torch-dir", outside],
        capture_output=True, text=True, cwd="/", check=False,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    verified = subprocess.run(
        [sys.executable, str(inside / pyz.NAME), "verify", "--torch-dir", outside, "--json"],
        capture_output=True, text=True, cwd="/", check=False,
    )  # fmt: skip
    assert verified.returncode == 0 and json.loads(verified.stdout)["state"] == "patched", verified.stderr
