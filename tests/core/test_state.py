"""patcher.core.state: each named state from the bytes, the command tables and verdict().

The expected tables are written out here, row by row: a change to any decision fails a test.
"""

from __future__ import annotations

import typing

import pytest

from patcher.core import facts, state
from patcher.core.classify import classify
from patcher.core.exitcodes import ExitCode
from patcher.core.report import Next
from patcher.core.spec import PatchSpec
from tests.core import world

OK, EAGER, REFUSED = ExitCode.OK, ExitCode.EAGER, ExitCode.REFUSED
ALL_STATES = typing.get_args(state.State)


@pytest.mark.parametrize(("name", "index"), world.CASES, ids=[f"{n}-{i}" for n, i in world.CASES])
def test_each_state_is_named_from_the_bytes(spec: PatchSpec, name: str, index: int) -> None:
    snap = world.states()[name][index]
    known, _ = classify(snap.graph, snap.sha256, spec, "9.0.0", snap.undo)
    assert facts.reading_of(snap, spec, known, world.UNDO_ROW, world.NOW).state == name


def test_the_cases_cover_every_state() -> None:
    assert {name for name, _ in world.CASES} == set(ALL_STATES) == set(world.states())


BY_KIND_AND_FIT = {
    "eager": {
        "none": "pristine",
        "before": "record-only",
        "other": "reinstalled",
        "after": "untrusted-eager",
    },
    "patched": {
        "none": "unrecorded",
        "after": "patched",
        "before": "untrusted-patched",
        "other": "untrusted-patched",
    },
    "native": {"none": "ships-lazy", "after": "patched", "before": "untrusted-lazy", "other": "upgraded"},
    "unknown": {"none": "unknown", "after": "edited", "before": "edited", "other": "edited"},
}
UNTRUSTED = {
    "eager": "untrusted-eager",
    "patched": "untrusted-patched",
    "native": "untrusted-lazy",
    "unknown": "unknown",
}
# A newer torch-lazylog's record: graph.py judged alone, and the record left to that tool.
NEWER = {"eager": "newer-eager", "patched": "newer-patched", "native": "newer-lazy", "unknown": "unknown"}


def _facts(kind: str, fit: str, names_original: bool = False, names_patched: bool = False) -> state.State:
    return state.name_state(kind, fit, names_original, names_patched)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", list(BY_KIND_AND_FIT))
def test_decide_by_kind_and_fit(kind: str) -> None:
    for fit, expected in BY_KIND_AND_FIT[kind].items():
        assert _facts(kind, fit) == expected, fit
    assert _facts(kind, "untrusted") == UNTRUSTED[kind]
    assert _facts(kind, "newer") == NEWER[kind]
    assert _facts(kind, "changed") == "edited"


def test_an_unfinished_apply_or_revert_is_named_from_the_row() -> None:
    assert _facts("patched", "after", names_original=True) == "apply-interrupted"
    assert _facts("native", "after", names_original=True) == "apply-interrupted"
    assert _facts("eager", "before", names_patched=True) == "revert-interrupted"
    # the row's evidence counts only in the state it finishes
    assert _facts("patched", "after", names_patched=True) == "patched"
    assert _facts("eager", "before", names_original=True) == "record-only"
    assert _facts("patched", "none", names_original=True) == "unrecorded"
    assert _facts("eager", "none", names_patched=True) == "pristine"


LAZY_STATES = {
    "patched",
    "apply-interrupted",
    "ships-lazy",
    "unrecorded",
    "upgraded",
    "untrusted-patched",
    "untrusted-lazy",
    "newer-patched",
    "newer-lazy",
}

