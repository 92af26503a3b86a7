"""Everything apply, verify and revert decide from, read once under the lock. Reads only."""

from __future__ import annotations

import os
from pathlib import Path

from patcher.core.errors import environment
from patcher.core.hashes import sha256
from patcher.core.installed import FileStat, Snapshot, Target
from patcher.core.spec import PatchSpec
from patcher.core.undo import UndoRecord
from patcher.install import lock, pyc


def stat_of(st: os.stat_result) -> FileStat:
    return FileStat(st.st_mode & 0o7777, st.st_uid, st.st_gid, st.st_mtime_ns)


def _contents(path: Path) -> tuple[bytes, os.stat_result]:
    """The bytes and the stat of one open file (so the two describe the same file)."""
    with open(path, "rb") as handle:
        return handle.read(), os.fstat(handle.fileno())


def _graph(target: Target) -> tuple[bytes, os.stat_result]:
    try:
        return _contents(target.graph_py)
    except OSError as exc:
        raise environment(f"Could not read graph.py {target.graph_py}: {exc.strerror}.") from exc


def _record(target: Target) -> tuple[bytes | None, FileStat | None]:
    """RECORD's bytes, or None where there is none: the spec makes it optional (PEP 627), and
    distribution packages strip it."""
    if target.record_file is None:
        return None, None
    try:
        data, st = _contents(target.record_file)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise environment(f"Could not read {target.record_file}: {exc.strerror}") from exc
    from patcher.core import record

    record.check(data)
    return data, stat_of(st)


def _undo(target: Target, spec: PatchSpec, has_record: bool) -> tuple[UndoRecord | None, bytes | None]:
    try:
        raw = target.undo_path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise environment(f"Could not read the undo record {target.undo_path}: {exc.strerror}") from exc
    record_path = f"{target.dist_info.name}/RECORD" if target.dist_info and has_record else None
    try:
        return UndoRecord.parse(raw, spec.id, spec.graph_row, record_path), raw
    except ValueError:  # a record that does not parse proves nothing either: decided from the bytes
        return None, raw


def installer(target: Target) -> str | None:
    """The tool that installed torch, as its dist-info's INSTALLER names it (pip, uv, ...)."""
    if target.dist_info is None:
        return None
    try:
        return (target.dist_info / "INSTALLER").read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def take(target: Target, spec: PatchSpec) -> Snapshot:
    graph, st = _graph(target)
    record, record_stat = _record(target)
    prefix = target.interpreter.pycache_prefix
    pycs = pyc.find(target.graph_py, prefix)
    own_tag = target.interpreter.cache_tag
    magics = {p.header[:4] for p in pycs if p.tag == own_tag and p.mode in ("checked-hash", "unchecked-hash")}
    undo, undo_raw = _undo(target, spec, record is not None)
    dirs = [target.graph_py.parent, *pyc.cache_dirs(target.graph_py, prefix), target.undo_path.parent]
    return Snapshot(
        graph=graph,
        sha256=sha256(graph),
        graph_stat=stat_of(st),
        record=record,
        record_stat=record_stat,
        undo=undo,
        undo_raw=undo_raw,
        pycs=tuple(pycs),
        own_tag=own_tag,
        source_hashes={magic: pyc.source_hash(magic, graph) for magic in magics},
        leftovers=tuple(lock.leftovers(dirs)),
        record_base=str(target.dist_info.parent) if target.dist_info else "",
    )
