"""graph.py's cached bytecode: find it, tell whether it is stale, and rebuild it in its own mode.

A pyc is rebuilt by the interpreter that will load it (magic number and cache tag must match), in
its own invalidation mode (PEP 552: timestamp, checked-hash, unchecked-hash) and optimisation level.
A pyc for another interpreter's cache tag is removed: Python rebuilds it from source when needed.
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from patcher.locate import Interpreter, run_script

Mode = Literal["timestamp", "checked-hash", "unchecked-hash", "invalid"]
_NAME = re.compile(r"^(?P<stem>[^.]+)\.(?P<tag>[^.]+)(?:\.opt-(?P<opt>\d+))?\.pyc$")

# Runs in the target interpreter: bytecode for new source, as the import system would write it.
_COMPILE = r"""
import base64, importlib.util, json, sys
from importlib import _bootstrap_external as be
req = json.load(sys.stdin)
data = base64.b64decode(req["data"])
out = {"cache_tag": sys.implementation.cache_tag, "source_hash": importlib.util.source_hash(data).hex(), "pycs": []}
for item in req["pycs"]:
    code = compile(data, req["dfile"], "exec", dont_inherit=True, optimize=item["optimize"])
    if item["mode"] == "timestamp":
        pyc = be._code_to_timestamp_pyc(code, req["mtime"], req["size"])
    else:
        pyc = be._code_to_hash_pyc(code, importlib.util.source_hash(data), item["mode"] == "checked-hash")
    out["pycs"].append(base64.b64encode(bytes(pyc)).decode("ascii"))
json.dump(out, sys.stdout)
"""


@dataclass(frozen=True)
class Pyc:
    path: Path
    tag: str
    optimize: int
    mode: Mode
    header: bytes

    def describe(self) -> dict[str, object]:
        return {"path": str(self.path), "cache_tag": self.tag, "optimize": self.optimize, "mode": self.mode}


def cache_dirs(source: Path, pycache_prefix: str | None) -> list[Path]:
    """Where Python looks for `source`'s bytecode: __pycache__, and the prefix tree if set."""
    dirs = [source.parent / "__pycache__"]
    if pycache_prefix:
        head = os.path.abspath(source.parent)
        dirs.append(Path(pycache_prefix) / head.lstrip(os.sep))
    return dirs


def _mode(flags: int) -> Mode:
    modes: dict[int, Mode] = {0: "timestamp", 1: "unchecked-hash", 3: "checked-hash"}
    return modes.get(flags, "invalid")


def find(source: Path, pycache_prefix: str | None) -> list[Pyc]:
    stem = source.name.rsplit(".", 1)[0]
    found = []
    for directory in cache_dirs(source, pycache_prefix):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            match = _NAME.match(name)
            if match is None or match["stem"] != stem:
                continue
            path = directory / name
            try:
                with open(path, "rb") as handle:
                    header = handle.read(16)
            except OSError:
                continue
            flags = int.from_bytes(header[4:8], "little") if len(header) == 16 else -1
            found.append(Pyc(path, match["tag"], int(match["opt"] or 0), _mode(flags), header))
    return found


def compile_for(
    interpreter: Interpreter, pycs: list[Pyc], source: bytes, dfile: Path, mtime_ns: int
) -> tuple[list[bytes], str]:
    """New bytes for each pyc (all of `interpreter`'s tag), and the source hash it computes."""
    request = {
        "data": base64.b64encode(source).decode("ascii"),
        "dfile": str(dfile),
        "mtime": mtime_ns // 1_000_000_000,
        "size": len(source),
        "pycs": [{"optimize": p.optimize, "mode": p.mode} for p in pycs],
    }
    stdout = run_script(interpreter.executable, _COMPILE, "compile graph.py", stdin=json.dumps(request))
    out = json.loads(stdout)
    return [base64.b64decode(p) for p in out["pycs"]], str(out["source_hash"])


def source_hash(interpreter: Interpreter, source: bytes) -> str:
    return compile_for(interpreter, [], source, Path("graph.py"), 0)[1]


def stale(pyc: Pyc, source: bytes, mtime: float, hash_of_source: str | None) -> bool:
    """True when this pyc does not describe `source` (what Python checks, and for unchecked, what it skips)."""
    if pyc.mode == "timestamp":
        recorded_mtime = int.from_bytes(pyc.header[8:12], "little")
        recorded_size = int.from_bytes(pyc.header[12:16], "little")
        return (recorded_mtime, recorded_size) != (int(mtime) & 0xFFFFFFFF, len(source) & 0xFFFFFFFF)
    if pyc.mode in ("checked-hash", "unchecked-hash"):
        return hash_of_source is None or pyc.header[8:16].hex() != hash_of_source
    return True
