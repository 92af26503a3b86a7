"""The one domain error and the exit codes, in one place."""

from __future__ import annotations

import enum
from typing import Literal


class ExitCode(enum.IntEnum):
    OK = 0  # apply: patched now, already patched, natively lazy; verify: lazy; revert: done or nothing to do
    EAGER = 1  # verify: the installed torch still formats the text eagerly (or is inconsistent)
    USAGE = 2  # bad command line (click's own code)
    REFUSED = 3  # a source this tool does not know, or a file changed since apply; nothing written
    ENVIRONMENT = 4  # torch not found, not writable, broken install; nothing written
    OUTPUT = 5  # the result could not be printed (stdout closed or full); the work itself is done
    INTERRUPTED = 130  # SIGINT (Ctrl-C): files are each pristine or patched; verify tells which
    TERMINATED = 143  # SIGTERM: the same


EXIT_CODE_HELP = """Exit codes:
  0  success (apply: patched, already patched or natively lazy;
     verify: torch formats the text lazily; revert: reverted or nothing to do)
  1  verify: torch formats the text eagerly (graph.py, or a stale unchecked-hash pyc);
     diagnose: a process is in the eager formatting, or runs a torch that formats eagerly
  2  usage error (diagnose: no such process, or not a Python process)
  3  refused: a graph.py this tool does not know, or one changed since apply
  4  environment error: torch not found, not writable, broken install;
     diagnose: a process it may not read (ptrace rights), py-spy missing, no torch loaded
  5  the result could not be printed (stdout closed or full)
  130, 143  interrupted by SIGINT or SIGTERM (files each whole)"""


class LazylogError(Exception):
    """A finished sentence for the user: what was expected, what was found, what to do."""

    def __init__(
        self, code: ExitCode, message: str, state: str = "unknown", next: Next | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.state = state
        self.next = next
        self.diff: str | None = None  # for a refusal: the branch against the nearest known release
        self.details: dict[str, str | None] = {}  # filled in by the engine: which torch, where


# The one next step a result that is not success names; the command line renders it with the
# target options the user gave. "reinstall" is the state only a reinstall of torch can fix.
Next = Literal["apply", "revert", "reinstall"]


def refused(message: str, next: Next | None = None) -> LazylogError:
    return LazylogError(ExitCode.REFUSED, message, next=next)


def environment(message: str) -> LazylogError:
    return LazylogError(ExitCode.ENVIRONMENT, message)


def damaged(found: str) -> LazylogError:
    """A broken torch install (its RECORD): only a reinstall of torch fixes it."""
    return LazylogError(
        ExitCode.ENVIRONMENT,
        f"Expected torch's RECORD to list each installed file once, as CSV, but {found}. "
        "The install is damaged: only a reinstall of torch repairs it. Nothing was written",
        next="reinstall",
    )


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: raised by the command line's handler, caught once at the edge."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def missing_dependency(module: str, what: str) -> str:
    """What needs a dependency that is not installed for this Python."""
    return (
        f"Expected {module} to {what}, but it is not installed for this Python. Nothing was written; "
        "install the torch-lazylog wheel, which brings click and libcst, and run torch-lazylog from it"
    )


def missing(module: str, what: str) -> LazylogError:
    """A dependency that is not there: the error names it, so the command line can say what to mount."""
    error = environment(missing_dependency(module, what))
    error.details["missing"] = module
    error.details["missing_for"] = what
    return error
