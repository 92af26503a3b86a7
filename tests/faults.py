"""Fault injection and tracing for the tool's writes, from outside the shipped code.

The tool writes only through patcher.install.fsio, which calls the `os` module for every step. This module
puts a proxy in place of `patcher.install.fsio.os`: every write step of a file is a named point —
write:NAME, fsync:NAME (staging NAME's temp file), replace:NAME, replaced:NAME (moving it into
place), unlink:NAME, unlinked:NAME (a removal) — that can be traced or made to fail. In-process
tests install it with monkeypatch; a tool run as its own process gets it from
tests/faultinject/sitecustomize.py, which reads FAULTS_ENV (JSON: {"trace": FILE, "point": P,
"action": A}). Actions: raise (an EIO), enospc, kill (SIGKILL), sigint, sigterm (the signal to
itself), swap (the destination replaced by other bytes, as a concurrent install would).
"""

from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path
from types import ModuleType
from typing import Any

FAULTS_ENV = "TORCH_LAZYLOG_TEST_FAULTS"
SITE_DIR = Path(__file__).resolve().parent / "faultinject"
TEMP_SUFFIX = ".torch-lazylog.tmp"
SWAPPED = b"# replaced by another installer while torch-lazylog ran\n"


def _name(path: object) -> str:
    name = os.path.basename(os.fsdecode(path))  # type: ignore[arg-type]
    if name.endswith(TEMP_SUFFIX):
        name = name[1 : -len(TEMP_SUFFIX)]
    return name


class Faults:
    """Stands in for `os` inside patcher.install.fsio."""

    def __init__(self, real: ModuleType, point: str | None, action: str, trace: str | None) -> None:
        self._real, self._point, self._action, self._trace = real, point, action, trace
        self._fds: dict[int, Path] = {}  # a temp file's descriptor -> its destination
        self._written: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _hit(self, point: str, path: object = None) -> None:
        if self._trace:
            with open(self._trace, "a", encoding="utf-8") as handle:
                handle.write(point + "\n")
        if point != self._point:
            return
        action = self._action
        if action == "kill":
            self._real.kill(self._real.getpid(), signal.SIGKILL)
        if action in ("sigint", "sigterm"):
            self._real.kill(self._real.getpid(), signal.SIGINT if action == "sigint" else signal.SIGTERM)
            return
        if action == "swap" and path is not None:
            Path(os.fsdecode(path)).write_bytes(SWAPPED)  # type: ignore[arg-type]
            return
        code = errno.ENOSPC if action == "enospc" else errno.EIO
        raise OSError(code, f"injected failure at {point}")

    def open(self, path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        fd: int = self._real.open(path, flags, mode, **kwargs)
        if os.fsdecode(path).endswith(TEMP_SUFFIX):
            self._fds[fd] = Path(os.fsdecode(path)).with_name(_name(path))
        return fd

    def write(self, fd: int, data: Any) -> int:
        if fd in self._fds and fd not in self._written:
            self._written.add(fd)
            self._hit(f"write:{self._fds[fd].name}", self._fds[fd])
        written: int = self._real.write(fd, data)
        return written

    def fsync(self, fd: int) -> None:
        if fd in self._fds:
            self._hit(f"fsync:{self._fds[fd].name}", self._fds[fd])
        self._real.fsync(fd)

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        self._written.discard(fd)
        self._real.close(fd)

    def replace(self, src: Any, dst: Any) -> None:
        self._hit(f"replace:{_name(dst)}", dst)
        self._real.replace(src, dst)
        self._hit(f"replaced:{_name(dst)}")

    def unlink(self, path: Any) -> None:
        if os.fsdecode(path).endswith(TEMP_SUFFIX):
            self._real.unlink(path)
            return
        self._hit(f"unlink:{_name(path)}", path)
        self._real.unlink(path)
        self._hit(f"unlinked:{_name(path)}")


def install(fsio: ModuleType, point: str | None, action: str = "raise", trace: str | None = None) -> Faults:
    faults = Faults(os, point, action, trace)
    fsio.os = faults  # type: ignore[attr-defined]
    return faults


def env(point: str | None, action: str = "raise", trace: Path | None = None) -> dict[str, str]:
    """The environment for a tool process that should trace or fail its writes."""
    config = {"point": point, "action": action, "trace": str(trace) if trace else None}
    path = os.pathsep.join(p for p in (str(SITE_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return {FAULTS_ENV: json.dumps(config), "PYTHONPATH": path}


def install_from_env() -> None:
    raw = os.environ.get(FAULTS_ENV)
    if not raw:
        return
    try:
        from patcher.install import fsio
    except ImportError:  # an interpreter without the tool (a target interpreter): nothing to do
        return
    config = json.loads(raw)
    install(fsio, config["point"], config["action"], config["trace"])
