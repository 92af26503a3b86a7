"""Debian bullseye's own Python 3.9, a root made once by debootstrap (minbase + python3) and kept in
the real-data cache: what an image on torch 2.4 to 2.8 with Python 3.9 gives the single file. Run with
`chroot ROOT python3 ...` (root only), no Docker needed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests import images, realdata

SUITE = "bullseye"


def root() -> Path:
    """The bullseye root, debootstrapped once under a lock; a half-made one is made again."""
    if os.geteuid() != 0:
        raise realdata.Unavailable("debootstrap and chroot need root (the tests and CI run as root here)")
    directory = realdata.CACHE / "chroots" / SUITE
    ready = directory / ".complete"
    if ready.exists():
        return directory
    with realdata.cache_lock(f"chroot-{SUITE}"):
        if ready.exists():
            return directory
        if shutil.which("debootstrap") is None:
            raise realdata.Unavailable("debootstrap is not installed (`.ci/run` installs it)")
        shutil.rmtree(directory, ignore_errors=True)
        directory.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=python3", SUITE, str(directory), images._mirror()],
            capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            shutil.rmtree(directory, ignore_errors=True)
            raise realdata.Unavailable(
                f"could not debootstrap {SUITE}: {(done.stderr or done.stdout)[-600:]}"
            )
        ready.touch()
    return directory


if __name__ == "__main__":
    root()  # made ahead (`python -m tests.bullseye`): `.ci/run` starts it beside the tests