APPLY = {
    "pristine": ("patch",),
    "patched": (),
    "apply-interrupted": (),
    "ships-lazy": (),
    "record-only": ("patch",),
    "revert-interrupted": ("patch",),
    "unrecorded": ("write-undo",),
    "reinstalled": ("patch",),
    "upgraded": ("drop",),
    "untrusted-eager": ("patch",),
    "untrusted-patched": ("write-undo",),
    "untrusted-lazy": ("drop",),
    "newer-eager": ("refuse",),
    "newer-patched": ("refuse",),
    "newer-lazy": ("refuse",),
    "edited": ("refuse",),
    "unknown": ("refuse",),
}
REVERT = {
    "pristine": (),
    "patched": ("restore",),
    "apply-interrupted": ("restore",),
    "ships-lazy": (),
    "record-only": ("drop",),
    "revert-interrupted": ("drop",),
    "unrecorded": ("restore",),
    "reinstalled": ("drop",),
    "upgraded": ("drop",),
    "untrusted-eager": ("drop",),
    "untrusted-patched": ("restore",),
    "untrusted-lazy": ("drop",),
    "newer-eager": ("refuse",),
    "newer-patched": ("refuse",),
    "newer-lazy": ("refuse",),
    "edited": ("refuse",),
    "unknown": ("refuse",),
}
VERIFY = {
    "pristine": EAGER,
    "patched": OK,
    "apply-interrupted": "tidy",
    "ships-lazy": OK,
    "record-only": EAGER,
    "revert-interrupted": EAGER,
    "unrecorded": "tidy",
    "reinstalled": EAGER,
    "upgraded": "tidy",
    "untrusted-eager": EAGER,
    "untrusted-patched": "tidy",
    "untrusted-lazy": "tidy",
    "newer-eager": (EAGER, None),  # judged by graph.py alone: apply and revert refuse, so no next step
    "newer-patched": OK,
    "newer-lazy": OK,
    "edited": (REFUSED, "reinstall"),
    "unknown": (REFUSED, None),
}


def _verify_rule(expected: object) -> state.Rule:
    if expected == "tidy":
        return state.Rule(OK, "apply")
    if expected == EAGER:
        return state.Rule(EAGER, "apply")
    if expected == OK:
        return state.Rule()
    assert isinstance(expected, tuple)
    return state.Rule(expected[0], expected[1])


def test_the_command_tables() -> None:
    assert state.TABLES == {"apply": state.APPLY, "revert": state.REVERT}
    assert state.APPLY == APPLY
    assert state.REVERT == REVERT
    assert {name: state.VERIFY[name] for name in ALL_STATES} == {
        n: _verify_rule(v) for n, v in VERIFY.items()
    }
    assert state.LAZY == LAZY_STATES


@pytest.mark.parametrize("name", ALL_STATES)
def test_verify_rule_with_what_verify_finds_in_every_state(name: state.State) -> None:
    interrupted = name in ("apply-interrupted", "revert-interrupted")
    lazy = name in LAZY_STATES
    plain = _verify_rule(VERIFY[name])
    step: Next | None = None if APPLY[name] == ("refuse",) else "apply"  # never a step that refuses
    eager, tidy = state.Rule(EAGER, step), state.Rule(OK, step)
    for row in ("absent", "current", "unhashed"):
        assert state.verify_rule(name, row, False) == (plain, ()), row
    row_found = () if interrupted else ("record-row",)
    with_row = tidy if row_found and plain.code == OK else plain
    assert state.verify_rule(name, "other", False) == (with_row, row_found)
    if lazy:  # bytecode that runs the eager code
        assert state.verify_rule(name, "current", True) == (eager, ("stale-unchecked-pyc",))
        assert state.verify_rule(name, "other", True) == (eager, (*row_found, "stale-unchecked-pyc"))
    else:
        assert state.verify_rule(name, "current", True) == (plain, ())
        assert state.verify_rule(name, "other", True) == (with_row, row_found)


def test_verify_never_fails_a_lazy_state_and_never_passes_an_eager_one() -> None:
    for name in ALL_STATES:
        code = state.VERIFY[name].code
        assert code == (REFUSED if name in ("edited", "unknown") else OK if name in LAZY_STATES else EAGER)


_USUAL_STARTS = ("pristine", "patched", "apply-interrupted", "unrecorded")  # apply's, and revert's


@pytest.mark.parametrize("name", ALL_STATES)
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_change_of_graph_py_says_what_it_was_unless_it_is_the_usual_start(
    command: str, name: state.State
) -> None:
    from patcher.core import messages, steps
    from patcher.core.classify import Known

    said = messages.changed(command, name, Known("eager", None, None), "9.0.0", steps.Done(True, 3), False)
    assert ("; it was: " in said) == (name not in _USUAL_STARTS), said


