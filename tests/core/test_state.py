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
    known = classify(snap.graph, spec, "9.0.0")
    assert facts.reading_of(snap, spec, known, world.UNDO_ROW, world.NOW).state == name


def test_the_cases_cover_every_state() -> None:
    assert {name for name, _ in world.CASES} == set(ALL_STATES) == set(world.states())


BY_BASE_AND_FIT = {
    "eager": {
        "none": "pristine",
        "before": "record-only",
        "other": "reinstalled",
        "after": "untrusted-eager",
    },
    "ours": {
        "none": "unrecorded",
        "after": "patched",
        "before": "untrusted-patched",
        "other": "untrusted-patched",
    },
    "lazy": {"none": "ships-lazy", "after": "patched", "before": "untrusted-lazy", "other": "upgraded"},
    "unknown": {"none": "unknown", "after": "edited", "before": "edited", "other": "edited"},
}
UNTRUSTED = {
    "eager": "untrusted-eager",
    "ours": "untrusted-patched",
    "lazy": "untrusted-lazy",
    "unknown": "unknown",
}


def _facts(base: str, fit: str, names_original: bool = False, names_patched: bool = False) -> Facts:
    return Facts(base, fit, "current", names_original, names_patched, False, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("base", list(BY_BASE_AND_FIT))
def test_decide_by_base_and_fit(base: str) -> None:
    for fit, expected in BY_BASE_AND_FIT[base].items():
        assert state.name_state(_facts(base, fit)) == expected, fit
    assert state.name_state(_facts(base, "untrusted")) == UNTRUSTED[base]
    assert state.name_state(_facts(base, "changed")) == "edited"


def test_an_unfinished_apply_or_revert_is_named_from_the_row() -> None:
    assert state.name_state(_facts("ours", "after", names_original=True)) == "apply-interrupted"
    assert state.name_state(_facts("lazy", "after", names_original=True)) == "apply-interrupted"
    assert state.name_state(_facts("eager", "before", names_patched=True)) == "revert-interrupted"
    # the row's evidence counts only in the state it finishes
    assert state.name_state(_facts("ours", "after", names_patched=True)) == "patched"
    assert state.name_state(_facts("eager", "before", names_original=True)) == "record-only"
    assert state.name_state(_facts("ours", "none", names_original=True)) == "unrecorded"
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
    "pristine": (("patch",), OK, None, "patched"),
    "patched": (("settle",), OK, None, "patched"),
    "apply-interrupted": (("settle",), OK, None, "patched"),
    "ships-lazy": (("settle",), OK, None, None),
    "record-only": (("patch",), OK, None, "patched"),
    "revert-interrupted": (("patch",), OK, None, "patched"),
    "unrecorded": (("record", "settle"), OK, None, "patched"),
    "reinstalled": (("patch",), OK, None, "patched"),
    "upgraded": (("drop", "settle"), OK, None, "ships-lazy"),
    "untrusted-eager": (("patch",), OK, None, "patched"),
    "untrusted-patched": (("record", "settle"), OK, None, "patched"),
    "untrusted-lazy": (("drop", "settle"), OK, None, "ships-lazy"),
    "edited": (("refuse",), REFUSED, "reinstall", None),
    "unknown": (("refuse",), REFUSED, None, None),
}
REVERT = {
    "pristine": (("settle",), OK, None, None),
    "patched": (("restore",), OK, None, "pristine"),
    "apply-interrupted": (("restore",), OK, None, "pristine"),
    "ships-lazy": (("settle",), OK, None, None),
    "record-only": (("drop", "settle"), OK, None, "pristine"),
    "revert-interrupted": (("drop", "settle"), OK, None, "pristine"),
    "unrecorded": (("restore",), OK, None, "pristine"),
    "reinstalled": (("drop", "settle"), OK, None, "pristine"),
    "upgraded": (("drop", "settle"), OK, None, "ships-lazy"),
    "untrusted-eager": (("drop", "settle"), OK, None, "pristine"),
    "untrusted-patched": (("restore",), OK, None, "pristine"),
    "untrusted-lazy": (("drop", "settle"), OK, None, "ships-lazy"),
    "edited": (("refuse",), REFUSED, "reinstall", None),
    "unknown": (("refuse",), REFUSED, None, None),
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
        return state.Rule((), OK, "apply")
    if expected == EAGER:
        return state.Rule((), EAGER, "apply")
    if expected == OK:
        return state.Rule(())
    assert isinstance(expected, tuple)
    return state.Rule(("refuse",), expected[0], expected[1])


def test_the_command_tables() -> None:
    assert state.TABLES == {"apply": state.APPLY, "verify": state.VERIFY, "revert": state.REVERT}
    assert {name: tuple(rule) for name, rule in state.APPLY.items()} == APPLY
    assert {name: tuple(rule) for name, rule in state.REVERT.items()} == REVERT
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
    eager = state.Rule((), EAGER, "apply")
    tidy = state.Rule((), OK, "apply")
    assert state.verdict(name, ()) == plain
    assert state.verdict(name, ("stale-unchecked-pyc",)) == eager  # bytecode that runs the eager code
    assert state.verdict(name, ("record-row", "stale-unchecked-pyc")) == eager
    assert state.verdict(name, ("record-row",)) == (tidy if plain.code == OK else plain)


def test_verify_never_fails_a_lazy_state_and_never_passes_an_eager_one() -> None:
    for name in ALL_STATES:
        code = state.VERIFY[name].code
        assert code == (REFUSED if name in ("edited", "unknown") else OK if name in LAZY_STATES else EAGER)
