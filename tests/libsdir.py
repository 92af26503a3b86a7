"""The single file's libcst directory, as docs/start-time.md says to make it: `pip install --target`
for one Python and platform (libcst's native parser cannot load from inside the zip). Made once per
Python and machine in the real-data cache."""

from __future__ import annotations

import platform
import shutil
from pathlib import Path

from patcher.cli.singlefile import LIBS_NAME
from tests import realdata


def libcst_dir(minor: str, machine: str | None = None) -> Path:
    """A torch-lazylog-libs directory holding libcst (and what it needs) for CPython `minor` on Linux."""
    machine = machine or platform.machine()
    directory = realdata.CACHE / "pyz-libs" / f"py{minor}-{machine}" / LIBS_NAME
    ready = directory.parent / ".complete"
    if ready.exists():
        return directory
    with realdata.cache_lock(f"pyz-libs-{minor}-{machine}"):
        if ready.exists():
            return directory
        shutil.rmtree(directory, ignore_errors=True)
        realdata.pip(
            ["install", "--quiet", "--target", str(directory), "--only-binary=:all:", "--python-version", minor,
             "--platform", f"manylinux2014_{machine}", *[r for r in realdata.tool_dependencies() if r.startswith("libcst")]],
            f"libcst for Python {minor} on {machine}",
        )  # fmt: skip
        ready.touch()
    return directory
