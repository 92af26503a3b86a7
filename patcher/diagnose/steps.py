"""A finding's steps as data: each command with where it runs, in the order they are taken. The text
renders them as `Next:` lines, `--json` as a list; nothing here runs anything."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from patcher.core.report import JsonValue


class Where(Enum):
    """Where a step runs: where diagnose ran; there, as root; on the host or through the orchestrator
    that runs the container (`docker restart ID`, `kubectl delete pod NAME`); as root on the node."""

    HERE = "here"
    HERE_AS_ROOT = "here as root"
    HOST = "the host or orchestrator"
    NODE_ROOT = "as root on the node"


@dataclass(frozen=True)
class Step:
    run: str  # the command line, as it is to be run; or, where no command can be named, what to do
    where: Where = Where.HERE

    def line(self, first: bool) -> str:
        """`Next: CMD` for the first step run here (today's line); `Next (WHERE): CMD` otherwise."""
        label = "Next" if first and self.where is Where.HERE else f"Next ({self.where.value})"
        return f"{label}: {self.run}"

    def json(self) -> JsonValue:
        return {"run": self.run, "where": self.where.value}