@pytest.mark.parametrize("name", ALL_STATES)
def test_an_undo_record_that_only_follows_records_row_is_not_said_to_be_written(name: state.State) -> None:
    from patcher.core import messages, steps
    from patcher.core.classify import Known

    done = steps.Done(undo_written=True, record_written=True)
    said = messages.changed("apply", name, Known("eager", None, None), "9.0.0", done, False)
    assert ("wrote its undo record" in said) == (name not in ("patched", "apply-interrupted")), said
    assert "updated RECORD" in said


@pytest.mark.parametrize(
    ("graph", "mode", "kind", "name"),
    [
        # bytes this tool's undo record says it wrote (the vendor build's one edit): patched, decided
        # by classify from the bytes, even beside no RECORD and a record whose mode no file had
        (world.VENDOR.replace(world.EAGER, world.LAZY), 0o4644, "patched", "untrusted-patched"),
        (world.VENDOR.replace(world.EAGER, world.LAZY), 0o644, "patched", "patched"),
        # a lazy branch known only by its site, no trace of this tool: it ships lazy
        (world.VENDOR.replace(world.EAGER, world.LAZY), None, "lazy", "ships-lazy"),
    ],
)
def test_kind_is_decided_once_classify_by_the_bytes_facts_by_the_traces_for_a_lazy_branch(
    spec: PatchSpec, graph: bytes, mode: int | None, kind: str, name: str
) -> None:
    """classify never calls a lazy branch known by its site patched or native ("lazy"); facts then
    decides from this tool's traces, and from them only. A file this tool's record says it wrote is
    patched by the bytes: before, with no RECORD to name its original, it was called native (its
    untrusted record then dropped, and revert could never give the vendor's original back)."""
    undo = None
    if mode is not None:
        change = world.graph_change(world.VENDOR, graph, mode)
        undo = world.undo_json(change, None, "9.0.0", "site")
    snap = world.snap(graph, None, undo)
    known, _ = classify(snap.graph, snap.sha256, spec, "9.0.0", snap.undo)
    assert known.kind == kind
    reading = facts.reading_of(snap, spec, known, world.UNDO_ROW, world.NOW)
    assert reading.state == name


@pytest.mark.parametrize(
    ("rows", "said"),
    [(b"", "it has no row for torch/_inductor/graph.py"), (b"twice", "it has more than one row for")],
)
def test_a_record_without_graph_pys_one_row_is_a_damaged_install(
    spec: PatchSpec, rows: bytes, said: str
) -> None:
    """RECORD's rows for graph.py are found once, when the state is named: none, or two, is a
    damaged install (a reinstall), before any plan is made."""
    from patcher.core.errors import LazylogError

    listed = world.record_of(world.SOURCE)
    graph_row = world.graph_row(world.SOURCE).encode()
    rec = listed.replace(graph_row, b"") if not rows else listed + graph_row + b"\r\n"
    snap = world.snap(world.SOURCE, rec)
    known, _ = classify(snap.graph, snap.sha256, spec, "9.0.0", snap.undo)
    with pytest.raises(LazylogError) as raised:
        facts.reading_of(snap, spec, known, world.UNDO_ROW, world.NOW)
    assert (
        said in str(raised.value)
        and raised.value.code == ExitCode.ENVIRONMENT
        and raised.value.next == "reinstall"
    )


