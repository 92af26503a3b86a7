"""The one domain error, its typed parts and the one place that renders them."""

from __future__ import annotations

import dataclasses
from typing import Literal, NamedTuple

from patcher.core.exitcodes import ExitCode
from patcher.core.report import Next, Report, State, Support


@dataclasses.dataclass(eq=False)  # an exception: compared and hashed as itself
class LazylogError(Exception):
    """The one domain error: a message kept in parts until `text` renders it, the one place that does.

    `message` says what was expected and what was found; `hint`, what to do about an option, as data
    (`Pass`, `LeaveOut`), so that it names the option's environment variable when the value came from
    there. `next` is the one next step (see `Next`). The facts are typed and given when it is made:
    the state found, the dependency that is not installed (`missing`), and for a refusal the branch's
    diff against the nearest release (`nearest_diff`) and the releases this tool knows (`support`), said in full only
    with --verbose and in JSON. `found`: what was read before it was raised (the state, the hashes, the
    release and the match: patcher.install.reading), which its report keeps; without it, which torch
    it is about is the command line's to add: it located it.
    """

    code: ExitCode
    message: str
    state: State = "unknown"
    next: Next | None = None
    hint: Hint | None = None
    missing: Missing | None = None
    nearest_diff: str | None = None
    support: Support | None = None
    found: Report | None = None

    def __str__(self) -> str:
        return self.text()

    def text(
        self,
        single_file: SingleFile | None = None,
        verbose: bool = False,
        variables: tuple[Variable, ...] = (),
    ) -> str:
        """The sentence for the installed command, or, with `single_file`, for the single file (whose
        missing libcst is a directory to mount); JSON's `message` is the same sentence. `verbose`
        adds, on a line of its own, every release this tool knows; `variables` are the options whose
        value came from their environment variable, which the sentence names."""
        if single_file is not None and self.missing is not None and self.missing.module == "libcst":
            minor, machine = single_file.minor, single_file.machine
            return (
                f"Expected libcst to {self.missing.what}, but the single file found none for this Python ({minor} on "
                f"{machine}) in {single_file.libs}. Nothing was written; run the file from the tool image, which carries it "
                f"beside the file (docs/images.md), or make that directory with `pip install "
                f"--target torch-lazylog-libs --only-binary=:all: --python-version {minor} --platform "
                f"manylinux2014_{machine} libcst` and mount it there (or name it in {single_file.variable})"
            )
        if verbose and self.support is not None:
            return f"{self.text(single_file, False, variables).rstrip('.')}.\n{self.support.text()}"
        by_option = {v.option: v for v in variables}
        text = self.message
        if self.hint is not None:
            advice = "".join(_said(part, by_option) for part in self.hint.parts)
            text += f". {advice[:1].upper()}{advice[1:]}." if self.hint.sentence else f"; {advice}."
        for v in variables:
            text = (
                text.rstrip(".")
                + f" ({v.name}={v.value} in the environment; {v.option} on a command line wins over it)"
            )
        return text


# The options that choose the torch to work on; a user may set each by its environment variable.
Option = Literal["--python", "--torch-dir"]


class Pass(NamedTuple):
    """Advice to give `option` a value: "pass --python with WHAT", or "set VARIABLE to WHAT"."""

    option: Option
    what: str


class LeaveOut(NamedTuple):
    """Advice to stop giving `option`: "leave --torch-dir out", or "unset VARIABLE"."""

    option: Option


class Hint(NamedTuple):
    """What to do next: words and advice about options, a sentence of its own or after a semicolon."""

    parts: tuple[str | Pass | LeaveOut, ...]
    sentence: bool = True


class Variable(NamedTuple):
    """An option whose value came from its environment variable: the variable and its value, quoted."""

    option: Option
    name: str
    value: str


def _said(part: str | Pass | LeaveOut, variables: dict[Option, Variable]) -> str:
    if isinstance(part, str):
        return part
    variable = variables.get(part.option)
    if isinstance(part, Pass):
        return f"set {variable.name} to {part.what}" if variable else f"pass {part.option} with {part.what}"
    return f"unset {variable.name}" if variable else f"leave {part.option} out"


class Install(NamedTuple):
    """What the advice to reinstall torch needs to know about its install."""

    dist_version: str | None = None  # the distribution's version (an index's, not version.py's label)
    vendor: bool = False  # a local version (`+rocm...`) or none: no index has it
    installer: str | None = None  # INSTALLER's first line
    owner: str | None = None  # the interpreter that owns it
    managed: bool = False  # an externally managed environment (PEP 668)
    pip: bool | None = None  # whether that interpreter has pip; None when not known


class Missing(NamedTuple):
    """A dependency that is not installed for this Python, and what it was needed for."""

    module: str
    what: str


class SingleFile(NamedTuple):
    """The single file as its messages need it: this Python, and the libcst directory it looked in."""

    minor: str
    machine: str
    libs: str
    variable: str


def environment(message: str, hint: Hint | None = None) -> LazylogError:
    return LazylogError(ExitCode.ENVIRONMENT, message, hint=hint)


def damaged(found: str) -> LazylogError:
    """A broken torch install (its RECORD): only a reinstall of torch fixes it."""
    return LazylogError(
        ExitCode.ENVIRONMENT,
        f"Expected torch's RECORD to list each installed file once, as CSV, but {found}. "
        "The install is damaged: only a reinstall of torch repairs it. Nothing was written",
        next="reinstall",
    )


@dataclasses.dataclass(eq=False)
class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: raised by the command line's handler, caught once at the edge."""

    signum: int


def missing(module: str, what: str) -> LazylogError:
    """A dependency that is not there: the error names it, so the command line can say what to mount."""
    return LazylogError(
        ExitCode.ENVIRONMENT,
        f"Expected {module} to {what}, but it is not installed for this Python. Nothing was written; "
        "install the torch-lazylog wheel, which brings click and libcst, and run torch-lazylog from it",
        missing=Missing(module, what),
    )
