"""patcher.core.state: each named state from the bytes, the command tables, problems() and verdict().

The expected tables are written out here, row by row: a change to any decision fails a test.
"""

from __future__ import annotations

import typing

import pytest

from patcher.core import facts, state
from patcher.core.classify import classify
from patcher.core.errors import ExitCode
from patcher.core.spec import PatchSpec
from patcher.core.state import Facts
from tests.core import world

OK, EAGER, REFUSED = ExitCode.OK, ExitCode.EAGER, ExitCode.REFUSED
ALL_STATES = typing.get_args(state.State)


@pytest.mark.parametrize(("name", "index"), world.CASES, ids=[f"{n}-{i}" for n, i in world.CASES])
def test_each_state_is_named_from_the_bytes(spec: PatchSpec, name: str, index: int) -> None:
    snap = world.states()[name][index]
    known, _ = classify(snap.graph, spec, "9.0.0")
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


def _facts(kind: str, fit: str, names_original: bool = False, names_patched: bool = False) -> Facts:
    return Facts(kind, fit, "current", names_original, names_patched, False, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", list(BY_KIND_AND_FIT))
def test_decide_by_kind_and_fit(kind: str) -> None:
    for fit, expected in BY_KIND_AND_FIT[kind].items():
        assert state.name_state(_facts(kind, fit)) == expected, fit
    assert state.name_state(_facts(kind, "untrusted")) == UNTRUSTED[kind]
    assert state.name_state(_facts(kind, "changed")) == "edited"


def test_an_unfinished_apply_or_revert_is_named_from_the_row() -> None:
    assert state.name_state(_facts("patched", "after", names_original=True)) == "apply-interrupted"
    assert state.name_state(_facts("native", "after", names_original=True)) == "apply-interrupted"
    assert state.name_state(_facts("eager", "before", names_patched=True)) == "revert-interrupted"
    # the row's evidence counts only in the state it finishes
    assert state.name_state(_facts("patched", "after", names_patched=True)) == "patched"
    assert state.name_state(_facts("eager", "before", names_original=True)) == "record-only"
    assert state.name_state(_facts("patched", "none", names_original=True)) == "unrecorded"
    assert state.name_state(_facts("eager", "none", names_patched=True)) == "pristine"


LAZY_STATES = {
    "patched",
    "apply-interrupted",
    "ships-lazy",
    "unrecorded",
    "upgraded",
    "untrusted-patched",
    "untrusted-lazy",
}

APPLY = {
    "pristine": ("patch",),
    "patched": (),
    "apply-interrupted": (),
    "ships-lazy": (),
    "record-only": ("patch",),
    "revert-interrupted": ("patch",),
    "unrecorded": ("record",),
    "reinstalled": ("patch",),
    "upgraded": ("drop",),
    "untrusted-eager": ("patch",),
    "untrusted-patched": ("record",),
    "untrusted-lazy": ("drop",),
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


def _with(row: str = "current", stale_unchecked: bool = False) -> Facts:
    return Facts("eager", "none", row, False, False, stale_unchecked, 1 if stale_unchecked else 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ALL_STATES)
def test_problems_in_every_state(name: state.State) -> None:
    interrupted = name in ("apply-interrupted", "revert-interrupted")
    lazy = name in LAZY_STATES
    assert state.problems(name, _with()) == ()
    for row in ("absent", "current", "unhashed"):
        assert state.problems(name, _with(row)) == (), row
    assert state.problems(name, _with("other")) == (() if interrupted else ("record-row",))
    assert state.problems(name, _with(stale_unchecked=True)) == (("stale-unchecked-pyc",) if lazy else ())
    both = state.problems(name, _with("other", True))
    assert both == tuple(
        p for p, on in (("record-row", not interrupted), ("stale-unchecked-pyc", lazy)) if on
    )


@pytest.mark.parametrize("name", ALL_STATES)
def test_verdict_for_every_problem(name: state.State) -> None:
    plain = _verify_rule(VERIFY[name])
    eager = state.Rule(EAGER, "apply")
    tidy = state.Rule(OK, "apply")
    assert state.verdict(name, ()) == plain
    assert state.verdict(name, ("stale-unchecked-pyc",)) == eager  # bytecode that runs the eager code
    assert state.verdict(name, ("record-row", "stale-unchecked-pyc")) == eager
    assert state.verdict(name, ("record-row",)) == (tidy if plain.code == OK else plain)


def test_verify_never_fails_a_lazy_state_and_never_passes_an_eager_one() -> None:
    for name in ALL_STATES:
        code = state.VERIFY[name].code
        assert code == (REFUSED if name in ("edited", "unknown") else OK if name in LAZY_STATES else EAGER)
