"""From a snapshot's bytes to the facts the state is decided from; pure, no file is read here.

graph.py is judged against the release table (patcher.core.classify); the undo record is a claim,
believed only when its before/after are a known release's pristine/patched pair or differ by the
one edit, when the bytes on disk are one of the two, and when the mode and mtime it would restore
are ones graph.py could have had. RECORD's row is compared with the bytes in every state, and each of
the target's own pycs with graph.py (`stale`: a pyc Python would not run, or would run in its place).
"""

from __future__ import annotations

from typing import NamedTuple

from patcher.core import record, state
from patcher.core.classify import Known, one_edit
from patcher.core.edits import swapped
from patcher.core.errors import damaged
from patcher.core.hashes import sha256
from patcher.core.installed import Pyc, Snapshot
from patcher.core.record import Row, RowFit
from patcher.core.report import State
from patcher.core.spec import Kind, PatchSpec
from patcher.core.state import Fit
from patcher.core.undo import FileChange, newer


class Reading(NamedTuple):
    """What a command decides from: the named state, the facts beyond it, and the bytes they determine."""

    state: State
    known: Known
    fit: Fit  # the undo record against graph.py (patcher.core.state)
    row_fit: RowFit  # RECORD's row for graph.py against its bytes
    stale: tuple[Pyc, ...]  # the target's own pycs that do not describe graph.py, judged once
    original: bytes | None  # graph.py's original when it is lazy and the original is determined
    record_row: Row | None  # graph.py's one row in RECORD, found once (None: there is no RECORD)
    newer_undo: int | None = None  # the version of an undo record a newer torch-lazylog wrote

    @property
    def stale_unchecked(self) -> bool:
        """An unchecked-hash pyc among the stale ones: Python runs it instead of graph.py."""
        return any(p.mode == "unchecked-hash" for p in self.stale)


def stale(pyc: Pyc, source: bytes, mtime: float, hash_of_source: str | None) -> bool:
    """True when this pyc does not describe `source` (what Python checks, and for unchecked, what it skips)."""
    if pyc.mode == "timestamp":
        recorded_mtime = int.from_bytes(pyc.header[8:12], "little")
        recorded_size = int.from_bytes(pyc.header[12:16], "little")
        return (recorded_mtime, recorded_size) != (int(mtime) & 0xFFFFFFFF, len(source) & 0xFFFFFFFF)
    if pyc.mode in ("checked-hash", "unchecked-hash"):
        return hash_of_source is None or pyc.header[8:16].hex() != hash_of_source
    return True


def stale_pycs(snap: Snapshot) -> tuple[Pyc, ...]:
    """The target's own pycs (its interpreter's cache tag) that do not describe graph.py."""
    mtime = snap.graph_stat.mtime_ns / 1e9
    own = (p for p in snap.pycs if p.tag == snap.own_tag)
    return tuple(p for p in own if stale(p, snap.graph, mtime, snap.source_hashes.get(p.header[:4])))


def plausible(change: FileChange, now_ns: int | None) -> bool:
    """A mode and mtime the original file could have had: a regular file its owner could write
    (apply refuses a read-only one), no set-id or sticky bits, an mtime not after `now_ns`."""
    if change.mode & ~0o777 or not change.mode & 0o200:
        return False
    return change.mtime_ns >= 0 and (now_ns is None or change.mtime_ns <= now_ns)


def _pair(change: FileChange, spec: PatchSpec) -> bool:
    pairs = {(r.sha256, r.patched_sha256) for r in spec.releases.rows if r.kind == "eager"}
    return (change.before.sha256, change.after.sha256) in pairs


