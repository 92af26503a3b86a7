"""The plan, pure: a state's actions, the snapshot and its reading in; the exact writes out.

Nothing here reads or writes a file, composes a sentence or does RECORD arithmetic (patcher.core.record
does): the actions decide the bytes graph.py and the undo record end with, and RECORD and the pycs
follow from those. Every write names what its destination held when it was read, so fsio stops
rather than overwrite a change made meanwhile.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from patcher.core import record
from patcher.core.edits import Edit, line_edit
from patcher.core.facts import Reading, plausible
from patcher.core.hashes import sha256
from patcher.core.installed import FileStat, Pyc, Snapshot, Target
from patcher.core.record import Row
from patcher.core.report import State
from patcher.core.spec import PatchSpec
from patcher.core.state import LAZY, Action, left
from patcher.core.steps import ABSENT, Done, PlanStep, Rebuild, Remove, Write
from patcher.core.undo import FileChange, FileState, UndoRecord

if TYPE_CHECKING:
    from patcher.core.outcome import Rewritten


class Plan(NamedTuple):
    leaves: State  # the state the plan leaves the install in, once carried out
    done: Done  # what it writes, counted
    source: bytes  # graph.py as the plan leaves it, which each Rebuild is compiled from
    mtime_ns: int  # ... and its mtime
    steps: tuple[PlanStep, ...] = ()  # in commit order; a Rebuild is compiled, then written
    result: bytes | None = None  # graph.py after the plan, when it changes
    check: tuple[Path, ...] = ()  # must be writable (and no link) before any write


class End(NamedTuple):
    """graph.py and the undo record as the actions leave them."""

    graph: bytes
    lazy: bool
    graph_changed: bool
    undo: FileChange | None  # the undo record's graph.py part
    undo_changed: bool
    mode: int
    mtime_ns: int
    line: int | None = None  # the line of graph.py the actions change (counted in graph.py as read)


def _state(data: bytes, digest: str | None = None) -> FileState:
    """A file's bytes as an undo record names them; `digest`: their sha256, when it is known already."""
    return FileState(digest or sha256(data), len(data))


def _change(path: str, before: FileState, after: FileState, edit: Edit, like: FileStat) -> FileChange:
    """An undo record's part for one file: its bytes before and after, the edit between them, and the
    mode and mtime it had."""
    return FileChange(path, before, after, edit, mode=like.mode, mtime_ns=like.mtime_ns)


def _act(
    action: Action,
    end: End,
    snap: Snapshot,
    spec: PatchSpec,
    reading: Reading,
    now_ns: int,
    rewritten: Rewritten | None,
) -> End:
    if action == "patch":
        assert rewritten is not None  # its edit is the one classify or the rewrite made, once
        read = _state(snap.graph, snap.sha256)
        undo = _change(spec.graph_row, read, _state(rewritten.source), rewritten.edit, snap.graph_stat)
        return end._replace(
            graph=rewritten.source,
            lazy=True,
            graph_changed=True,
            undo=undo,
            undo_changed=True,
            mtime_ns=now_ns,
            line=rewritten.edit.line_number(snap.graph),
        )
    if action == "write-undo":
        original = reading.original
        assert original is not None
        edit = line_edit(original, snap.graph)
        read = _state(snap.graph, snap.sha256)
        undo = _change(spec.graph_row, _state(original), read, edit, snap.graph_stat)
        return end._replace(undo=undo, undo_changed=True)
    if action == "restore":
        assert reading.original is not None
        kept = snap.undo.graph_change if snap.undo is not None and reading.fit == "after" else None
        mode, mtime = (kept.mode, kept.mtime_ns) if kept else (end.mode, end.mtime_ns)
        line = line_edit(snap.graph, reading.original).line_number(snap.graph)
        return End(
            reading.original, False, True, None, snap.undo_raw is not None, mode, mtime, line
        )  # no record left
    assert action == "drop"
    return end._replace(undo=None, undo_changed=snap.undo_raw is not None)


def _pycs(snap: Snapshot, end: End, stale: tuple[Pyc, ...]) -> list[PlanStep]:
    """A new graph.py: rebuild the target's own pycs, remove the others (their Python rebuilds
    them). The same graph.py: the same, of the target's pycs that do not describe it (the ones that
    are no pyc at all, a header no Python writes, removed)."""
    pycs = snap.pycs if end.graph_changed else stale
    own = [p for p in pycs if p.tag == snap.own_tag and p.mode != "invalid"]
    removes = [Remove(p.path) for p in pycs if p not in own]
    return [*(Rebuild(p) for p in own), *removes]


def _record_after(
    snap: Snapshot, spec: PatchSpec, end: End, undo_row: str, trusted: bool, was: str, record_row: Row
) -> tuple[bytes, int | None, int | None]:
    """RECORD as the plan leaves it, with the mode and mtime to give it (None: keep them).

    Byte for byte as before apply when a trusted undo record's RECORD edit, undone, gives exactly
    the RECORD it names, without the undo row; otherwise graph.py's row is pointed at its bytes and
    the undo row listed or removed, wherever they sit."""
    assert snap.record is not None
    change = snap.undo.record_change if snap.undo is not None and end.undo is None and trusted else None
    back = change.edit.inverted() if change is not None else None
    if change and back and was == change.after.sha256 and back.applies_to(snap.record):
        candidate = back.apply(snap.record)
        ours = _only_rows(change.edit.new, (spec.graph_row, undo_row), snap.record_base) and _only_rows(
            change.edit.old, (spec.graph_row,), snap.record_base
        )
        gone = not record.rows(candidate, undo_row, snap.record_base)
        if ours and sha256(candidate) == change.before.sha256 and gone:
            kept = plausible(change, None)
            return candidate, (change.mode if kept else None), (change.mtime_ns if kept else None)
    add, drop = (undo_row, None) if end.undo is not None else (None, undo_row)
    return record.pointed(snap.record, record_row, end.graph, add, drop, snap.record_base), None, None


