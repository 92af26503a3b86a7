"""torch's dist-info RECORD: graph.py's row, whether it describes given bytes, and rewritten rows.

Every form the packaging spec allows: a hash of any algorithm hashlib guarantees, or none; an empty
size; quoted fields; LF or CRLF. Only the lines that contain a path are parsed as CSV (torch's
RECORD has tens of thousands of rows, and this runs on every command).
"""

from __future__ import annotations

import binascii
from typing import Literal, NamedTuple

from patcher.errors import damaged
from patcher.hashes import sha256_digest

# hashlib.algorithms_guaranteed but the shakes (whose digest needs a length no RECORD row gives),
# spelled out so that reading RECORD needs no hashlib
GUARANTEED = frozenset(
    {"md5", "sha1", "sha224", "sha256", "sha384", "sha512", "blake2b", "blake2s"}
    | {"sha3_224", "sha3_256", "sha3_384", "sha3_512"}
)
_URLSAFE = bytes.maketrans(b"+/", b"-_")  # base64's urlsafe alphabet, without importing base64
RowFit = Literal["absent", "current", "unhashed", "missing", "duplicate", "other"]


class Row(NamedTuple):
    offset: int
    line: bytes  # with its terminator
    path: str
    hash: str  # "" or "<algorithm>=<urlsafe base64, no padding>"
    size: str  # "" or the size in bytes


def _fields(line: bytes) -> list[str]:
    try:
        text = line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise damaged(f"it has bytes that are not UTF-8 ({exc.reason})") from exc
    if '"' not in text:
        return text.split(",")  # a row without quoting: what csv would read
    import csv  # a quoted row (a path with a comma or a quote)

    try:
        return next(csv.reader([text]))  # one line: always one row
    except csv.Error as exc:
        raise damaged(f"it has a malformed row ({exc})") from exc


def check(record: bytes) -> None:
    """The whole of RECORD is UTF-8 (checked once, when it is read)."""
    try:
        record.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise damaged(f"it has bytes that are not UTF-8 ({exc.reason})") from exc


def rows(record: bytes, path: str) -> list[Row]:
    """The rows of a RECORD that name `path`, with byte offsets: the one way this tool reads RECORD."""
    key = path.encode("utf-8")
    found: list[Row] = []
    at = record.find(key)
    while at != -1:
        start = max(record.rfind(b"\n", 0, at), record.rfind(b"\r", 0, at)) + 1
        end = record.find(b"\n", at)
        end = len(record) if end == -1 else end + 1
        fields = _fields(record[start:end])
        if fields and fields[0] == path and not (found and found[-1].offset == start):
            digest, size = ([*fields[1:3], "", ""])[:2]
            found.append(Row(start, record[start:end], path, digest, size))
        at = record.find(key, end)
    return found


def hash_field(algorithm: str, data: bytes) -> str:
    if algorithm == "sha256":
        digest = sha256_digest(data)
    else:
        import hashlib  # another algorithm the spec allows

        digest = hashlib.new(algorithm, data).digest()
    encoded = binascii.b2a_base64(digest, newline=False)
    return f"{algorithm}=" + encoded.translate(_URLSAFE).rstrip(b"=").decode("ascii")


def describes(field: str, data: bytes) -> bool:
    """Whether a row's hash field names these bytes (an unknown algorithm names nothing)."""
    algorithm, _, _ = field.partition("=")
    if algorithm not in GUARANTEED:
        return False
    return field == hash_field(algorithm, data)


def fit(record: bytes | None, path: str, data: bytes) -> RowFit:
    """How RECORD's row for `path` stands against the file's bytes."""
    if record is None:
        return "absent"
    found = rows(record, path)
    if len(found) != 1:
        return "missing" if not found else "duplicate"
    if not found[0].hash:
        return "unhashed"
    return "current" if describes(found[0].hash, data) else "other"


def names(record: bytes | None, path: str, data: bytes) -> bool:
    """RECORD's single row for `path` names exactly these bytes."""
    found = rows(record, path) if record is not None else []
    return len(found) == 1 and bool(found[0].hash) and describes(found[0].hash, data)


def _row(*fields: str) -> bytes:
    import csv
    import io

    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(fields)
    return out.getvalue().encode("utf-8")


def _newline(record: bytes, line: bytes) -> bytes:
    terminator = line[len(line.rstrip(b"\r\n")) :]
    return terminator or (b"\r\n" if b"\r\n" in record else b"\n")


def pointed(record: bytes, path: str, data: bytes, add: str | None = None, drop: str | None = None) -> bytes:
    """RECORD with `path`'s row describing `data` (same algorithm; no hash stays none; an empty size
    stays empty), `add` listed right after it (no hash) unless listed, `drop`'s rows removed."""
    found = rows(record, path)
    if len(found) != 1:
        raise damaged(f"it has {len(found)} rows for {path}")
    row = found[0]
    algorithm = row.hash.partition("=")[0]
    algorithm = algorithm if algorithm in GUARANTEED else "sha256"  # a row no hashlib reads: sha256
    digest = hash_field(algorithm, data) if row.hash else ""
    size = str(len(data)) if row.size else ""
    terminator = row.line[len(row.line.rstrip(b"\r\n")) :]
    new = _row(path, digest, size)
    if add is not None and not rows(record, add):
        new += _newline(record, row.line) + _row(add, "", "")
    out = record[: row.offset] + new + terminator + record[row.offset + len(row.line) :]
    return out if drop is None else without(out, drop)


def without(record: bytes, path: str) -> bytes:
    """RECORD with every row naming `path` removed, wherever it sits."""
    for row in reversed(rows(record, path)):
        record = record[: row.offset] + record[row.offset + len(row.line) :]
    return record
