"""The install's one named state, decided from facts read from the bytes; a table per command.

Pure: no file is read here. patcher.core.facts turns a snapshot into Facts; `name_state` names the state;
APPLY and REVERT say, for each state, what the command does to graph.py and the undo record; VERIFY,
its exit code and what to do next. Each decision is made in its table and nowhere else; the state a
run leaves is the plan's (patcher.core.plan). The README's state table is these, checked by a test.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from patcher.core.errors import ExitCode, Next
from patcher.core.record import RowFit
from patcher.core.spec import Kind

# The undo record against graph.py and the release table: none; after (graph.py is what it says
# apply made); before (graph.py is the original it names); other (a sound record of another file,
# graph.py being a release's exact bytes); changed (a sound record, graph.py known only by its site:
# edited since apply); untrusted (its claims do not hold against the bytes and the table).
Fit = Literal["none", "after", "before", "other", "changed", "untrusted"]

State = Literal[
    "pristine",
    "patched",
    "apply-interrupted",
    "ships-lazy",
    "record-only",
    "revert-interrupted",
    "unrecorded",
    "reinstalled",
    "upgraded",
    "untrusted-eager",
    "untrusted-patched",
    "untrusted-lazy",
    "edited",
    "unknown",
]

# What apply or revert does to graph.py and the undo record, in order. patch: the one edit, and its
# undo record. record: write the undo record of a file patched before (its original determined).
# restore: graph.py back to its original, the undo record removed. drop: remove an undo record that
# does not describe graph.py. refuse: nothing written. Whatever the actions, RECORD's row and the pycs
# are made to describe graph.py as the plan leaves it (patcher.core.plan).
Action = Literal["patch", "record", "restore", "drop", "refuse"]


class Facts(NamedTuple):
    kind: Kind  # graph.py against the release table and this tool's traces (patcher.core.facts)
    fit: Fit
    row: RowFit  # RECORD's row for graph.py against its bytes
    row_names_original: bool  # RECORD's row names graph.py's original (an unfinished apply)
    row_names_patched: bool  # RECORD's row names the patched bytes of an original graph.py
    stale_unchecked: bool  # an unchecked-hash pyc of the target that does not describe graph.py
    stale_pycs: int  # pycs of the target that do not describe graph.py


_BY_KIND_AND_FIT: dict[tuple[Kind, Fit], State] = {
    ("eager", "none"): "pristine",
    ("eager", "before"): "record-only",
    ("eager", "other"): "reinstalled",
    ("eager", "after"): "untrusted-eager",
    ("eager", "untrusted"): "untrusted-eager",
    ("patched", "none"): "unrecorded",
    ("patched", "after"): "patched",
    ("patched", "before"): "untrusted-patched",
    ("patched", "other"): "untrusted-patched",
    ("patched", "untrusted"): "untrusted-patched",
    ("native", "none"): "ships-lazy",
    ("native", "after"): "patched",
    ("native", "before"): "untrusted-lazy",
    ("native", "other"): "upgraded",
    ("native", "untrusted"): "untrusted-lazy",
    ("unknown", "none"): "unknown",
    ("unknown", "after"): "edited",
    ("unknown", "before"): "edited",
    ("unknown", "other"): "edited",
    ("unknown", "untrusted"): "unknown",  # a record that proves nothing beside a file not known
    ("eager", "changed"): "edited",
    ("patched", "changed"): "edited",
    ("native", "changed"): "edited",
    ("unknown", "changed"): "edited",
}


def name_state(facts: Facts) -> State:
    state = _BY_KIND_AND_FIT[facts.kind, facts.fit]
    if state == "patched" and facts.row_names_original:
        return "apply-interrupted"
    if state == "record-only" and facts.row_names_patched:
        return "revert-interrupted"
    return state


_LAZY_STATES: tuple[State, ...] = (
    "patched",
    "apply-interrupted",
    "ships-lazy",
    "unrecorded",
    "upgraded",
    "untrusted-patched",
    "untrusted-lazy",
)
LAZY: frozenset[State] = frozenset(_LAZY_STATES)  # graph.py formats the text lazily


class Rule(NamedTuple):
    """verify's verdict on a state: its exit code and the next step."""

    code: ExitCode = ExitCode.OK
    next: Next | None = None


_PATCH: tuple[Action, ...] = ("patch",)
_REFUSE: tuple[Action, ...] = ("refuse",)

APPLY: dict[State, tuple[Action, ...]] = {
    "pristine": _PATCH,
    "patched": (),
    "apply-interrupted": (),
    "ships-lazy": (),
    "record-only": _PATCH,
    "revert-interrupted": _PATCH,
    "unrecorded": ("record",),
    "reinstalled": _PATCH,
    "upgraded": ("drop",),
    "untrusted-eager": _PATCH,
    "untrusted-patched": ("record",),
    "untrusted-lazy": ("drop",),
    "edited": _REFUSE,
    "unknown": _REFUSE,
}

REVERT: dict[State, tuple[Action, ...]] = {
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
    "edited": _REFUSE,
    "unknown": _REFUSE,
}

_EAGER = Rule(ExitCode.EAGER, "apply")
_LAZY = Rule()
_TIDY = Rule(ExitCode.OK, "apply")  # lazy, with something of this tool's to finish or remove
_REFUSED = Rule(ExitCode.REFUSED)
# verify's first duty: never say lazy about a torch that will run eagerly, never fail one that is lazy.
VERIFY: dict[State, Rule] = {
    "pristine": _EAGER,
    "patched": _LAZY,
    "apply-interrupted": _TIDY,
    "ships-lazy": _LAZY,
    "record-only": _EAGER,
    "revert-interrupted": _EAGER,
    "unrecorded": _TIDY,
    "reinstalled": _EAGER,
    "upgraded": _TIDY,
    "untrusted-eager": _EAGER,
    "untrusted-patched": _TIDY,
    "untrusted-lazy": _TIDY,
    "edited": Rule(ExitCode.REFUSED, "reinstall"),
    "unknown": _REFUSED,
}

TABLES = {"apply": APPLY, "revert": REVERT}

Problem = Literal["record-row", "stale-unchecked-pyc"]


def problems(state: State, facts: Facts) -> tuple[Problem, ...]:
    """What verify finds beyond the state, in every state: RECORD's row, and bytecode that would
    run instead of a lazy source."""
    found: list[Problem] = []
    if facts.row == "other" and state not in ("apply-interrupted", "revert-interrupted"):
        found.append("record-row")
    if facts.stale_unchecked and state in LAZY:
        found.append("stale-unchecked-pyc")
    return tuple(found)


def verdict(state: State, found: tuple[Problem, ...]) -> Rule:
    """verify's rule with what else it found: a stale unchecked pyc runs the eager code."""
    rule = VERIFY[state]
    if "stale-unchecked-pyc" in found:
        return _EAGER
    if rule.code == ExitCode.OK and found:
        return _TIDY
    return rule