def _only_rows(lines: bytes, paths: tuple[str, ...], base: str) -> bool:
    """The recorded RECORD edit touches only graph.py's row (and, after apply, the undo row)."""
    firsts = (line.partition(b",")[0].strip(b'"').decode("utf-8", "replace") for line in lines.splitlines())
    return all(any(record.same(first, path, base) for path in paths) for first in firsts)


def _record_steps(
    target: Target, snap: Snapshot, spec: PatchSpec, end: End, trusted: bool, record_row: Row | None
) -> tuple[list[PlanStep], FileChange | None]:
    """RECORD's write, and the undo record's RECORD part. A new undo record over a RECORD already as
    apply leaves it (a revert stopped before RECORD) keeps the trusted record's RECORD part, so revert
    still restores RECORD byte for byte."""
    row, path = target.undo_row_path(), target.record_file
    if snap.record is None or snap.record_stat is None or row is None or path is None:
        return [], None
    assert record_row is not None  # a RECORD has graph.py's one row, or it is damaged (facts)
    was = sha256(snap.record)  # RECORD's, as read
    new, mode, mtime = _record_after(snap, spec, end, row, trusted, was, record_row)
    if new == snap.record:
        kept = snap.undo.record_change if trusted and end.undo_changed and snap.undo else None
        return [], (kept if kept is not None and was == kept.after.sha256 else None)
    stat = snap.record_stat
    write = Write(path, new, mode or stat.mode, stat.uid, stat.gid, mtime, was)
    assert target.dist_info is not None
    edit = line_edit(snap.record, new)
    change = _change(f"{target.dist_info.name}/RECORD", _state(snap.record, was), _state(new), edit, stat)
    return [write], change


def _writable(target: Target, snap: Snapshot) -> tuple[Path, ...]:
    paths = [target.graph_py, target.graph_py.parent]
    if target.dist_info is not None and snap.record is not None:
        paths += [target.dist_info, target.dist_info / "RECORD"]
    paths += [target.undo_path.parent]
    return (*dict.fromkeys(paths), *(p.path for p in snap.pycs))


def _done(snap: Snapshot, end: End, pycs: list[PlanStep], record_written: bool) -> Done:
    """What the plan writes, counted as it makes its steps (the undo record's are added there)."""
    return Done(
        graph_written=end.graph_changed,
        line=end.line,
        record_written=record_written,
        pycs=sum(isinstance(s, Rebuild) for s in pycs),
        pycs_removed=sum(isinstance(s, Remove) for s in pycs),
        no_record=snap.record is None,
    )


def _undo_record(
    spec: PatchSpec,
    snap: Snapshot,
    reading: Reading,
    graph_change: FileChange,
    record_change: FileChange | None,
) -> UndoRecord:
    """The undo record to write: of the release read, or, beside a record that holds, the one it names."""
    release = reading.known.release.version if reading.known.release else None
    match: str | None = reading.known.match
    if snap.undo is not None and reading.fit == "after":
        release, match = snap.undo.release, snap.undo.match
    return UndoRecord(spec.id, release or "unknown", match or "site", graph_change, record_change)


def build(
    target: Target,
    spec: PatchSpec,
    snap: Snapshot,
    reading: Reading,
    does: tuple[Action, ...],
    now_ns: int,
    rewritten: Rewritten | None = None,
) -> Plan:
    stat = snap.graph_stat
    kept = snap.undo.graph_change if snap.undo else None
    end = End(snap.graph, reading.state in LAZY, False, kept, False, stat.mode, stat.mtime_ns)
    for action in does:
        end = _act(action, end, snap, spec, reading, now_ns, rewritten)
    trusted = reading.fit in ("after", "before")
    record_steps, record_change = _record_steps(target, snap, spec, end, trusted, reading.record_row)
    # The undo record first (it must exist before graph.py changes), then graph.py, the pycs and RECORD.
    steps: list[PlanStep] = []
    was_undo = ABSENT if snap.undo_raw is None else sha256(snap.undo_raw)
    undo_written = end.undo is not None and (end.undo_changed or record_change is not None)
    if end.undo is not None and undo_written:  # (narrows end.undo)
        undo = _undo_record(spec, snap, reading, end.undo, record_change)
        like = snap.record_stat or stat  # owned like RECORD, or graph.py without one
        steps.append(Write(target.undo_path, undo.to_bytes(), like.mode, like.uid, like.gid, None, was_undo))
    if end.graph_changed:
        steps.append(
            Write(target.graph_py, end.graph, end.mode, stat.uid, stat.gid, end.mtime_ns, snap.sha256)
        )
    pycs = _pycs(snap, end, reading.stale)
    steps += pycs + record_steps
    undo_removed = end.undo is None and end.undo_changed
    if undo_removed:
        steps.append(Remove(target.undo_path, was_undo))
    leaves = left(end.undo is not None, end.lazy)
    result = end.graph if end.graph_changed else None
    done = _done(snap, end, pycs, bool(record_steps))._replace(
        undo_written=undo_written, undo_removed=undo_removed
    )
    check = _writable(target, snap) if steps else ()
    return Plan(leaves, done, end.graph, end.mtime_ns, tuple(steps), result, check)
