"""The writes a plan is made of, in commit order; install.fsio carries them out, and nothing else writes."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from patcher.core.installed import Pyc

ABSENT = "absent"  # a Write's or Remove's `was`: the destination did not exist when it was read
ANY = ""  # ... or: not checked (bytecode, which Python itself may rewrite at any time)


class Write(NamedTuple):
    path: Path
    data: bytes
    mode: int
    uid: int
    gid: int
    mtime_ns: int | None = None
    was: str = ANY  # the destination's sha256 when it was read, or ABSENT


class Remove(NamedTuple):
    path: Path
    was: str = ANY


Step = Write | Remove


class Rebuild(NamedTuple):
    """A pyc to write anew from graph.py as the plan leaves it (the plan's `source` and `mtime_ns`):
    compiled by the target interpreter before staging."""

    pyc: Pyc


# What a plan holds: a Rebuild is compiled by the target interpreter, then written as a Write.
PlanStep = Step | Rebuild


class Done(NamedTuple):
    """What a plan writes, counted, for the sentence (patcher.core.messages)."""

    graph_written: bool = False
    line: int | None = None
    undo_written: bool = False
    undo_removed: bool = False
    record_written: bool = False
    pycs: int = 0
    pycs_removed: int = 0
    no_record: bool = False  # torch has a dist-info but no RECORD (PEP 627 makes it optional)
