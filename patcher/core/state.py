"""The install's one named state, decided from facts read from the bytes; a column per command.

Pure: no file is read here. patcher.core.facts reads a snapshot; `name_state` names the state from what it read;
APPLY and REVERT say, for each state, what the command does to graph.py and the undo record; VERIFY,
its exit code and what to do next: the columns of one table, a row per state. Each decision is made
there and nowhere else; the state a run leaves is the plan's (patcher.core.plan). docs/states.md's
state table is these, checked by a test.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from patcher.core.exitcodes import ExitCode
from patcher.core.record import RowFit
from patcher.core.report import Next
from patcher.core.report import State as State  # defined beside the report that prints it
from patcher.core.spec import Kind

# The undo record against graph.py and the release table: none; after (graph.py is what it says
# apply made); before (graph.py is the original it names); other (a sound record of another file,
# graph.py being a release's exact bytes); changed (a sound record, graph.py known only by its site:
# edited since apply); untrusted (its claims do not hold against the bytes and the table); newer (a
# newer torch-lazylog wrote it, in a version this one does not read: never taken for damage).
Fit = Literal["none", "after", "before", "other", "changed", "untrusted", "newer"]


# What apply or revert does to graph.py and the undo record, in order. patch: the one edit, and its
# undo record. write-undo: write the undo record of a file patched before (its original determined).
# restore: graph.py back to its original, the undo record removed. drop: remove an undo record that
# does not describe graph.py. refuse: nothing written. Whatever the actions, RECORD's row and the pycs
# are made to describe graph.py as the plan leaves it (patcher.core.plan).
Action = Literal["patch", "write-undo", "restore", "drop", "refuse"]


# A sound record of another graph.py than a release's exact bytes ("changed") is always "edited".
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
    # A newer tool's record: graph.py is judged alone, and the record left to the tool that reads it.
    ("eager", "newer"): "newer-eager",
    ("patched", "newer"): "newer-patched",
    ("native", "newer"): "newer-lazy",
    ("unknown", "newer"): "unknown",
}


def name_state(kind: Kind, fit: Fit, row_names_original: bool, row_names_patched: bool) -> State:
    """graph.py's kind (patcher.core.facts) and the undo record's fit, and whether RECORD's row names
    graph.py's original (an unfinished apply) or an original graph.py's patched bytes (an unfinished
    revert)."""
    state: State = "edited" if fit == "changed" else _BY_KIND_AND_FIT[kind, fit]
    if state == "patched" and row_names_original:
        return "apply-interrupted"
    if state == "record-only" and row_names_patched:
        return "revert-interrupted"
    return state


class Rule(NamedTuple):
    """verify's rule for a state: its exit code and the next step."""

    code: ExitCode = ExitCode.OK
    next: Next | None = None


_PATCH: tuple[Action, ...] = ("patch",)
_REFUSE: tuple[Action, ...] = ("refuse",)
_EAGER = Rule(ExitCode.EAGER, "apply")
_LAZY = Rule()
_TIDY = Rule(ExitCode.OK, "apply")  # lazy, with something of this tool's to finish or remove

# What else a state says, beyond the commands' columns:
# interrupted: RECORD's row names other bytes than graph.py's by the state's own definition (a run
#   stopped between the two), so verify does not list it as a problem of its own;
# recorded: graph.py is patched and its undo record describes it, so a run that rewrites the record
#   only to follow RECORD's new row does not say it wrote it;
# usual: the state a command's change of graph.py usually starts from, so its sentence does not first
#   say what graph.py was;
# newer: the undo record is a newer torch-lazylog's, which this one neither reads, rewrites nor removes.
Trait = Literal["interrupted", "recorded", "usual", "newer"]


class Handling(NamedTuple):
    """What each command does in one state, and what else the state says: a row of the state table."""

    apply: tuple[Action, ...]
    revert: tuple[Action, ...]
    verify: Rule
    traits: frozenset[Trait] = frozenset()


_INTERRUPTED: frozenset[Trait] = frozenset({"interrupted"})
_NEWER: frozenset[Trait] = frozenset({"newer"})

