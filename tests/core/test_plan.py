"""patcher.core.plan: for every named state, the exact steps of apply and revert.

Each expected step is written out: the bytes graph.py, RECORD and the undo record end with (from
tests/core/world.py's oracles), the mode, owner and mtime of each write, what each destination
must still hold, and which pycs are rebuilt or removed.
"""

from __future__ import annotations

import pytest

from patcher.core import facts, plan, state, steps
from patcher.core.classify import classify
from patcher.core.installed import FileStat, Pyc, Snapshot, Target
from patcher.core.spec import PatchSpec
from patcher.core.steps import ABSENT, ANY, Done, PlanStep, Rebuild, Remove, Write
from tests.core import world
from tests.core.world import (
    AFTER_RECORD_STAT,
    AFTER_STAT,
    GRAPH_STAT,
    PATCHED,
    RECORD_STAT,
    SOURCE,
    VENDOR,
    VENDOR_PATCHED,
    sha,
)

NOW = 7_000_000_000_000  # apply's clock
GRAPH = world.SITE / world.ROW
RECORD = world.SITE / world.DIST / "RECORD"
UNDO = world.SITE / world.DIST / "torch_lazylog.json"
ANOTHER = b"# another build\n" + SOURCE


def graph(data: bytes, like: FileStat, mtime: int, was: bytes) -> Write:
    return Write(GRAPH, data, like.mode, like.uid, like.gid, mtime, sha(was))


def record(data: bytes, was: bytes, mode: int, mtime: int | None = None) -> Write:
    return Write(RECORD, data, mode, RECORD_STAT.uid, RECORD_STAT.gid, mtime, sha(was))


def undo(data: bytes, was: bytes | None, like: FileStat = RECORD_STAT) -> Write:
    return Write(UNDO, data, like.mode, like.uid, like.gid, None, ABSENT if was is None else sha(was))


def gone(was: bytes) -> Remove:
    return Remove(UNDO, sha(was))


def undo_of(
    source: bytes,
    like: FileStat,
    rec: bytes | None,
    rec_stat: FileStat = RECORD_STAT,
    match: str = "exact",
    release: str = "9.0.0",
) -> bytes:
    """The undo record apply writes for `source` (its mode and mtime from `like`)."""
    patched = source.replace(world.EAGER, world.LAZY)
    change = world.record_change(rec, patched, rec_stat) if rec is not None else None
    graph_change = world.graph_change(source, patched, like.mode, like.mtime_ns)
    return world.undo_json(graph_change, change, release, match)


def _plan(spec: PatchSpec, snap: Snapshot, command: str, target: Target | None = None) -> plan.Plan:
    known, rewritten = classify(snap.graph, snap.sha256, spec, "9.0.0+cu128", snap.undo)
    reading = facts.reading_of(snap, spec, known, world.UNDO_ROW, world.NOW)
    does = state.TABLES[command][reading.state]
    return plan.build(target or world.target(), spec, snap, reading, does, NOW, rewritten)


