"""What the rewrite of graph.py can give: plain data, importable without libcst."""

from __future__ import annotations

from typing import Literal, NamedTuple

from patcher.core.edits import Edit


class Site(NamedTuple):
    lazy: bool  # the argument is LazyString(...): patched or as released, the release table says which
    fingerprint: str
    code: str  # the branch's test and body, for messages and diffs


class Rewritten(NamedTuple):
    source: bytes
    edit: Edit
    before: Site


class Unchanged(NamedTuple):
    """The site is already in the requested form."""

    site: Site


# Why a graph.py is refused: its call site is there but LazyString is not imported (what a torch
# older than the fix's import looks like: 2.0.x and 2.1.x), or anything else about the site.
Cause = Literal["import", "site"]


class Refused(NamedTuple):
    reason: str
    branch: str | None = None  # the enclosing branch's code, when there is one: for a diff
    lazy: bool = False
    cause: Cause = "site"


Outcome = Rewritten | Unchanged | Refused
