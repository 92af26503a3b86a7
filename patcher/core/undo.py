"""The undo record: versioned JSON with stable key order, parsed and checked for shape only.

It is a claim, never proof: patcher.core.facts decides whether it describes the bytes on disk.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from patcher.core.edits import Edit
from patcher.core.report import JsonValue

UNDO_VERSION = 1  # the version this tool writes
# The oldest version it reads. A record of any version from it to UNDO_VERSION is read as written, and
# replaced by an UNDO_VERSION one when a command rewrites it: an older record is no damage. A record
# of a higher version was written by a newer torch-lazylog: see `newer`.
OLDEST_VERSION = 1
TOOL = "torch-lazylog"
_HEX = frozenset("0123456789abcdef")


class FileState(NamedTuple):
    sha256: str
    size: int

    @classmethod
    def from_json(cls, data: object) -> FileState:
        if not isinstance(data, dict):
            raise ValueError("file state is not an object")
        sha, size = data.get("sha256"), data.get("size")
        if not isinstance(sha, str) or len(sha) != 64 or not _HEX.issuperset(sha):
            raise ValueError("sha256 is not 64 lowercase hex digits")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError("size is not a non-negative integer")
        return cls(sha, size)


class FileChange(NamedTuple):
    path: str  # as a RECORD row names it; checked against the located file, never used to find one
    before: FileState
    after: FileState
    edit: Edit
    mode: int  # the original's permission bits and mtime, restored by revert
    mtime_ns: int

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "after": self.after._asdict(),
            "before": self.before._asdict(),
            "edit": self.edit.to_json(),
            "mode": self.mode,
            "mtime_ns": self.mtime_ns,
            "path": self.path,
        }

    @classmethod
    def from_json(cls, data: object, expected_path: str) -> FileChange:
        if not isinstance(data, dict):
            raise ValueError("file change is not an object")
        if data.get("path") != expected_path:
            raise ValueError(f"it names {data.get('path')!r} where {expected_path!r} was expected")
        mode, mtime = data.get("mode"), data.get("mtime_ns")
        if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o7777:
            raise ValueError(f"the mode of {expected_path} is not valid")
        if not isinstance(mtime, int) or isinstance(mtime, bool):
            raise ValueError(f"the mtime of {expected_path} is not valid")
        change = cls(
            path=expected_path,
            before=FileState.from_json(data.get("before")),
            after=FileState.from_json(data.get("after")),
            edit=Edit.from_json(data.get("edit")),
            mode=mode,
            mtime_ns=mtime,
        )
        if change.after.size - change.before.size != len(change.edit.new) - len(change.edit.old):
            raise ValueError(f"the edit of {expected_path} does not account for its sizes")
        return change


class UndoRecord(NamedTuple):
    patch_id: str  # the patch definition's id (PatchSpec.id)
    release: str
    match: str
    graph_change: FileChange
    record_change: FileChange | None

    def to_bytes(self) -> bytes:
        data = {
            "graph": self.graph_change.to_json(),
            "match": self.match,
            "patch": self.patch_id,
            "record": self.record_change.to_json() if self.record_change else None,
            "release": self.release,
            "tool": TOOL,
            "version": UNDO_VERSION,
        }
        return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")

    @classmethod
    def parse(cls, raw: bytes, patch_id: str, graph_row: str, record_path: str | None) -> UndoRecord:
        """Validate everything; a ValueError says what is wrong."""
        data = _load(raw)
        version = data.get("version")  # one this tool reads: a number (never true or false) in range
        if (
            data.get("tool") != TOOL
            or type(version) is not int
            or not OLDEST_VERSION <= version <= UNDO_VERSION
        ):
            raise ValueError(
                f"it is {data.get('tool')!r} version {version!r}, expected {TOOL!r} version {UNDO_VERSION}"
            )
        if data.get("patch") != patch_id:
            raise ValueError(f"it is for patch {data.get('patch')!r}, expected {patch_id!r}")
        raw_record = data.get("record")
        release, match = data.get("release"), data.get("match")
        if not isinstance(release, str) or match not in ("exact", "site"):
            raise ValueError("its release or match is not valid")
        return cls(
            patch_id=patch_id,
            release=release,
            match=match,
            graph_change=FileChange.from_json(data.get("graph"), graph_row),
            record_change=FileChange.from_json(raw_record, record_path)
            if record_path and raw_record
            else None,
        )


def _load(raw: bytes) -> dict[str, object]:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"it is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError("it is not a JSON object")
    return data


def newer(raw: bytes) -> int | None:
    """The version of an undo record a newer torch-lazylog wrote (higher than UNDO_VERSION), which
    this one cannot read and must not rewrite; None for any other bytes."""
    try:
        data = _load(raw)
    except ValueError:
        return None
    version = data.get("version")
    if data.get("tool") == TOOL and isinstance(version, int) and version > UNDO_VERSION:
        return version
    return None
