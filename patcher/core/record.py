"""torch's dist-info RECORD: graph.py's row, whether it describes given bytes, and rewritten rows.

Every form the packaging spec allows: a path relative to the directory holding the dist-info (`base`)
or absolute, in any spelling that reaches the file (`./torch/...`, `../site-packages/torch/...`),
compared lexically: no symlink is followed, so a row that reaches the file only through a link is
not its row; a hash of any algorithm hashlib guarantees, or none; an empty size; quoted fields; LF or
CRLF. A rewritten row keeps its own path text. Only the lines that contain the file's name are
parsed as CSV (torch's RECORD has tens of thousands of rows, and this runs on every command).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import posixpath
from typing import Literal, NamedTuple

from patcher.core.errors import damaged

# hashlib.algorithms_guaranteed but the shakes, whose digest needs a length no RECORD row gives
GUARANTEED = frozenset(hashlib.algorithms_guaranteed - {"shake_128", "shake_256"})
RowFit = Literal["absent", "current", "unhashed", "missing", "duplicate", "other"]


class Row(NamedTuple):
    offset: int
    line: bytes  # with its terminator
    path: str  # as the row spells it
    hash: str  # "" or "<algorithm>=<urlsafe base64, no padding>"
    size: str  # "" or the size in bytes


def check(record: bytes) -> str:
    """RECORD's text: the whole of it is UTF-8 (checked when it is read, and each row parsed)."""
    try:
        return record.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise damaged(f"it has bytes that are not UTF-8 ({exc.reason})") from exc


def _fields(line: bytes) -> list[str]:
    text = check(line).rstrip("\r\n")
    if '"' not in text:
        return text.split(",")  # a row without quoting: what csv would read
    try:  # a quoted row (a path with a comma or a quote)
        return next(csv.reader([text]))  # one line: always one row
    except csv.Error as exc:
        raise damaged(f"it has a malformed row ({exc})") from exc


def same(row_path: str, path: str, base: str) -> bool:
    """Whether a row's path names `path` (relative to `base`, the directory holding the dist-info):
    joined to `base` unless absolute, then normalised lexically."""
    return bool(row_path) and posixpath.normpath(posixpath.join(base, row_path)) == posixpath.normpath(
        posixpath.join(base, path)
    )


def _ends_a_path(record: bytes, at: int, size: int) -> bool:
    """Whether the name found at `at` is a whole last component of a row's path: after a `/`, a
    quote or the start of a line, before the comma or quote that ends the field (or the line end of a
    row that is a path alone)."""
    before = record[at - 1 : at] if at else b"\n"
    after = record[at + size : at + size + 1] or b"\n"
    return before in (b"/", b'"', b"\n", b"\r") and after in (b",", b'"', b"\n", b"\r")


def rows(record: bytes, path: str, base: str) -> list[Row]:
    """The rows of a RECORD that name `path`, in any form, with byte offsets: the one way this tool
    reads RECORD."""
    key = posixpath.basename(path).encode("utf-8")
    found: list[Row] = []
    at = record.find(key)
    while at != -1:
        if not _ends_a_path(record, at, len(key)):  # timid: "subgraph.py", "graph.pyi": another file
            at = record.find(key, at + 1)
            continue
        start = max(record.rfind(b"\n", 0, at), record.rfind(b"\r", 0, at)) + 1
        end = record.find(b"\n", at)
        end = len(record) if end == -1 else end + 1
        fields = _fields(record[start:end])
        if fields and same(fields[0], path, base) and not (found and found[-1].offset == start):
            digest, size = ([*fields[1:3], "", ""])[:2]
            found.append(Row(start, record[start:end], fields[0], digest, size))
        at = record.find(key, end)
    return found


def hash_field(algorithm: str, data: bytes) -> str:
    """The field a RECORD row gives for these bytes: the algorithm, "=", the digest in urlsafe base64
    without padding."""
    digest = hashlib.new(algorithm, data).digest()
    return f"{algorithm}=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def describes(field: str, data: bytes) -> bool:
    """Whether a row's hash field names these bytes (an unknown algorithm names nothing)."""
    algorithm, _, _ = field.partition("=")
    return algorithm in GUARANTEED and field == hash_field(algorithm, data)


def fit(found: list[Row] | None, data: bytes) -> RowFit:
    """How RECORD's rows for a file (`rows`, found once when RECORD is read; None: there is no
    RECORD) stand against the file's bytes."""
    if found is None:
        return "absent"
    if len(found) != 1:
        return "missing" if not found else "duplicate"
    if not found[0].hash:
        return "unhashed"
    return "current" if describes(found[0].hash, data) else "other"


def names(found: list[Row] | None, data: bytes | None) -> bool:
    """A file's single row (`found`, as for `fit`) names exactly these bytes (None: no bytes, named
    by no row)."""
    return data is not None and fit(found, data) == "current"


def _row(*fields: str) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(fields)
    return out.getvalue().encode("utf-8")


def pointed(record: bytes, row: Row, data: bytes, add: str | None, drop: str | None, base: str) -> bytes:
    """RECORD with a file's one `row` (found by `rows`) describing `data` (its own path text; same
    algorithm; no hash stays none; an empty size stays empty), `add` listed right after it (no hash,
    relative: valid wherever the tree is moved) unless listed in any form, `drop`'s rows removed in
    any form."""
    algorithm = row.hash.partition("=")[0]
    algorithm = algorithm if algorithm in GUARANTEED else "sha256"  # a row no hashlib reads: sha256
    digest = hash_field(algorithm, data) if row.hash else ""
    size = str(len(data)) if row.size else ""
    terminator = row.line[len(row.line.rstrip(b"\r\n")) :]
    new = _row(row.path, digest, size)
    if add is not None and not rows(record, add, base):  # after a last row with no newline: RECORD's
        new += (terminator or (b"\r\n" if b"\r\n" in record else b"\n")) + _row(add, "", "")
    out = record[: row.offset] + new + terminator + record[row.offset + len(row.line) :]
    return out if drop is None else without(out, drop, base)


def without(record: bytes, path: str, base: str) -> bytes:
    """RECORD with every row naming `path` removed, wherever it sits, in any form."""
    for row in reversed(rows(record, path, base)):
        record = record[: row.offset] + record[row.offset + len(row.line) :]
    return record