def expected(name: str, index: int, command: str) -> list[PlanStep]:
    patched, rec, undone = world.applied()
    vendor_rec, vendor_undo = world.applied(VENDOR, match="site")[1:]
    pristine_rec = world.record_of(SOURCE)
    apply_pristine: list[PlanStep] = [
        undo(undone, None),
        graph(PATCHED, GRAPH_STAT, NOW, SOURCE),
        record(rec, pristine_rec, 0o664),
    ]
    restore: list[PlanStep] = [  # mode and mtime of graph.py and RECORD as the undo record names them
        graph(SOURCE, GRAPH_STAT, GRAPH_STAT.mtime_ns, PATCHED),
        record(pristine_rec, rec, RECORD_STAT.mode, RECORD_STAT.mtime_ns),
        gone(undone),
    ]
    forged = world.forged(undone, patched, SOURCE)
    unrecorded_undo = undo_of(SOURCE, AFTER_STAT, None)
    table: dict[tuple[str, int, str], list[PlanStep]] = {
        ("pristine", 0, "apply"): apply_pristine,
        ("pristine", 0, "revert"): [],
        ("pristine", 1, "apply"): [  # no RECORD: the undo record takes graph.py's mode and owner
            undo(undo_of(SOURCE, GRAPH_STAT, None), None, GRAPH_STAT),
            graph(PATCHED, GRAPH_STAT, NOW, SOURCE),
        ],
        ("pristine", 1, "revert"): [],
        ("patched", 0, "apply"): [],
        ("patched", 0, "revert"): restore,
        ("patched", 1, "apply"): [],
        ("patched", 1, "revert"): [
            graph(VENDOR, GRAPH_STAT, GRAPH_STAT.mtime_ns, VENDOR_PATCHED),
            record(world.record_of(VENDOR), vendor_rec, RECORD_STAT.mode, RECORD_STAT.mtime_ns),
            gone(vendor_undo),
        ],
        ("apply-interrupted", 0, "apply"): [  # the undo record made whole, RECORD's stat as it is now
            undo(undo_of(SOURCE, GRAPH_STAT, pristine_rec, AFTER_RECORD_STAT), undone, AFTER_RECORD_STAT),
            record(rec, pristine_rec, AFTER_RECORD_STAT.mode),
        ],
        ("apply-interrupted", 0, "revert"): [
            graph(SOURCE, GRAPH_STAT, GRAPH_STAT.mtime_ns, PATCHED),
            gone(undone),
        ],
        ("ships-lazy", 0, "apply"): [],
        ("ships-lazy", 0, "revert"): [],
        ("ships-lazy", 1, "apply"): [],
        ("ships-lazy", 1, "revert"): [],
        ("record-only", 0, "apply"): [undo(undone, undone), *apply_pristine[1:]],
        ("record-only", 0, "revert"): [gone(undone)],
        ("revert-interrupted", 0, "apply"): [  # RECORD already as apply leaves it: its part is kept
            undo(undone, undone),
            graph(PATCHED, GRAPH_STAT, NOW, SOURCE),
        ],
        ("revert-interrupted", 0, "revert"): [
            record(pristine_rec, rec, RECORD_STAT.mode, RECORD_STAT.mtime_ns),
            gone(undone),
        ],
        ("unrecorded", 0, "apply"): [undo(unrecorded_undo, None, AFTER_RECORD_STAT)],
        ("unrecorded", 0, "revert"): [  # no record of the original's mode and mtime: they stay
            graph(SOURCE, AFTER_STAT, AFTER_STAT.mtime_ns, PATCHED),
            record(pristine_rec, rec, AFTER_RECORD_STAT.mode),
        ],
        ("unrecorded", 1, "apply"): [
            undo(
                # a lazy site patching its own release (9.0.0+cu128) gives is recorded under that release
                undo_of(VENDOR, AFTER_STAT, world.record_of(VENDOR), AFTER_RECORD_STAT, "site", "9.0.0"),
                None,
                AFTER_RECORD_STAT,
            ),
            record(vendor_rec, world.record_of(VENDOR), AFTER_RECORD_STAT.mode),
        ],
        ("unrecorded", 1, "revert"): [graph(VENDOR, AFTER_STAT, AFTER_STAT.mtime_ns, VENDOR_PATCHED)],
        ("reinstalled", 0, "apply"): [undo(undone, vendor_undo), *apply_pristine[1:]],
        ("reinstalled", 0, "revert"): [gone(vendor_undo)],
        ("reinstalled", 1, "apply"): [
            undo(undo_of(ANOTHER, GRAPH_STAT, pristine_rec, match="site"), vendor_undo),
            graph(ANOTHER.replace(world.EAGER, world.LAZY), GRAPH_STAT, NOW, ANOTHER),
            record(
                world.record_change_after(pristine_rec, ANOTHER.replace(world.EAGER, world.LAZY)),
                pristine_rec,
                0o664,
            ),
        ],
        ("reinstalled", 1, "revert"): [
            record(world.record_of(ANOTHER), pristine_rec, RECORD_STAT.mode),
            gone(vendor_undo),
        ],
        ("upgraded", 0, "apply"): [gone(undone)],
        ("upgraded", 0, "revert"): [gone(undone)],
        ("untrusted-eager", 0, "apply"): [undo(undone, forged), *apply_pristine[1:]],
        ("untrusted-eager", 0, "revert"): [gone(forged)],
        ("untrusted-patched", 0, "apply"): [undo(unrecorded_undo, b"{not json", AFTER_RECORD_STAT)],
        ("untrusted-patched", 0, "revert"): [
            graph(SOURCE, AFTER_STAT, AFTER_STAT.mtime_ns, PATCHED),
            record(pristine_rec, rec, AFTER_RECORD_STAT.mode),
            gone(b"{not json"),
        ],
        ("untrusted-patched", 1, "apply"): [undo(unrecorded_undo, b"[" * 100_000, AFTER_RECORD_STAT)],
        ("untrusted-patched", 1, "revert"): [
            graph(SOURCE, AFTER_STAT, AFTER_STAT.mtime_ns, PATCHED),
            record(pristine_rec, rec, AFTER_RECORD_STAT.mode),
            gone(b"[" * 100_000),
        ],
        ("untrusted-lazy", 0, "apply"): [gone(b"[]")],
        ("untrusted-lazy", 0, "revert"): [gone(b"[]")],
        ("untrusted-lazy", 1, "apply"): [gone(world.one_edit_undo(world.NATIVE))],
        ("untrusted-lazy", 1, "revert"): [gone(world.one_edit_undo(world.NATIVE))],
    }
    return table[name, index, command]