def _fit(
    snap: Snapshot, spec: PatchSpec, known: Known, now_ns: int, newer_undo: int | None
) -> tuple[Fit, bytes | None, bytes | None]:
    """How the undo record stands, with the original or the patched bytes it determines."""
    if snap.undo is None:
        unread: Fit = "untrusted" if newer_undo is None else "newer"  # a newer tool's: no damage
        return ("none" if snap.undo_raw is None else unread), None, None
    change = snap.undo.graph_change
    sound = _pair(change, spec) or one_edit(change.edit, spec)  # a release's pair, or the one edit
    if not sound or not plausible(change, now_ns):
        return "untrusted", None, None
    # Beside a release's exact bytes only its pair is believed: the one edit alone could turn a
    # release that ships the fix into an eager file no release ever had.
    matched = snap.sha256 in (change.before.sha256, change.after.sha256)
    if known.match == "exact" and matched and not _pair(change, spec):
        return "untrusted", None, None
    if snap.sha256 == change.after.sha256:
        back = change.edit.inverted()
        original = back.apply(snap.graph) if back.applies_to(snap.graph) else b""
        good = known.kind in ("patched", "native", "lazy") and sha256(original) == change.before.sha256
        return ("after", original, None) if good else ("untrusted", None, None)
    if snap.sha256 == change.before.sha256:
        patched = change.edit.apply(snap.graph) if change.edit.applies_to(snap.graph) else b""
        good = known.kind == "eager" and sha256(patched) == change.after.sha256
        return ("before", None, patched) if good else ("untrusted", None, None)
    # A record of another file: beside a release's exact bytes, or an eager site match (a vendor
    # build put over a patched one), torch was reinstalled; a lazy site match changed since apply.
    exact_or_eager = known.match == "exact" or known.kind == "eager"
    return ("other" if exact_or_eager else "changed"), None, None


def _original(snap: Snapshot, spec: PatchSpec, known: Known) -> bytes | None:
    """A patched graph.py's original by the one edit backwards, when the file is known (a lazy branch
    known by its site may be one: patcher.core.facts._graph_kind). A release that ships lazy has none;
    an exact match is a release's patched bytes, whose original is that release's."""
    if known.kind not in ("patched", "lazy"):
        return None
    original = swapped(snap.graph, spec.lazy, spec.eager)
    if known.match == "exact" and known.release is not None:
        return original if original is not None and sha256(original) == known.release.sha256 else None
    return original


def _graph_kind(known: Known, found: list[Row] | None, original: bytes | None, listed: bool) -> Kind:
    """graph.py's Kind: classify's where the bytes decide it; a lazy branch known by its site
    (classify's "lazy") is patched when RECORD names its original or lists the undo record (only an
    apply leaves either), else native: it ships lazy."""
    if known.kind != "lazy":
        return known.kind
    return "patched" if listed or record.names(found, original) else "native"


def reading_of(snap: Snapshot, spec: PatchSpec, known: Known, undo_row: str | None, now_ns: int) -> Reading:
    """`now_ns` bounds the mtime a record may restore (a day's clock skew allowed)."""
    newer_undo = newer(snap.undo_raw) if snap.undo is None and snap.undo_raw is not None else None
    fit, recorded_original, patched = _fit(snap, spec, known, now_ns + 86_400 * 10**9, newer_undo)
    original = recorded_original or _original(snap, spec, known)
    base = snap.record_base  # RECORD's rows of graph.py and of the undo record, each found once
    found = None if snap.record is None else record.rows(snap.record, spec.graph_row, base)
    listed = (
        undo_row is not None and snap.record is not None and bool(record.rows(snap.record, undo_row, base))
    )
    kind = _graph_kind(known, found, original, listed)
    if kind == "native" and fit != "after":
        original = None  # a file that ships lazy has no original of this tool's making
    row_fit = record.fit(found, snap.graph)
    if row_fit in ("missing", "duplicate"):
        said = "no row" if row_fit == "missing" else "more than one row"
        raise damaged(f"it has {said} for {spec.graph_row}")
    names_original, names_patched = record.names(found, original), record.names(found, patched)
    name = state.name_state(kind, fit, names_original, names_patched)
    record_row = found[0] if found else None  # the one row: more or none is damage (above)
    return Reading(name, known, fit, row_fit, stale_pycs(snap), original, record_row, newer_undo)
