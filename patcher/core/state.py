"""The install's one named state, decided from facts read from the bytes; a table per command.

Pure: no file is read here. patcher.core.facts turns a snapshot into Facts; `name_state` names the state;
APPLY, VERIFY and REVERT say, for each state, what the command does, its exit code and what to do
next. The README's state table is this module's, checked by a test.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from patcher.core.errors import ExitCode, Next
from patcher.core.record import RowFit

# graph.py against the known releases, RECORD and the undo record's traces:
# eager (a known eager release or site), ours (lazy as this tool makes it: the exact patched bytes
# of a release, or a RECORD that names the original or lists the undo record), lazy (a lazy site
# with no trace of this tool: a release or vendor build that ships the fix), unknown.
Base = Literal["eager", "ours", "lazy", "unknown"]
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

# What a command does, in order. patch: the one edit, the undo record, the pycs, RECORD.
# record: write the undo record of a file patched before (its original determined).
# restore: graph.py back to its original, its pycs, RECORD, the undo record removed.
# drop: remove an undo record that does not describe graph.py. settle: RECORD's row and the pycs
# made to describe graph.py as it is. refuse: nothing written.
Action = Literal["patch", "record", "restore", "drop", "settle", "refuse"]


class Facts(NamedTuple):
    base: Base
    fit: Fit
    row: RowFit  # RECORD's row for graph.py against its bytes
    row_names_original: bool  # RECORD's row names graph.py's original (an unfinished apply)
    row_names_patched: bool  # RECORD's row names the patched bytes of an original graph.py
    stale_unchecked: bool  # an unchecked-hash pyc of the target that does not describe graph.py
    stale_pycs: int  # pycs of the target that do not describe graph.py


_BY_BASE_AND_FIT: dict[tuple[Base, Fit], State] = {
    ("eager", "none"): "pristine",
    ("eager", "before"): "record-only",
    ("eager", "other"): "reinstalled",
    ("eager", "after"): "untrusted-eager",
    ("eager", "untrusted"): "untrusted-eager",
    ("ours", "none"): "unrecorded",
    ("ours", "after"): "patched",
    ("ours", "before"): "untrusted-patched",
    ("ours", "other"): "untrusted-patched",
    ("ours", "untrusted"): "untrusted-patched",
    ("lazy", "none"): "ships-lazy",
    ("lazy", "after"): "patched",
    ("lazy", "before"): "untrusted-lazy",
    ("lazy", "other"): "upgraded",
    ("lazy", "untrusted"): "untrusted-lazy",
    ("unknown", "none"): "unknown",
    ("unknown", "after"): "edited",
    ("unknown", "before"): "edited",
    ("unknown", "other"): "edited",
    ("unknown", "untrusted"): "unknown",  # a record that proves nothing beside a file not known
    ("eager", "changed"): "edited",
    ("ours", "changed"): "edited",
    ("lazy", "changed"): "edited",
    ("unknown", "changed"): "edited",
}


def name_state(facts: Facts) -> State:
    state = _BY_BASE_AND_FIT[facts.base, facts.fit]
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
    does: tuple[Action, ...]
    code: ExitCode = ExitCode.OK
    next: Next | None = None
    leaves: State | None = None  # the state the command leaves (None: as found)


_REFUSE = Rule(("refuse",), ExitCode.REFUSED)
_REFUSE_REINSTALL = Rule(("refuse",), ExitCode.REFUSED, "reinstall")

APPLY: dict[State, Rule] = {
    "pristine": Rule(("patch",), leaves="patched"),
    "patched": Rule(("settle",), leaves="patched"),
    "apply-interrupted": Rule(("settle",), leaves="patched"),
    "ships-lazy": Rule(("settle",)),
    "record-only": Rule(("patch",), leaves="patched"),
    "revert-interrupted": Rule(("patch",), leaves="patched"),
    "unrecorded": Rule(("record", "settle"), leaves="patched"),
    "reinstalled": Rule(("patch",), leaves="patched"),
    "upgraded": Rule(("drop", "settle"), leaves="ships-lazy"),
    "untrusted-eager": Rule(("patch",), leaves="patched"),
    "untrusted-patched": Rule(("record", "settle"), leaves="patched"),
    "untrusted-lazy": Rule(("drop", "settle"), leaves="ships-lazy"),
    "edited": _REFUSE_REINSTALL,
    "unknown": _REFUSE,
}

REVERT: dict[State, Rule] = {
    "pristine": Rule(("settle",)),
    "patched": Rule(("restore",), leaves="pristine"),
    "apply-interrupted": Rule(("restore",), leaves="pristine"),
    "ships-lazy": Rule(("settle",)),
    "record-only": Rule(("drop", "settle"), leaves="pristine"),
    "revert-interrupted": Rule(("drop", "settle"), leaves="pristine"),
    "unrecorded": Rule(("restore",), leaves="pristine"),
    "reinstalled": Rule(("drop", "settle"), leaves="pristine"),
    "upgraded": Rule(("drop", "settle"), leaves="ships-lazy"),
    "untrusted-eager": Rule(("drop", "settle"), leaves="pristine"),
    "untrusted-patched": Rule(("restore",), leaves="pristine"),
    "untrusted-lazy": Rule(("drop", "settle"), leaves="ships-lazy"),
    "edited": _REFUSE_REINSTALL,
    "unknown": _REFUSE,
}

_EAGER = Rule((), ExitCode.EAGER, "apply")
_LAZY = Rule(())
_TIDY = Rule((), ExitCode.OK, "apply")  # lazy, with something of this tool's to finish or remove
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
    "edited": _REFUSE_REINSTALL,
    "unknown": _REFUSE,
}

TABLES = {"apply": APPLY, "verify": VERIFY, "revert": REVERT}

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
