"""What was read of an installed torch, as plain data every layer passes around: the interpreter that
loads it, the target (where its files are), the files' stats and pycs, and the snapshot read once under
the lock. The install layer fills these in; nothing here reads them from the disk.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, NamedTuple

from patcher.core.report import JsonValue
from patcher.core.undo import UndoRecord

UNDO_NAME = "torch_lazylog.json"
# Without a dist-info (a source build, `pip install -e`), the undo record goes beside the torch
# package, never inside it.
UNDO_NAME_NO_DIST_INFO = ".torch_lazylog.json"
_VERSION = re.compile(r"""^__version__[ \t]*(?::[^=\n]*)?=[ \t]*(['"])(?P<version>[^'"\n]+)\1""", re.M)


def metadata_version(metadata: bytes) -> str | None:
    """The `Version` field of a dist-info's METADATA, in the email header format the core metadata
    specification gives: fields up to the first empty line, names in any case, a line that starts
    with white space continuing the field before it; the first field of the name counts. Read here,
    not by the email package: its import alone costs a probe more CPU than reading torch's files."""
    fields: list[list[bytes]] = []
    for line in metadata.splitlines():
        if not line.strip():
            break
        if line[:1] in (b" ", b"\t"):
            if fields:
                fields[-1][1] += line
            continue
        name, colon, value = line.partition(b":")
        if colon:
            fields.append([name.strip().lower(), value])
    version = next((value for name, value in fields if name == b"version"), None)
    return None if version is None else version.decode("utf-8", "replace").strip()


def torch_version(version_py: str | None, distribution: str | None) -> str | None:
    """torch/version.py's `__version__ = '...'` (or `__version__: str = "..."`); only when it says
    nothing, or there is none, the distribution's version."""
    found = _VERSION.search(version_py) if version_py is not None else None
    return found["version"] if found else distribution


class Interpreter(NamedTuple):
    executable: str
    version: str
    cache_tag: str | None
    pycache_prefix: str | None
    path: tuple[str, ...] = ()  # sys.path as it starts, without its launch entry
    externally_managed: bool = False  # PEP 668 (a venv never is)
    has_pip: bool | None = None  # whether it can `import pip` (None: not looked for)


class Found(NamedTuple):
    """Where that interpreter's `import torch` comes from (all None when it finds none)."""

    torch_dir: str | None
    path_entry: str | None
    error: str | None


class Target(NamedTuple):
    interpreter: Interpreter  # the one that compiles graph.py's pycs and runs the runtime check
    torch_dir: Path
    graph_py: Path
    dist_info: Path | None
    torch_version: str | None
    dist_version: str | None  # the distribution's own version (its METADATA, read once), which an index has
    # The interpreter whose `import torch` loads torch_dir (given, found, or derived from where a
    # --torch-dir lives), as the server would start it; None when none is known (a bare tree).
    owner: str | None = None
    # The sys.path entry of the owner that torch came from (None: no owner, or a meta path finder).
    torch_path_entry: str | None = None

    @property
    def undo_path(self) -> Path:
        """Where the undo record of this torch lives: in its dist-info, else beside the torch directory."""
        return (
            self.dist_info / UNDO_NAME if self.dist_info else self.torch_dir.parent / UNDO_NAME_NO_DIST_INFO
        )

    @property
    def record_file(self) -> Path | None:
        return self.dist_info / "RECORD" if self.dist_info else None

    def undo_row_path(self) -> str | None:
        """The undo record's path as a RECORD row names it."""
        return f"{self.dist_info.name}/{UNDO_NAME}" if self.dist_info else None


Mode = Literal["timestamp", "checked-hash", "unchecked-hash", "invalid"]


class Pyc(NamedTuple):
    path: Path
    tag: str
    optimize: int
    mode: Mode
    header: bytes
    mode_bits: int
    uid: int
    gid: int

    def describe(self) -> dict[str, JsonValue]:
        return {"path": str(self.path), "cache_tag": self.tag, "optimize": self.optimize, "mode": self.mode}


class FileStat(NamedTuple):
    mode: int  # permission bits
    uid: int
    gid: int
    mtime_ns: int


class Snapshot(NamedTuple):
    graph: bytes
    sha256: str  # graph.py's, hashed once when it is read
    graph_stat: FileStat
    record: bytes | None
    record_stat: FileStat | None
    undo: UndoRecord | None
    undo_raw: bytes | None
    pycs: tuple[Pyc, ...]
    own_tag: str | None
    source_hashes: dict[bytes, str]  # graph.py's hash under each hash-based own pyc's magic number
    leftovers: tuple[Path, ...]
    record_base: str = ""  # the directory holding the dist-info, which RECORD's relative rows start from