REFUSED = (
    "newer-eager",
    "newer-patched",
    "newer-lazy",
    "edited",
    "unknown",
)  # apply and revert write nothing
PLANNED = [(n, i, c) for n, i in world.CASES if n not in REFUSED for c in ("apply", "revert")]


@pytest.mark.parametrize(("name", "index", "command"), PLANNED, ids=[f"{c}-{n}-{i}" for n, i, c in PLANNED])
def test_the_plan_of_each_command_in_each_state(spec: PatchSpec, name: str, index: int, command: str) -> None:
    snap = world.states()[name][index]
    planned = _plan(spec, snap, command)
    steps = expected(name, index, command)
    assert list(planned.steps) == steps
    written = [s.data for s in steps if isinstance(s, Write) and s.path == GRAPH]
    assert planned.result == (written[0] if written else None)
    writable = (
        (GRAPH, GRAPH.parent, RECORD.parent, RECORD)
        if snap.record is not None
        else (GRAPH, GRAPH.parent, UNDO.parent)
    )
    assert planned.check == (writable if steps else ())
    assert planned.leaves == LEAVES[command].get(name, name)
    # what the plan says it does (for the sentence) is what its steps do
    writes = [s.path for s in steps if isinstance(s, Write)]
    removes = [s.path for s in steps if isinstance(s, Remove)]
    assert planned.done == Done(
        graph_written=bool(written),
        line=planned.done.line,
        undo_written=UNDO in writes,
        undo_removed=UNDO in removes,
        record_written=RECORD in writes,
        pycs=sum(isinstance(s, Rebuild) for s in steps),
        pycs_removed=sum(p.name.endswith(".pyc") for p in removes),
        no_record=snap.record is None,
    )
    assert (planned.done.line is not None) == bool(written)
    assert planned.source == (written[0] if written else snap.graph)


# The state each command leaves, where it is not the state it found.
_PATCHED = ("pristine", "apply-interrupted", "record-only", "revert-interrupted", "unrecorded", "reinstalled")
LEAVES = {
    "apply": {n: "patched" for n in (*_PATCHED, "untrusted-eager", "untrusted-patched")}
    | {"upgraded": "ships-lazy", "untrusted-lazy": "ships-lazy"},
    "revert": {n: "pristine" for n in (*_PATCHED, "patched", "untrusted-eager", "untrusted-patched")}
    | {"upgraded": "ships-lazy", "untrusted-lazy": "ships-lazy"},
}


def _pycs(graph_bytes: bytes, mtime_ns: int) -> tuple[Pyc, ...]:
    fresh = world.timestamp_header(graph_bytes, mtime_ns)
    stale = world.timestamp_header(graph_bytes + b"#", mtime_ns)
    return (
        world.a_pyc("graph.own.pyc", "timestamp", fresh),
        world.a_pyc("graph.own-stale.pyc", "timestamp", stale),
        world.a_pyc("graph.own-hash.pyc", "checked-hash", b"H" * 16),  # no source hash known: stale
        world.a_pyc("graph.own-junk.pyc", "invalid", b"junk"),
        world.a_pyc("graph.other.pyc", "timestamp", stale, tag="other-tag"),
    )


def _pyc_steps(planned: plan.Plan) -> list[tuple[str, str, bytes | None, int | None]]:
    out: list[tuple[str, str, bytes | None, int | None]] = []
    for step in planned.steps:
        if isinstance(step, Rebuild):
            out.append(("rebuild", step.pyc.path.name, planned.source, planned.mtime_ns))
        elif step.path.name.endswith(".pyc"):
            assert isinstance(step, Remove) and step.was == ANY  # Python may rewrite bytecode
            out.append(("remove", step.path.name, None, None))
    return out


