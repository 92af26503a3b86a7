"""graph.py's cached bytecode: find it, tell whether it is stale, and rebuild it in its own mode.

A pyc is rebuilt by the interpreter that will load it (magic number and cache tag must match), in
its own invalidation mode (PEP 552: timestamp, checked-hash, unchecked-hash) and optimisation level.
A pyc for another interpreter's cache tag is removed: Python rebuilds it from source when needed.
"""

from __future__ import annotations

import _imp
import os
import re
import sys
from pathlib import Path

from patcher.core.hashes import siphash
from patcher.core.installed import Interpreter, Mode, Pyc
from patcher.install.interpreter import call


def _named(name: str, stem: str) -> tuple[str, int] | None:
    """(cache tag, optimisation level) of `stem.TAG[.opt-N].pyc`, as importlib names pycs."""
    found = re.fullmatch(rf"{re.escape(stem)}\.([^.]+)(?:\.opt-([0-9]+))?\.pyc", name)
    return (found[1], int(found[2] or 0)) if found else None


_MODES: dict[int, Mode] = {0: "timestamp", 1: "unchecked-hash", 3: "checked-hash"}  # PEP 552's flags


def cache_dirs(source: Path, pycache_prefix: str | None) -> list[Path]:
    """Where Python looks for `source`'s bytecode: __pycache__, and the prefix tree if set."""
    dirs = [source.parent / "__pycache__"]
    if pycache_prefix:
        head = os.path.abspath(source.parent)
        dirs.append(Path(pycache_prefix) / head.lstrip(os.sep))
    return dirs


def _pyc_at(path: Path, tag: str, optimize: int) -> Pyc | None:
    try:
        with open(path, "rb") as handle:
            header = handle.read(16)
            st = os.fstat(handle.fileno())
    except OSError:
        return None
    flags = int.from_bytes(header[4:8], "little") if len(header) == 16 else -1
    return Pyc(
        path, tag, optimize, _MODES.get(flags, "invalid"), header, st.st_mode & 0o7777, st.st_uid, st.st_gid
    )


def find(source: Path, pycache_prefix: str | None) -> list[Pyc]:
    stem = source.name.rsplit(".", 1)[0]
    found = []
    for directory in cache_dirs(source, pycache_prefix):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            named = _named(name, stem)
            item = _pyc_at(directory / name, *named) if named else None
            found += [item] if item else []
    return found


def compile_for(
    interpreter: Interpreter, pycs: list[Pyc], source: bytes, dfile: Path, mtime_ns: int
) -> list[bytes]:
    """New bytes for each pyc (all of the interpreter's tag), compiled by that interpreter."""
    import base64  # only when bytecode is written

    from patcher.in_target import bytecode

    request: dict[str, object] = {
        "data": base64.b64encode(source).decode("ascii"),
        "dfile": str(dfile),
        "mtime": mtime_ns // 1_000_000_000,
        "pycs": [{"optimize": p.optimize, "mode": p.mode} for p in pycs],
    }
    built = call(interpreter.executable, bytecode, request, "compile graph.py")["pycs"]
    assert isinstance(built, list)
    return [base64.b64decode(p) for p in built]


def source_hash(magic: bytes, source: bytes) -> str:
    """`source`'s hash as the Python that wrote a hash-based pyc with this magic number computes it
    (PEP 552: keyed by that number), whichever Python reads it: this Python's own function when it
    hashes the same way (SipHash-1-3 from 3.11, magic 3450, on; SipHash-2-4 before), else the other."""
    key = int.from_bytes(magic, "little")
    newer = int.from_bytes(magic[:2], "little") >= 3450
    if newer == (sys.version_info >= (3, 11)):
        return _imp.source_hash(key, source).hex()
    return siphash(key, source, *((1, 3) if newer else (2, 4))).to_bytes(8, "little").hex()
