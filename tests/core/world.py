"""A small torch tree in memory for the core tests: graph.py of the real shape, RECORD, undo records.

Everything here is an oracle written out independently of the code under test: RECORD fields are
hashed with hashlib and base64, undo records are JSON written key by key, edits are located by
plain byte search. Nothing is computed at import but constant bytes; the release table (which
takes a libcst parse) is built by the `spec` fixture of tests/core/conftest.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import platform
import sys
from pathlib import Path

from patcher.core import installed
from patcher.core.installed import FileStat, Interpreter, Snapshot, Target
from patcher.core.undo import UndoRecord

EAGER = b"error.operator_str(target, args, kwargs)"
LAZY = b"LazyString(error.operator_str, target, args, kwargs)"
SOURCE = b"""from torch._logging import LazyString, trace_structured


class GraphLowering:
    def call_function(self, target, args, kwargs):
        if target not in lowerings:
            if base_name in FALLBACK_ALLOW_LIST:
                make_fallback(target)
            elif config.implicit_fallbacks:
                error = MissingOperatorWithDecomp if get_decompositions([target]) else MissingOperatorWithoutDecomp
                log.info(
                    "Creating implicit fallback for:\\n%s",
                    error.operator_str(target, args, kwargs),
                )
"""
PATCHED = SOURCE.replace(EAGER, LAZY)
NATIVE = PATCHED + b"# ships the fix\n"  # release 9.1.0: lazy as released
VENDOR = b"# a vendor's edit\n" + SOURCE  # an eager build no release has: known by its site
VENDOR_PATCHED = VENDOR.replace(EAGER, LAZY)
ROW = "torch/_inductor/graph.py"
DIST = "torch-9.0.0.dist-info"
UNDO_ROW = f"{DIST}/torch_lazylog.json"
RECORD_ROW = f"{DIST}/RECORD"
PATCH_ID = "lazy-implicit-fallback"
GRAPH_STAT = FileStat(0o644, 1001, 1002, 1_000_000_000_123)
RECORD_STAT = FileStat(0o664, 1003, 1004, 1_500_000_000_456)
# graph.py and RECORD as apply left them, then chmod-ed: revert restores what the undo record names
AFTER_STAT = FileStat(0o600, 1001, 1002, 7_000_000_000_789)
AFTER_RECORD_STAT = FileStat(0o600, 1003, 1004, 7_100_000_000_000)
NOW = 2_000_000_000_000_000_000  # the clock of a run (ns)
SITE = Path("/nonexistent/site-packages")
TAG = sys.implementation.cache_tag or "none"


def b64(algorithm: str, data: bytes) -> str:
    """A RECORD hash field, as the recording-installed-projects spec writes it."""
    digest = hashlib.new(algorithm, data).digest()
    return f"{algorithm}=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def graph_row(data: bytes, algorithm: str = "sha256") -> str:
    return f"{ROW},{b64(algorithm, data)},{len(data)}"


def lines(*rows: str, newline: str = "\r\n") -> bytes:
    return "".join(row + newline for row in rows).encode()


INIT_ROW = f"torch/__init__.py,{b64('sha256', b'')},0"
VERSION_ROW = f"torch/version.py,{b64('sha256', b'v')},1"


def record_of(graph: bytes, *extra: str) -> bytes:
    """torch's RECORD: graph.py's row between two others, CRLF as some wheels write it."""
    return lines(INIT_ROW, graph_row(graph), *extra, VERSION_ROW)


def line_of(data: bytes, text: bytes) -> tuple[int, bytes]:
    """The offset and the whole line (with its newline) of the one line holding `text`."""
    at = data.index(text)
    start = data.rfind(b"\n", 0, at) + 1
    end = data.index(b"\n", at) + 1
    return start, data[start:end]


def change_json(
    path: str, before: bytes, after: bytes, offset: int, old: bytes, new: bytes, mode: int, mtime: int
) -> dict[str, object]:
    return {
        "after": {"sha256": sha(after), "size": len(after)},
        "before": {"sha256": sha(before), "size": len(before)},
        "edit": {"new": new.decode(), "offset": offset, "old": old.decode()},
        "mode": mode,
        "mtime_ns": mtime,
        "path": path,
    }


def graph_change(
    before: bytes, after: bytes, mode: int = 0o644, mtime: int = 1_000_000_000_123
) -> dict[str, object]:
    offset, old = line_of(before, EAGER if EAGER in before else LAZY)
    new = old.replace(EAGER, LAZY) if EAGER in old else old.replace(LAZY, EAGER)
    return change_json(ROW, before, after, offset, old, new, mode, mtime)


def record_change(record: bytes, after_graph: bytes, stat: FileStat = RECORD_STAT) -> dict[str, object]:
    """apply's RECORD change: graph.py's row pointed at the patched bytes, the undo row after it."""
    offset, old = line_of(record, f"{ROW},".encode())
    new = (graph_row(after_graph) + "\r\n" + UNDO_ROW + ",,\r\n").encode()
    after = record[:offset] + new + record[offset + len(old) :]
    return change_json(RECORD_ROW, record, after, offset, old, new, stat.mode, stat.mtime_ns)


def undo_json(
    graph: dict[str, object], rec: dict[str, object] | None, release: str = "9.0.0", match: str = "exact"
) -> bytes:
    data = {
        "graph": graph,
        "match": match,
        "patch": PATCH_ID,
        "record": rec,
        "release": release,
        "tool": "torch-lazylog",
        "version": 1,
    }
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def applied(
    source: bytes = SOURCE, release: str = "9.0.0", match: str = "exact"
) -> tuple[bytes, bytes, bytes]:
    """graph.py, RECORD and the undo record as apply leaves a pristine tree (written out here)."""
    patched = source.replace(EAGER, LAZY)
    before = record_of(source)
    after = record_of(patched, f"{UNDO_ROW},,")
    undo = undo_json(graph_change(source, patched), record_change(before, patched), release, match)
    return patched, after, undo


def interpreter() -> Interpreter:
    return Interpreter("/nonexistent/python", platform.python_version(), TAG, None)


def target() -> Target:
    dist = SITE / DIST
    return Target(interpreter(), SITE / "torch", SITE / ROW, dist, "9.0.0+cu128", "9.0.0")


def bare_target() -> Target:
    """A torch tree with no dist-info (a distribution package that strips it)."""
    return target()._replace(dist_info=None)


def timestamp_header(data: bytes, mtime_ns: int) -> bytes:
    return (
        b"MAGC"
        + (0).to_bytes(4, "little")
        + (mtime_ns // 10**9).to_bytes(4, "little")
        + len(data).to_bytes(4, "little")
    )


def a_pyc(name: str, mode: installed.Mode, header: bytes, tag: str = TAG) -> installed.Pyc:
    path = SITE / "torch/_inductor/__pycache__" / name
    return installed.Pyc(path, tag, 0, mode, header, 0o640, 1005, 1006)


def snap(
    graph: bytes,
    rec: bytes | None,
    undo: bytes | None = None,
    pycs: tuple[installed.Pyc, ...] = (),
    stat: FileStat = GRAPH_STAT,
    record_stat: FileStat = RECORD_STAT,
) -> Snapshot:
    parsed = None
    if undo is not None:
        try:
            parsed = UndoRecord.parse(undo, PATCH_ID, ROW, RECORD_ROW if rec is not None else None)
        except ValueError:
            parsed = None
    rec_stat = record_stat if rec is not None else None
    return Snapshot(graph, sha(graph), stat, rec, rec_stat, parsed, undo, pycs, TAG, {}, ())


def forged(undo: bytes, claimed: bytes, instead: bytes) -> bytes:
    return undo.replace(sha(claimed).encode(), sha(instead).encode())


def one_edit_undo(lazy: bytes) -> bytes:
    """Self-consistent claims beside a release that ships the fix: no release had that `before`."""
    eager = lazy.replace(LAZY, EAGER)
    return undo_json(graph_change(eager, lazy, 0o644, 0), None, "9.1.0", "exact")


def by_a_newer_tool(undo: bytes) -> bytes:
    """The same record as a newer torch-lazylog writes it: a version this one does not read."""
    data = json.loads(undo)
    data.update(version=2, written_later={"any": "field"})
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def later(graph: bytes, rec: bytes | None, undo: bytes | None = None) -> Snapshot:
    """A file this tool patched, as apply left it and chmod-ed since."""
    return snap(graph, rec, undo, stat=AFTER_STAT, record_stat=AFTER_RECORD_STAT)


def states() -> dict[str, list[Snapshot]]:
    """Snapshots of every named state (several for some), built from the bytes above."""
    patched, rec, undo = applied()
    vendor_patched, vendor_rec, vendor_undo = applied(VENDOR, match="site")
    vendor_lazy = VENDOR.replace(EAGER, LAZY)
    return {
        "pristine": [snap(SOURCE, record_of(SOURCE)), snap(SOURCE, None)],
        "patched": [later(patched, rec, undo), later(vendor_patched, vendor_rec, vendor_undo)],
        "apply-interrupted": [later(patched, record_of(SOURCE), undo)],
        "ships-lazy": [snap(NATIVE, record_of(NATIVE)), snap(vendor_lazy, record_of(vendor_lazy))],
        "record-only": [snap(SOURCE, record_of(SOURCE), undo)],
        "revert-interrupted": [snap(SOURCE, record_of(patched, f"{UNDO_ROW},,"), undo)],
        "unrecorded": [later(patched, rec), later(vendor_patched, record_of(VENDOR))],
        "reinstalled": [
            snap(SOURCE, record_of(SOURCE), vendor_undo),
            snap(b"# another build\n" + SOURCE, record_of(SOURCE), vendor_undo),  # an eager site
        ],
        "upgraded": [snap(NATIVE, record_of(NATIVE), undo)],
        "untrusted-eager": [snap(SOURCE, record_of(SOURCE), forged(undo, patched, SOURCE))],
        "untrusted-patched": [later(patched, rec, b"{not json"), later(patched, rec, b"[" * 100_000)],
        "untrusted-lazy": [
            snap(NATIVE, record_of(NATIVE), b"[]"),
            snap(NATIVE, record_of(NATIVE), one_edit_undo(NATIVE)),
        ],
        "newer-eager": [snap(SOURCE, record_of(SOURCE), by_a_newer_tool(undo))],
        "newer-patched": [
            later(patched, rec, by_a_newer_tool(undo)),
            later(vendor_patched, vendor_rec, by_a_newer_tool(vendor_undo)),
        ],
        "newer-lazy": [snap(NATIVE, record_of(NATIVE), by_a_newer_tool(undo))],
        "edited": [snap(vendor_patched + b"# edited\n", vendor_rec, vendor_undo)],
        "unknown": [
            snap(b"x = 1\n", record_of(b"x = 1\n")),
            snap(b"x = 1\n", record_of(b"x = 1\n"), b"{not json"),
            snap(b"x = 1\n", record_of(b"x = 1\n"), by_a_newer_tool(undo)),
        ],
    }


CASES = [
    (name, index)
    for name, count in [
        ("pristine", 2),
        ("patched", 2),
        ("apply-interrupted", 1),
        ("ships-lazy", 2),
        ("record-only", 1),
        ("revert-interrupted", 1),
        ("unrecorded", 2),
        ("reinstalled", 2),
        ("upgraded", 1),
        ("untrusted-eager", 1),
        ("untrusted-patched", 2),
        ("untrusted-lazy", 2),
        ("newer-eager", 1),
        ("newer-patched", 2),
        ("newer-lazy", 1),
        ("edited", 1),
        ("unknown", 3),
    ]
    for index in range(count)
]


def record_change_after(record: bytes, after_graph: bytes) -> bytes:
    """RECORD as apply leaves it: graph.py's row pointed at `after_graph`, the undo row after it."""
    offset, old = line_of(record, f"{ROW},".encode())
    new = (graph_row(after_graph) + "\r\n" + UNDO_ROW + ",,\r\n").encode()
    return record[:offset] + new + record[offset + len(old) :]