def test_a_new_graph_py_rebuilds_the_targets_own_pycs_and_removes_the_others(spec: PatchSpec) -> None:
    pycs = _pycs(SOURCE, GRAPH_STAT.mtime_ns)
    planned = _plan(spec, world.snap(SOURCE, world.record_of(SOURCE), pycs=pycs), "apply")
    assert _pyc_steps(planned) == [
        ("rebuild", "graph.own.pyc", PATCHED, NOW),
        ("rebuild", "graph.own-stale.pyc", PATCHED, NOW),
        ("rebuild", "graph.own-hash.pyc", PATCHED, NOW),
        ("remove", "graph.own-junk.pyc", None, None),
        ("remove", "graph.other.pyc", None, None),
    ]
    assert (planned.done.pycs, planned.done.pycs_removed) == (3, 2)  # as the sentence counts them
    ends = [s for s in planned.steps if not isinstance(s, Rebuild)]  # the pycs are between
    assert [(type(s), s.path) for s in ends[:2] + ends[-1:]] == [
        (Write, UNDO),
        (Write, GRAPH),
        (Write, RECORD),
    ]
    assert planned.check[4:] == tuple(p.path for p in pycs)


def test_the_same_graph_py_rebuilds_only_its_stale_pycs(spec: PatchSpec) -> None:
    patched, rec, undone = world.applied()
    pycs = _pycs(patched, AFTER_STAT.mtime_ns)
    planned = _plan(spec, world.later(patched, rec, undone)._replace(pycs=pycs), "apply")
    assert _pyc_steps(planned) == [
        ("rebuild", "graph.own-stale.pyc", patched, AFTER_STAT.mtime_ns),
        ("rebuild", "graph.own-hash.pyc", patched, AFTER_STAT.mtime_ns),
        ("remove", "graph.own-junk.pyc", None, None),
    ]
    assert len(planned.steps) == 3
    assert (planned.done.graph_written, planned.done.pycs, planned.done.pycs_removed) == (False, 2, 1)