@pytest.mark.parametrize("name", ["patched", "pristine", "unrecorded"])
def test_records_rows_are_found_once_for_each_file(
    spec: PatchSpec, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Naming the state reads RECORD's rows of graph.py and of the undo record once each: the row's
    fit, what it names (the original, the patched bytes) and the kind all read the rows found."""
    from patcher.core import record

    snap = world.states()[name][0]
    known, _ = classify(snap.graph, snap.sha256, spec, "9.0.0", snap.undo)
    looked_up: list[str] = []
    real = record.rows

    def counting(data: bytes, path: str, base: str) -> list[record.Row]:
        looked_up.append(path)
        return real(data, path, base)

    monkeypatch.setattr(record, "rows", counting)
    reading = facts.reading_of(snap, spec, known, world.UNDO_ROW, world.NOW)
    assert reading.state == name and sorted(looked_up) == sorted([world.ROW, world.UNDO_ROW])


@pytest.mark.parametrize(("name", "index"), [c for c in world.CASES if c[0].startswith("newer-")])
def test_a_newer_tools_record_is_said_and_refused_by_the_core(spec: PatchSpec, name: str, index: int) -> None:
    """verify names the record's version and judges graph.py alone; apply and revert refuse with
    the core's sentence, no next step, the record left to the tool that wrote it."""
    from patcher.core import messages

    snap = world.states()[name][index]
    known, _ = classify(snap.graph, snap.sha256, spec, "9.0.0", snap.undo)
    reading = facts.reading_of(snap, spec, known, world.UNDO_ROW, world.NOW)
    target = world.target()
    named = f"({target.undo_path}: undo record version 2, where this one reads up to version 1)"
    said = messages.verify(reading, target, [], name == "newer-eager")
    assert named in said and "judges graph.py alone" in said and "does not describe" not in said
    for command in ("apply", "revert"):
        refused = messages.refusal(command, target, spec, snap, reading, vendor=False)
        assert (refused.code, refused.state, refused.next) == (REFUSED, name, None)
        assert named in refused.message and refused.message.endswith(f"one, to {command}")


@pytest.mark.parametrize(
    ("name", "index", "vendor", "step"),
    [
        ("edited", 0, False, "reinstall"),
        ("unknown", 0, False, "reinstall"),
        ("unknown", 0, True, "fingerprint"),
    ],
)
def test_a_refusal_s_sentence_and_step_come_from_the_core(
    spec: PatchSpec, name: str, index: int, vendor: bool, step: str
) -> None:
    """A file changed since apply: reinstall; a release's graph.py changed: reinstall; a build no
    index has: fingerprint it (a person's step)."""
    from patcher.core import messages
    from patcher.core.report import Advice

    snap = world.states()[name][index]
    known, _ = classify(snap.graph, snap.sha256, spec, "9.0.0", snap.undo)
    reading = facts.reading_of(snap, spec, known, world.UNDO_ROW, world.NOW)
    refused = messages.refusal("apply", world.target(), spec, snap, reading, vendor)
    assert (refused.code, refused.state) == (REFUSED, name) and "Nothing was written" in refused.message
    if step == "fingerprint":
        assert isinstance(refused.next, Advice) and refused.next.text == messages.FINGERPRINT
    else:
        assert refused.next == step
    assert (refused.support is None) == (name == "edited")


@pytest.mark.parametrize(
    ("undo_left", "lazy", "leaves"),
    [
        (True, True, "patched"),
        (True, False, "patched"),
        (False, True, "ships-lazy"),
        (False, False, "pristine"),
    ],
)
def test_the_state_a_plan_leaves_is_named_by_the_table(undo_left: bool, lazy: bool, leaves: str) -> None:
    """An undo record left: this tool's patch; none: graph.py alone, lazy as shipped or eager."""
    assert state.left(undo_left, lazy) == leaves


@pytest.mark.parametrize("name", ALL_STATES)
def test_a_runtime_that_formats_eagerly_leaves_an_eager_state_and_unknows_a_lazy_one(
    name: state.State,
) -> None:
    assert state.runtime_eager(name) == ("unknown" if name in LAZY_STATES else name)


@pytest.mark.parametrize(
    ("refused_release", "vendor", "why", "step"),
    [
        (True, True, "refused-release", "upgrade"),
        (True, False, "refused-release", "upgrade"),
        (False, True, "vendor-build", "fingerprint"),
        (False, False, "changed-release", "reinstall"),
    ],
)
def test_an_unknown_files_next_step_is_the_tables_by_why_it_is_unknown(
    refused_release: bool, vendor: bool, why: str, step: str
) -> None:
    """A release series the fix cannot reach comes first (upgrade), then a vendor's build
    (fingerprint it), else a release's changed graph.py (reinstall)."""
    found = state.unknown_why(refused_release, vendor)
    assert (found, state.UNKNOWN_NEXT[found]) == (why, step)
