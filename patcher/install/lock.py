"""The torch directory's lock, and the names of the temp files a run stages beside their destinations.

Nothing here writes: the lock is an flock on the directory itself, and a killed run's temp files are
found by their suffix (install.fsio removes them once every check has passed).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

TEMP_SUFFIX = ".torch-lazylog.tmp"


@contextlib.contextmanager
def locked(directory: Path, exclusive: bool) -> Iterator[None]:
    """flock on the torch directory itself: serialises runs and creates no file anywhere."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    return path.with_name("." + path.name + TEMP_SUFFIX)


def leftovers(directories: list[Path]) -> list[Path]:
    found = []
    for directory in directories:
        with contextlib.suppress(OSError):
            found += [directory / n for n in sorted(os.listdir(directory)) if n.endswith(TEMP_SUFFIX)]
    return found