def test_the_stale_pycs_are_judged_once(spec: PatchSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of the target's pycs is judged against graph.py once, when the state is named; the plan
    rebuilds the ones found stale then."""
    from patcher.core import facts, installed

    patched, rec, undone = world.applied()
    snap = world.later(patched, rec, undone)._replace(pycs=_pycs(patched, AFTER_STAT.mtime_ns))
    judged: list[str] = []
    real = facts.stale

    def counting(pyc: installed.Pyc, source: bytes, mtime: float, hash_of_source: str | None) -> bool:
        judged.append(pyc.path.name)
        return real(pyc, source, mtime, hash_of_source)

    monkeypatch.setattr(facts, "stale", counting)
    planned = _plan(spec, snap, "apply")
    assert [kind for kind, *_ in _pyc_steps(planned)] == ["rebuild", "rebuild", "remove"]
    own = [p.path.name for p in snap.pycs if p.tag == world.TAG]
    assert sorted(judged) == sorted(own)  # each once


def test_revert_rebuilds_the_pycs_for_the_original_at_its_mtime(spec: PatchSpec) -> None:
    patched, rec, undone = world.applied()
    pycs = _pycs(patched, AFTER_STAT.mtime_ns)
    planned = _plan(spec, world.later(patched, rec, undone)._replace(pycs=pycs), "revert")
    assert _pyc_steps(planned)[0] == ("rebuild", "graph.own.pyc", SOURCE, GRAPH_STAT.mtime_ns)
    assert [k for k, *_ in _pyc_steps(planned)] == ["rebuild"] * 3 + ["remove"] * 2


def test_a_tree_without_dist_info_keeps_the_undo_record_beside_torch(spec: PatchSpec) -> None:
    bare = world.bare_target()
    planned = _plan(spec, world.snap(SOURCE, None), "apply", bare)
    data = world.undo_json(world.graph_change(SOURCE, PATCHED), None)
    assert bare.undo_path == bare.torch_dir.parent / ".torch_lazylog.json"  # beside, never inside
    assert planned.steps[0] == Write(bare.undo_path, data, 0o644, 1001, 1002, None, ABSENT)
    assert planned.check == (GRAPH, GRAPH.parent, bare.torch_dir.parent)


def test_revert_after_record_was_normalised_and_grown_points_the_rows(spec: PatchSpec) -> None:
    patched, rec, undone = world.applied()
    grown = rec.replace(b"\r\n", b"\n") + b"torch/extra.py,,\n"
    planned = _plan(spec, world.later(patched, grown, undone), "revert")
    restored = world.record_of(SOURCE).replace(b"\r\n", b"\n") + b"torch/extra.py,,\n"
    assert planned.steps[1] == record(restored, grown, AFTER_RECORD_STAT.mode)  # RECORD's stat kept


def test_a_recorded_record_edit_beyond_our_rows_is_not_replayed(spec: PatchSpec) -> None:
    """Undone, the recorded RECORD edit must touch only graph.py's row and the undo row."""
    patched, _, undone = world.applied()
    at, old = world.line_of(world.record_of(SOURCE), b"torch/_inductor/graph.py,")
    extra = b"torch/other.py,,\r\n"
    before = world.record_of(SOURCE)[:at] + extra + world.record_of(SOURCE)[at:]
    after = before[:at] + extra + world.record_change_after(world.record_of(SOURCE), patched)[at:]
    data = world.change_json(
        world.RECORD_ROW,
        before,
        after,
        at,
        extra + old,
        after[at : len(after) - len(world.VERSION_ROW) - 2],
        0o664,
        1,
    )
    import json

    full = json.loads(undone)
    full["record"] = data
    forged = (json.dumps(full, indent=2, sort_keys=True) + "\n").encode()
    snap = world.later(patched, after, forged)
    assert snap.undo is not None and snap.undo.record_change is not None  # a record of the right shape
    planned = _plan(spec, snap, "revert")
    assert planned.steps[1] == record(before, after, AFTER_RECORD_STAT.mode)  # pointed, not replayed


def _record_stat_claim(undone: bytes, mode: int, mtime: int) -> bytes:
    import json

    data = json.loads(undone)
    data["record"].update(mode=mode, mtime_ns=mtime)
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


@pytest.mark.parametrize(
    ("mode", "mtime", "kept"),
    [(0o644, 5, True), (0o444, 5, False), (0o4644, 5, False), (0o644, -1, False), (0o200, 0, True)],
    ids=["plausible", "read-only", "set-id", "before-1970", "owner-write-only"],
)
def test_revert_gives_record_the_mode_and_mtime_recorded_only_when_plausible(
    spec: PatchSpec, mode: int, mtime: int, kept: bool
) -> None:
    patched, rec, undone = world.applied()
    planned = _plan(spec, world.later(patched, rec, _record_stat_claim(undone, mode, mtime)), "revert")
    pristine = world.record_of(SOURCE)
    want = record(pristine, rec, mode, mtime) if kept else record(pristine, rec, AFTER_RECORD_STAT.mode)
    assert planned.steps[1] == want


def test_a_replayed_record_that_still_lists_the_undo_row_is_pointed_instead(spec: PatchSpec) -> None:
    patched = PATCHED
    listed = world.record_of(SOURCE, f"{world.UNDO_ROW},,")  # what the recorded edit claims it was
    data = world.undo_json(world.graph_change(SOURCE, patched), world.record_change(listed, patched))
    now = world.record_change_after(listed, patched)
    planned = _plan(spec, world.later(patched, now, data), "revert")
    assert planned.steps[1] == record(world.record_of(SOURCE), now, AFTER_RECORD_STAT.mode)


def _claim(undone: bytes, **fields: object) -> bytes:
    import json

    data = json.loads(undone)
    for name, value in fields.items():
        part, _, key = name.rpartition("__")
        (data[part] if part else data)[key] = value
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def test_revert_beside_an_untrusted_record_keeps_graph_pys_mode_and_mtime(spec: PatchSpec) -> None:
    patched, rec, undone = world.applied()
    setid = _claim(undone, graph__mode=0o4644, graph__mtime_ns=5)  # parses, but no original had it
    snap = world.later(patched, rec, setid)
    assert snap.undo is not None
    planned = _plan(spec, snap, "revert")
    assert planned.steps[0] == graph(SOURCE, AFTER_STAT, AFTER_STAT.mtime_ns, PATCHED)


def test_settling_keeps_the_release_and_match_the_record_names(spec: PatchSpec) -> None:
    patched, _, undone = world.applied()
    claimed = _claim(undone, release="9.0.1", match="site")
    planned = _plan(spec, world.later(patched, world.record_of(SOURCE), claimed), "apply")
    first = planned.steps[0]
    assert isinstance(first, Write) and first.path == UNDO
    expected = world.undo_json(
        world.graph_change(SOURCE, PATCHED),
        world.record_change(world.record_of(SOURCE), PATCHED, AFTER_RECORD_STAT),
        "9.0.1",
        "site",
    )
    assert first.data == expected


@pytest.mark.parametrize(
    ("lines", "ours"),
    [
        (b"torch/_inductor/graph.py,sha256=x,1\r\n", True),
        (b'"torch/_inductor/graph.py","",""\n', True),
        (b"torch/_inductor/graph.py\n", True),
        (b"torch/_inductor/graph.py,,\nu.json,,\n", True),
        (b"", True),
        (b"Xtorch/_inductor/graph.py,,\n", False),
        (b" torch/_inductor/graph.py,,\n", False),
        (b"torch/other.py,torch/_inductor/graph.py,\n", False),
        (b"\xff,,\n", False),
        (b"torch/_inductor/graph.py,,\nother,,\n", False),
    ],
)
def test_only_rows(lines: bytes, ours: bool) -> None:
    assert plan._only_rows(lines, (world.ROW, "u.json"), "") == ours


def test_a_recorded_record_edit_that_removed_a_row_is_not_replayed(spec: PatchSpec) -> None:
    patched, _, undone = world.applied()
    extra = b"torch/other.py,,\r\n"
    pristine = world.record_of(SOURCE)
    at, old = world.line_of(pristine, b"torch/_inductor/graph.py,")
    before = pristine[:at] + extra + pristine[at:]
    now = world.record_change_after(pristine, patched)
    new = now[at : len(now) - len(world.VERSION_ROW) - 2]
    change = world.change_json(world.RECORD_ROW, before, now, at, extra + old, new, 0o664, 1)
    full = _claim(undone, record=change)
    snap = world.later(patched, now, full)
    assert snap.undo is not None and snap.undo.record_change is not None
    planned = _plan(spec, snap, "revert")
    assert planned.steps[1] == record(pristine, now, AFTER_RECORD_STAT.mode)  # pointed, not replayed


# graph.py's row spelled absolute (the spec allows it), written out here: the plan must find it from
# the dist-info's directory (`Snapshot.record_base`) and keep its spelling.
_ABS = f"{world.SITE}/{world.ROW}"


def _abs_record(graph_bytes: bytes, *extra: str) -> bytes:
    return world.lines(world.INIT_ROW, f"{_ABS},{world.b64('sha256', graph_bytes)},{len(graph_bytes)}", *extra,
                       world.VERSION_ROW)  # fmt: skip


def _record_write(planned: plan.Plan) -> Write:
    (write,) = [s for s in planned.steps if isinstance(s, Write) and s.path.name == "RECORD"]
    return write


def test_apply_keeps_an_absolute_graph_row_absolute(spec: PatchSpec) -> None:
    patched = SOURCE.replace(world.EAGER, world.LAZY)
    snap = world.snap(SOURCE, _abs_record(SOURCE))._replace(record_base=str(world.SITE))
    assert _record_write(_plan(spec, snap, "apply")).data == _abs_record(patched, f"{world.UNDO_ROW},,")


def _reverting(before: bytes) -> Snapshot:
    """As apply leaves `before` (graph.py's row absolute): the row pointed at the patched bytes, the
    undo row after it, and the undo record of exactly that edit."""
    patched = SOURCE.replace(world.EAGER, world.LAZY)
    offset, old = world.line_of(before, f"{_ABS},".encode())
    new = f"{_ABS},{world.b64('sha256', patched)},{len(patched)}\r\n{world.UNDO_ROW},,\r\n".encode()
    after = before[:offset] + new + before[offset + len(old) :]
    change = world.change_json(
        world.RECORD_ROW, before, after, offset, old, new, RECORD_STAT.mode, RECORD_STAT.mtime_ns
    )
    undone = world.undo_json(world.graph_change(SOURCE, patched), change)
    return world.later(patched, after, undone)._replace(record_base=str(world.SITE))


def test_revert_restores_a_record_with_an_absolute_row_byte_for_byte_with_its_mode_and_mtime(
    spec: PatchSpec,
) -> None:
    before = _abs_record(SOURCE)
    write = _record_write(_plan(spec, _reverting(before), "revert"))
    assert (write.data, write.mode, write.mtime_ns) == (before, RECORD_STAT.mode, RECORD_STAT.mtime_ns)


def test_revert_never_restores_a_record_that_would_keep_an_undo_row_in_another_spelling(
    spec: PatchSpec,
) -> None:
    """RECORD as it was before apply already listed the undo record, spelled absolute: restoring those
    bytes would keep a row for a file revert removes, so graph.py's row is pointed instead."""
    before = _abs_record(SOURCE, f"{world.SITE}/{world.UNDO_ROW},,")
    write = _record_write(_plan(spec, _reverting(before), "revert"))
    assert write.data == _abs_record(SOURCE) and write.mtime_ns is None


def test_apply_after_an_interrupted_revert_then_revert_restores_record_byte_for_byte(
    spec: PatchSpec,
) -> None:
    """A revert stopped after graph.py and before RECORD, then apply, then revert: graph.py and
    RECORD come back as before the first apply, bytes, mode and mtime, as from every other state."""
    _, rec, undone = world.applied()
    pristine_rec = world.record_of(SOURCE)
    stopped = world.snap(SOURCE, rec, undone, record_stat=AFTER_RECORD_STAT)
    applied = _plan(spec, stopped, "apply")
    written = {s.path: s.data for s in applied.steps if isinstance(s, steps.Write)}
    assert set(written) == {UNDO, GRAPH}  # RECORD already as apply leaves it
    again = world.snap(
        written[GRAPH],
        rec,
        written[UNDO],
        stat=FileStat(0o644, 1001, 1002, NOW),
        record_stat=AFTER_RECORD_STAT,
    )
    reverted = _plan(spec, again, "revert")
    assert list(reverted.steps) == [
        graph(SOURCE, GRAPH_STAT, GRAPH_STAT.mtime_ns, PATCHED),
        record(pristine_rec, rec, RECORD_STAT.mode, RECORD_STAT.mtime_ns),
        gone(written[UNDO]),
    ]


def test_apply_beside_an_untrusted_record_keeps_none_of_its_record_claims(spec: PatchSpec) -> None:
    """RECORD already as apply leaves it, beside an undo record that does not describe graph.py:
    the new undo record has no RECORD part (nothing of the untrusted one is believed)."""
    _, rec, undone = world.applied()
    forged = world.forged(undone, PATCHED, SOURCE)
    planned = _plan(spec, world.snap(SOURCE, rec, forged), "apply")
    assert list(planned.steps) == [
        undo(undo_of(SOURCE, GRAPH_STAT, None), forged),
        graph(PATCHED, GRAPH_STAT, NOW, SOURCE),
    ]


def test_apply_over_a_record_of_another_record_keeps_no_record_part(spec: PatchSpec) -> None:
    """A revert stopped before RECORD, whose RECORD was then changed by hand (a row added): the
    undo record's RECORD part no longer describes RECORD, so it is not kept."""
    _, rec, undone = world.applied()
    grown = rec + b"torch/extra.py,,\r\n"
    planned = _plan(spec, world.snap(SOURCE, grown, undone), "apply")
    assert planned.steps[0] == undo(undo_of(SOURCE, GRAPH_STAT, None), undone)


@pytest.mark.parametrize(
    ("name", "command"), [("pristine", "apply"), ("patched", "revert"), ("unrecorded", "apply")]
)
def test_graph_py_is_hashed_once_when_it_is_read(
    spec: PatchSpec, monkeypatch: pytest.MonkeyPatch, name: str, command: str
) -> None:
    """The snapshot carries graph.py's sha256: classifying, naming the state and planning the writes
    never hash graph.py's bytes again (the write's re-read before each replace is fsio's); the plan
    hashes RECORD as read once, for its write's check and the undo record alike."""
    import hashlib

    snap = world.states()[name][0]
    hashed: list[bytes] = []
    real = hashlib.sha256

    def counting(data: bytes = b"", **kwargs: bool) -> hashlib._Hash:
        hashed.append(bytes(data))
        return real(data, **kwargs)

    monkeypatch.setattr(hashlib, "sha256", counting)
    planned = _plan(spec, snap, command)
    assert planned.steps  # the plan writes: graph.py or its undo record
    assert hashed and snap.graph not in hashed
    assert hashed.count(snap.record or b"") == 1