# One row per state: what apply does, what revert does, verify's rule, and its traits. verify's first
# duty: never say lazy about a torch that will run eagerly, never fail one that is lazy.
_TABLE: dict[State, Handling] = {
    "pristine": Handling(_PATCH, (), _EAGER, frozenset({"usual"})),
    "patched": Handling((), ("restore",), _LAZY, frozenset({"recorded", "usual"})),
    "apply-interrupted": Handling((), ("restore",), _TIDY, frozenset({"interrupted", "recorded", "usual"})),
    "ships-lazy": Handling((), (), _LAZY),
    "record-only": Handling(_PATCH, ("drop",), _EAGER),
    "revert-interrupted": Handling(_PATCH, ("drop",), _EAGER, _INTERRUPTED),
    "unrecorded": Handling(("write-undo",), ("restore",), _TIDY, frozenset({"usual"})),
    "reinstalled": Handling(_PATCH, ("drop",), _EAGER),
    "upgraded": Handling(("drop",), ("drop",), _TIDY),
    "untrusted-eager": Handling(_PATCH, ("drop",), _EAGER),
    "untrusted-patched": Handling(("write-undo",), ("restore",), _TIDY),
    "untrusted-lazy": Handling(("drop",), ("drop",), _TIDY),
    "newer-eager": Handling(_REFUSE, _REFUSE, Rule(ExitCode.EAGER), _NEWER),
    "newer-patched": Handling(_REFUSE, _REFUSE, _LAZY, _NEWER),
    "newer-lazy": Handling(_REFUSE, _REFUSE, _LAZY, _NEWER),
    "edited": Handling(_REFUSE, _REFUSE, Rule(ExitCode.REFUSED, "reinstall")),
    "unknown": Handling(_REFUSE, _REFUSE, Rule(ExitCode.REFUSED)),
}
APPLY = {name: handling.apply for name, handling in _TABLE.items()}
REVERT = {name: handling.revert for name, handling in _TABLE.items()}
VERIFY = {name: handling.verify for name, handling in _TABLE.items()}
LAZY = frozenset(name for name, rule in VERIFY.items() if rule.code == ExitCode.OK)  # graph.py is lazy


def has(state: State, trait: Trait) -> bool:
    return trait in _TABLE[state].traits


TABLES = {"apply": APPLY, "revert": REVERT}


def left(undo_left: bool, lazy: bool) -> State:
    """The state a plan leaves, named by the table from its result as a read of it would name it: an
    undo record left describes graph.py, which this tool patched (the plan writes the record so);
    else graph.py alone, lazy as shipped or eager. RECORD's row is made to describe graph.py, so the
    row's facts that name an interrupted run (name_state's) do not arise."""
    kind: Kind = "patched" if undo_left else "native" if lazy else "eager"
    return _BY_KIND_AND_FIT[kind, "after" if undo_left else "none"]


def runtime_eager(state: State) -> State:
    """The state verify --runtime reports when Inductor's real path formats eagerly: eager bytes'
    state stands; a lazy state the runtime contradicts is not known."""
    return "unknown" if state in LAZY else state


# Why graph.py is "unknown" (beyond its state: the unknown file's facts), first that holds: a release
# series the fix cannot reach; a vendor's build no index has; else a release's graph.py changed.
Unknown = Literal["refused-release", "vendor-build", "changed-release"]
# The next step of each: a person's step (upgrade torch, fingerprint the build) or a command's.
UNKNOWN_NEXT: dict[Unknown, Literal["upgrade", "fingerprint", "reinstall"]] = {
    "refused-release": "upgrade",
    "vendor-build": "fingerprint",
    "changed-release": "reinstall",
}


def unknown_why(refused_release: bool, vendor: bool) -> Unknown:
    return "refused-release" if refused_release else "vendor-build" if vendor else "changed-release"


Defect = Literal["record-row", "stale-unchecked-pyc"]


def verify_rule(state: State, row: RowFit, stale_unchecked: bool) -> tuple[Rule, tuple[Defect, ...]]:
    """verify's rule, with what it finds beyond the state in every state: RECORD's row for graph.py
    not describing it, and a stale unchecked pyc of a lazy source, which runs the eager code."""
    found: tuple[Defect, ...] = ()
    if row == "other" and not has(state, "interrupted"):
        found = ("record-row",)
    rule = VERIFY[state]
    if stale_unchecked and state in LAZY:
        rule, found = _EAGER, (*found, "stale-unchecked-pyc")
    elif rule.code == ExitCode.OK and found:
        rule = _TIDY
    if rule.next == "apply" and APPLY[state] == _REFUSE:  # apply is no step where it refuses
        rule = rule._replace(next=None)
    return rule, found
