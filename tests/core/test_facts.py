"""patcher.core.facts: the facts a state is named from, each decided once from a snapshot's bytes.

The undo record's trust (`_fit`), the mode and mtime it may restore (`plausible`), a lazy file's
original (`_original`) and a pyc's staleness (`stale`), each pinned where a state's name alone does
not show it (test_state.py names the states).
"""

from __future__ import annotations

import json

import pytest

from patcher.core import facts
from patcher.core.classify import Known, Seen, classify
from patcher.core.edits import Edit
from patcher.core.installed import Mode, Snapshot
from patcher.core.spec import PatchSpec
from patcher.core.undo import FileChange, FileState
from tests.core import world

DAY_NS = 86_400 * 10**9  # the clock skew a record's mtime is allowed


def _known(spec: PatchSpec, snap: Snapshot) -> Known:
    return classify(snap.graph, snap.sha256, spec, "9.0.0", snap.undo)[0]


def _hash_header(mode: Mode, digest: bytes) -> bytes:
    flags = {"checked-hash": 3, "unchecked-hash": 1}.get(mode, 7)
    return b"MAGC" + flags.to_bytes(4, "little") + digest


SOURCE_MTIME_NS = 1_700_000_000_500_000_000
DIGEST = bytes(range(8))


@pytest.mark.parametrize(
    ("mode", "header", "hash_of_source", "stale"),
    [
        pytest.param(
            "timestamp", world.timestamp_header(world.SOURCE, SOURCE_MTIME_NS), None, False, id="ts"
        ),
        pytest.param(
            "timestamp",
            world.timestamp_header(world.SOURCE + b"#", SOURCE_MTIME_NS),
            None,
            True,
            id="ts-size",
        ),
        pytest.param(
            "timestamp",
            world.timestamp_header(world.SOURCE, SOURCE_MTIME_NS + 10**9),
            None,
            True,
            id="ts-mtime",
        ),
        pytest.param("checked-hash", _hash_header("checked-hash", DIGEST), DIGEST.hex(), False, id="checked"),
        pytest.param(
            "checked-hash", _hash_header("checked-hash", DIGEST), "00" * 8, True, id="checked-other"
        ),
        pytest.param("checked-hash", _hash_header("checked-hash", DIGEST), None, True, id="checked-no-hash"),
        pytest.param(
            "unchecked-hash", _hash_header("unchecked-hash", DIGEST), DIGEST.hex(), False, id="unchecked"
        ),
        pytest.param(
            "unchecked-hash", _hash_header("unchecked-hash", DIGEST), "00" * 8, True, id="unchecked-other"
        ),
        pytest.param("invalid", _hash_header("invalid", DIGEST), DIGEST.hex(), True, id="invalid"),
    ],
)
def test_a_pyc_is_stale_unless_it_describes_the_source(
    mode: Mode, header: bytes, hash_of_source: str | None, stale: bool
) -> None:
    """A timestamp pyc by the source's mtime (whole seconds) and size; a hash pyc by graph.py's hash
    under its magic number; an invalid one always."""
    pyc = world.a_pyc("graph.x.pyc", mode, header)
    assert facts.stale(pyc, world.SOURCE, SOURCE_MTIME_NS / 1e9, hash_of_source) is stale


def test_only_the_targets_own_stale_pycs_are_found() -> None:
    """Each hash pyc is judged by graph.py's hash under its own magic number; another cache tag's
    pycs are not the target interpreter's to judge."""
    fresh = world.a_pyc("graph.fresh.pyc", "checked-hash", _hash_header("checked-hash", DIGEST))
    other_magic = world.a_pyc(
        "graph.old.pyc", "checked-hash", b"OLDM" + _hash_header("checked-hash", DIGEST)[4:]
    )
    foreign = world.a_pyc("graph.foreign.pyc", "invalid", b"", tag="another-tag")
    snap = world.snap(world.SOURCE, None, pycs=(fresh, other_magic, foreign))._replace(
        source_hashes={b"MAGC": DIGEST.hex(), b"OLDM": "ff" * 8}
    )
    assert facts.stale_pycs(snap) == (other_magic,)


@pytest.mark.parametrize(
    ("mode", "mtime_ns", "now_ns", "plausible"),
    [
        pytest.param(0o644, 0, 10, True, id="usual"),
        pytest.param(0o200, 10, 10, True, id="owner-writes-at-now"),
        pytest.param(0o555, 0, 10, False, id="read-only"),
        pytest.param(0o4644, 0, 10, False, id="set-id"),
        pytest.param(0o1644, 0, 10, False, id="sticky"),
        pytest.param(0o644, 11, 10, False, id="after-now"),
        pytest.param(0o644, -1, 10, False, id="before-the-epoch"),
        pytest.param(0o644, 10**30, None, True, id="no-clock"),
    ],
)
def test_a_record_restores_only_a_mode_and_mtime_graph_py_could_have_had(
    mode: int, mtime_ns: int, now_ns: int | None, plausible: bool
) -> None:
    change = FileChange(world.ROW, FileState("", 0), FileState("", 0), Edit(0, b"a", b"b"), mode, mtime_ns)
    assert facts.plausible(change, now_ns) is plausible


def _applied_with(mtime_ns: int) -> Snapshot:
    patched = world.SOURCE.replace(world.EAGER, world.LAZY)
    before = world.record_of(world.SOURCE)
    rec = world.record_of(patched, f"{world.UNDO_ROW},,")
    graph = world.graph_change(world.SOURCE, patched, 0o644, mtime_ns)
    undo = world.undo_json(graph, world.record_change(before, patched))
    return world.later(patched, rec, undo)


