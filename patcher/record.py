"""The undo record (versioned JSON, stable key order) and the dist-info RECORD rows it changes."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import NamedTuple

from patcher.edits import Edit
from patcher.errors import damaged, refused
from patcher.report import JsonValue

UNDO_VERSION = 1
TOOL = "torch-lazylog"
_REINSTALL = "The install is damaged: only a reinstall of torch repairs it."
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class FileState(NamedTuple):
    sha256: str
    size: int

    def to_json(self) -> dict[str, JsonValue]:
        return {"sha256": self.sha256, "size": self.size}

    @classmethod
    def from_json(cls, data: object) -> FileState:
        if not isinstance(data, dict):
            raise ValueError("file state is not an object")
        sha, size = data.get("sha256"), data.get("size")
        if not isinstance(sha, str) or not _SHA256.match(sha):
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
            "after": self.after.to_json(),
            "before": self.before.to_json(),
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
    patch: str
    release: str
    match: str
    graph: FileChange
    record: FileChange | None

    def to_bytes(self) -> bytes:
        data = {
            "graph": self.graph.to_json(),
            "match": self.match,
            "patch": self.patch,
            "record": self.record.to_json() if self.record else None,
            "release": self.release,
            "tool": TOOL,
            "version": UNDO_VERSION,
        }
        return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")

    @classmethod
    def parse(cls, raw: bytes, patch: str, graph_path: str, record_path: str | None) -> UndoRecord:
        """Validate everything; a ValueError says what is wrong."""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"it is not JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise ValueError("it is not a JSON object")
        if data.get("tool") != TOOL or data.get("version") != UNDO_VERSION:
            raise ValueError(
                f"it is {data.get('tool')!r} version {data.get('version')!r}, "
                f"expected {TOOL!r} version {UNDO_VERSION}"
            )
        if data.get("patch") != patch:
            raise ValueError(f"it is for patch {data.get('patch')!r}, expected {patch!r}")
        raw_record = data.get("record")
        if (raw_record is None) != (record_path is None):
            raise ValueError("its RECORD entry does not match whether torch has a RECORD")
        release, match = data.get("release"), data.get("match")
        if not isinstance(release, str) or match not in ("exact", "site"):
            raise ValueError("its release or match is not valid")
        return cls(
            patch=patch,
            release=release,
            match=match,
            graph=FileChange.from_json(data.get("graph"), graph_path),
            record=FileChange.from_json(raw_record, record_path) if record_path else None,
        )


class Row(NamedTuple):
    offset: int
    line: bytes  # with its terminator
    path: str
    hash: str


def rows(record: bytes, path: str) -> list[Row]:
    """The rows of a RECORD that name `path`, with byte offsets: the one way this tool reads RECORD.

    The whole file must be UTF-8; only lines that contain `path` are parsed as CSV (a RECORD of
    torch has tens of thousands of rows, and this runs on every command).
    """
    try:
        record.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise damaged(
            f"Expected torch's RECORD to be UTF-8 CSV, found undecodable bytes ({exc.reason}). {_REINSTALL}"
        ) from exc
    key = path.encode("utf-8")
    found: list[Row] = []
    at = record.find(key)
    while at != -1:
        start = max(record.rfind(b"\n", 0, at), record.rfind(b"\r", 0, at)) + 1
        end = record.find(b"\n", at)
        end = len(record) if end == -1 else end + 1
        line = record[start:end]
        try:
            fields = next(csv.reader([line.decode("utf-8").rstrip("\r\n")]), [])
        except csv.Error as exc:
            raise damaged(
                f"Expected torch's RECORD to be CSV, found a malformed row ({exc}). {_REINSTALL}"
            ) from exc
        if fields and fields[0] == path and not (found and found[-1].offset == start):
            found.append(Row(start, line, path, fields[1] if len(fields) > 1 else ""))
        at = record.find(key, end)
    return found


def _row(*fields: str) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(fields)
    return out.getvalue()


def record_edit(record: bytes, path: str, digest: str, size: int, add_row: str | None) -> Edit:
    """Point `path`'s row at the new hash and size; add `add_row` (no hash) right after it."""
    matches = rows(record, path)
    if len(matches) != 1:
        raise damaged(
            f"Expected exactly one row for {path} in torch's RECORD, found {len(matches)}. " + _REINSTALL
        )
    offset, line = matches[0].offset, matches[0].line
    terminator = line[len(line.rstrip(b"\r\n")) :]
    newline = terminator or (b"\r\n" if b"\r\n" in record else b"\n")
    new = _row(path, digest, str(size)).encode("utf-8")
    if add_row is not None:
        new += newline + _row(add_row, "", "").encode("utf-8")
    return Edit(offset, line, new + terminator)


def row_hash(record: bytes, path: str) -> str | None:
    """The hash field of `path`'s row, or None when there is no such row."""
    found = rows(record, path)
    return found[0].hash if found else None


def undo_parse_error(path: str, why: str) -> Exception:
    return refused(
        f"The undo record {path} is not one torch-lazylog can trust: {why}. Nothing was written. "
        "If graph.py is pristine, delete the record; otherwise reinstall torch "
        "(pip install --force-reinstall --no-deps torch==<version>) and delete it."
    )