@pytest.mark.parametrize(("skew", "fit"), [(0, "after"), (DAY_NS, "after"), (DAY_NS + 1, "untrusted")])
def test_a_record_may_restore_an_mtime_up_to_a_day_after_the_clock(
    spec: PatchSpec, skew: int, fit: str
) -> None:
    snap = _applied_with(world.NOW + skew)
    assert facts.reading_of(snap, spec, _known(spec, snap), world.UNDO_ROW, world.NOW).fit == fit


def _moved_edit(undo: bytes) -> bytes:
    """The same release pair, with an edit one byte away from where it applies."""
    data = json.loads(undo)
    data["graph"]["edit"]["offset"] += 1
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


@pytest.mark.parametrize("graph", ["after", "before"])
def test_a_release_pairs_record_whose_edit_does_not_apply_is_untrusted(spec: PatchSpec, graph: str) -> None:
    """The pair alone makes the record sound; graph.py must still be one edit from what it names."""
    patched, rec, undo = world.applied()
    snap = world.later(patched, rec, _moved_edit(undo))
    if graph == "before":
        snap = world.snap(world.SOURCE, world.record_of(world.SOURCE), _moved_edit(undo))
    assert snap.undo is not None
    assert facts._fit(snap, spec, _known(spec, snap), world.NOW, None) == ("untrusted", None, None)


@pytest.mark.parametrize(
    ("kind", "fit"), [("patched", "after"), ("native", "after"), ("lazy", "after"), ("eager", "untrusted")]
)
def test_a_record_is_after_only_beside_a_lazy_graph_py(spec: PatchSpec, kind: Seen, fit: str) -> None:
    patched, rec, undo = world.applied()
    snap = world.later(patched, rec, undo)
    known = _known(spec, snap)._replace(kind=kind)
    found = facts._fit(snap, spec, known, world.NOW, None)
    assert found[0] == fit
    assert found[1:] == ((world.SOURCE, None) if fit == "after" else (None, None))


@pytest.mark.parametrize(
    ("kind", "fit"), [("eager", "before"), ("patched", "untrusted"), ("lazy", "untrusted")]
)
def test_a_record_is_before_only_beside_an_eager_graph_py(spec: PatchSpec, kind: Seen, fit: str) -> None:
    patched, _, undo = world.applied()
    snap = world.snap(world.SOURCE, world.record_of(world.SOURCE), undo)
    known = _known(spec, snap)._replace(kind=kind)
    found = facts._fit(snap, spec, known, world.NOW, None)
    assert found == ((fit, None, patched) if fit == "before" else (fit, None, None))


def test_an_exact_patched_release_s_original_is_that_release_s_bytes(spec: PatchSpec) -> None:
    """The one edit backwards gives the original; beside an exact match it must be the release's."""
    patched, rec, _ = world.applied()
    snap = world.later(patched, rec)
    known = _known(spec, snap)
    assert (known.match, known.kind) == ("exact", "patched")
    assert facts._original(snap, spec, known) == world.SOURCE
    assert known.release is not None
    other = known._replace(release=known.release._replace(sha256="0" * 64))
    assert facts._original(snap, spec, other) is None


def test_a_site_match_s_original_is_the_edit_backwards_and_a_native_release_has_none(spec: PatchSpec) -> None:
    vendor_patched = world.VENDOR.replace(world.EAGER, world.LAZY)
    snap = world.later(vendor_patched, world.record_of(world.VENDOR))
    known = _known(spec, snap)
    assert (known.match, known.kind) == ("site", "lazy")
    assert facts._original(snap, spec, known) == world.VENDOR
    native = world.snap(world.NATIVE, world.record_of(world.NATIVE))
    assert facts._original(native, spec, _known(spec, native)) is None


@pytest.mark.parametrize(("name", "index"), world.CASES, ids=[f"{n}-{i}" for n, i in world.CASES])
def test_a_file_that_ships_lazy_has_no_original(spec: PatchSpec, name: str, index: int) -> None:
    """A lazy branch that ships lazy (classify's by hash, or facts' by the absence of any trace of
    apply) has no original of this tool's making; a patched one has its original."""
    snap = world.states()[name][index]
    reading = facts.reading_of(snap, spec, _known(spec, snap), world.UNDO_ROW, world.NOW)
    if name in ("ships-lazy", "upgraded", "untrusted-lazy", "newer-lazy"):
        assert reading.original is None
    if name in ("patched", "unrecorded", "apply-interrupted"):
        assert reading.original is not None


@pytest.mark.parametrize(
    ("name", "index", "row_fit"),
    [("patched", 0, "current"), ("apply-interrupted", 0, "other"), ("pristine", 1, "absent")],
)
def test_records_row_is_judged_against_the_bytes(
    spec: PatchSpec, name: str, index: int, row_fit: str
) -> None:
    snap = world.states()[name][index]
    assert facts.reading_of(snap, spec, _known(spec, snap), world.UNDO_ROW, world.NOW).row_fit == row_fit


def test_a_patched_file_without_traces_in_record_keeps_the_original_its_undo_record_names(
    spec: PatchSpec,
) -> None:
    """A vendor build patched where no RECORD is (a distribution package's torch), of a release the
    table lacks: its lazy branch is known by its site and no RECORD names it patched, so its kind is
    native, but the undo record that describes it ("after") names its original, which revert restores."""
    vendor_patched, _, vendor_undo = world.applied(world.VENDOR, release="7.7.7", match="site")
    snap = world.later(vendor_patched, None, vendor_undo)
    known = _known(spec, snap)  # a release the table lacks: known by its site, not by the record
    assert (known.kind, known.match) == ("lazy", "site")
    reading = facts.reading_of(snap, spec, known, world.UNDO_ROW, world.NOW)
    assert (reading.state, reading.fit, reading.original) == ("patched", "after", world.VENDOR)
