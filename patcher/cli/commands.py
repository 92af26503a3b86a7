"""What runs a command's work, given by click's commands (patcher.cli.app): the one place a result
is printed and errors are caught.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping
from shlex import quote
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple, NoReturn, TextIO

from patcher.core.errors import Install, Interrupted, LazylogError, Option, SingleFile, Variable
from patcher.core.exitcodes import ExitCode
from patcher.core.report import Advice, Next

if TYPE_CHECKING:
    from patcher.core.installed import Target
    from patcher.core.report import JsonValue, Report
    from patcher.core.spec import PatchSpec


def program() -> str:
    """The command line that runs this tool as the user ran it, for the commands its advice prints:
    the console script's name, or, from the single file (which installs no `torch-lazylog` command),
    the Python, its options and the file, as they were typed."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    import zipimport  # already loaded: the import system's own

    if spec is None or not isinstance(spec.loader, zipimport.zipimporter):
        return _console_script()
    archive = spec.loader.archive
    if _on_path(os.path.basename(archive), archive):  # the tool image's file, a command in the image
        return os.path.basename(archive)
    # The interpreter's own command line up to the file: the Python and its options as they were
    # typed; the Python and the file, when the file was run some other way (runpy from -c).
    typed = sys.orig_argv[: len(sys.orig_argv) - len(sys.argv) + 1]
    if not typed or os.path.realpath(typed[-1]) != os.path.realpath(archive):
        typed = [sys.executable or "python3", archive]
    return " ".join(quote(w) for w in typed)


def _console_script() -> str:
    """`torch-lazylog`, or this console script's own path when that name on PATH is not it (a venv's
    bin/ not on PATH, or another version first on it)."""
    script = sys.argv[0] if sys.argv else ""
    if os.path.basename(script) != "torch-lazylog" or not os.path.isfile(script):  # python -m patcher
        return "torch-lazylog"
    return "torch-lazylog" if _on_path("torch-lazylog", script) else quote(os.path.abspath(script))


def _on_path(name: str, file: str) -> bool:
    """Whether `name` typed at a shell runs `file`."""
    import shutil  # only for advice

    found = shutil.which(name)
    return found is not None and os.path.realpath(found) == os.path.realpath(file)


class Given(NamedTuple):
    """A command as the user gave it: its word, how to print its result (`extra`: its own JSON
    fields), and the target options (or their environment variables), which advice repeats.
    `from_env` maps the options whose value came from their variable to its name, so errors name it."""

    command: str
    as_json: bool = False
    verbose: bool = False
    python: str | None = None
    torch_dir: str | None = None
    from_env: Mapping[str, str] = MappingProxyType({})
    extra: dict[str, JsonValue] | None = None
    lines: bool = False  # JSON on one line: one of several results (verify --image)

    def next_line(self, step: Next | None, target: Target | None) -> str | None:
        """The next step as a command line to run as it is, or, for a reinstall no command can name
        or a person's step, what to do instead. `target`: the torch a reinstall is of, when located."""
        if step is None or isinstance(step, Advice):
            return step.text if step else None
        if step == "reinstall":
            from patcher.cli.advice import reinstall
            from patcher.install.reading import install_of

            install = Install() if target is None else install_of(target)
            python = self.python or install.owner or (sys.executable if self.torch_dir is None else None)
            import shutil  # only for advice

            return reinstall(quote(python) if python else None, install, bool(shutil.which("uv")))
        return f"{program()} {step}" + self.options()

    def _options(self) -> tuple[tuple[Option, str | None], ...]:
        return (("--python", self.python), ("--torch-dir", self.torch_dir))

    def options(self) -> str:
        """The target options as given, to repeat after a command."""
        return "".join(f" {flag} {quote(v)}" for flag, v in self._options() if v)

    def variables(self) -> tuple[Variable, ...]:
        """The target options whose value came from their environment variable, as errors name them."""
        return tuple(
            Variable(option, self.from_env[option], quote(value))
            for option, value in self._options()
            if option in self.from_env and value is not None
        )


def execute(given: Given, work: Callable[[], Report], located: list[Target] | None = None) -> NoReturn:
    """Run one command and print its one result: the single place where errors are caught and turned
    into an exit code. `located`: the torch the command located, if it got that far (its result, or
    its error, is then about it)."""
    try:
        report = work()
    except Interrupted as exc:
        failed(given, interrupted(given.command, exc.signum))
    except Exception as exc:  # a LazylogError; an OSError nothing expected, or a bug: never exit 1
        if given.verbose:
            import traceback

            traceback.print_exc()
        if isinstance(exc, LazylogError):  # about the torch located, else about the values given
            target = located[0] if located else None
            failed(given, exc, target, given.variables() if target is None else ())
        what = (
            f"{exc.strerror} ({exc.filename})" if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        )
        message = (
            f"Unexpected error: {what}. Rerun with --verbose for the traceback and report it if it is a bug"
        )
        failed(given, LazylogError(ExitCode.ENVIRONMENT, message))
    finish(given, report, located[0] if located else None)


def each(given: Given, work: Callable[[], Report]) -> int:
    """One of several results (verify --image): run and printed as `execute` does, its exit code
    returned for the command's worst."""
    try:
        execute(given, work)
    except SystemExit as exc:
        return int(exc.code or 0)


def failed(
    given: Given, error: LazylogError, target: Target | None = None, variables: tuple[Variable, ...] = ()
) -> NoReturn:
    """Print an error as every result is printed: with what was read before it (the error's `found`,
    built as a success's report is), else about the `target` located, if any; `variables`: the
    options whose value came from their environment variable, which the sentence names."""
    from patcher.core.report import Report

    text = error.text(_single_file(), given.verbose, variables)
    if error.found is not None:
        base = error.found
    elif target is not None:
        from patcher.install.reading import located

        base = located(given.command, target, error.state, text)
    else:
        base = Report(given.command, error.state, False, text)
    report = base._replace(
        command=given.command,
        message=text,
        code=error.code,
        next=error.next,
        nearest_diff=error.nearest_diff,
        support=error.support,
    )
    finish(given, report, target)


def _single_file() -> SingleFile | None:
    """The single file, as its messages name it (this Python, its libcst directory); None installed."""
    from patcher.cli import singlefile

    if not singlefile.in_zip():
        return None
    import platform

    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    return SingleFile(minor, platform.machine(), singlefile.libs_dir(sys.argv[0]), singlefile.LIBS_VARIABLE)


def _render(given: Given, report: Report, next: str | None) -> tuple[str, str]:
    """What goes to stdout and to stderr; `extra` adds a command's own fields after the shared ones;
    `next`: the next step as a line (for "reinstall", the advice to reinstall torch, not a command of
    this tool)."""
    if given.as_json:
        indent = None if given.lines else 2
        return json.dumps(report.to_json(next) | (given.extra or {}), indent=indent) + "\n", ""
    text = report.message
    if next:
        only = "Only a reinstall of torch can fix this" if report.next == "reinstall" else "Next"
        text += f"\n{only}: {next}"
    text += "".join(f"\n{line}" for line in report.then)
    if given.command == "diagnose" and report.problems:  # the processes read, and PIDs it could not read
        return text + "\n", "".join(f"torch-lazylog: error: {p}\n" for p in report.problems)
    if report.code in (ExitCode.USAGE, ExitCode.REFUSED, ExitCode.ENVIRONMENT):
        nearest = report.nearest_diff
        return "", f"torch-lazylog: error: {text}\n" + (nearest + "\n" if nearest else "")
    if report.table is not None:  # fingerprint's table alone, to redirect into a file
        return report.table, ""
    return (report.diff or "") + text + "\n", ""


def finish(given: Given, report: Report, target: Target | None) -> NoReturn:
    """Print a result or an error the same way: one JSON shape, or the sentence and the next step
    (rendered with the options `given`, for the `target` located). A closed or full stdout is exit 5
    (OUTPUT), never the command's own code."""
    text = report.message.rstrip(".")
    report = report._replace(message=text if text.endswith(("?", "!")) else text + ".")  # one stop
    out, err = _render(given, report, given.next_line(report.next, target))
    try:
        if err:
            _write(sys.stderr, err)
        if out:
            _write(sys.stdout, out)
    except Interrupted as exc:  # while printing (a blocked pipe): the code still says so
        sys.exit(int(signal_code(exc.signum)))
    except OSError as exc:  # every command, every result: one sentence on stderr (if it is open)
        _silence()
        code = int(report.code)  # the result's own code: the sentence names what exit 5 replaces
        instead = f" with exit {code}, which exit 5 replaces" if code else ""
        lost = f"Could not print the result ({exc.strerror or exc}); the command itself finished{instead}"
        with contextlib.suppress(OSError):
            _write(sys.stderr, f"torch-lazylog: error: {lost}.\n")
        sys.exit(int(ExitCode.OUTPUT))
    sys.exit(int(report.code))


def _write(stream: TextIO | None, text: str) -> None:
    """A stream Python started without (the shell closed it: `>&-`) is a stream that failed."""
    if stream is None:
        raise OSError(errno.EBADF, "the stream is closed")
    stream.write(text)
    stream.flush()


def _silence() -> None:
    """After a write to stdout failed: point it at /dev/null so the exit itself cannot fail too."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def emit(given: Given, work: Callable[[Target, PatchSpec], Report]) -> NoReturn:
    """Locate the torch the options name, run the command on it, print its one result."""
    located: list[Target] = []

    def on_target() -> Report:
        from patcher.install import definitions, locate

        spec = definitions.load()
        located.append(locate.locate(given.python or None, given.torch_dir or None, spec))
        return work(located[0], spec)

    execute(given, on_target, located)


def signal_code(signum: int) -> ExitCode:
    """The one mapping from the signal that stopped a command to its exit code."""
    return ExitCode.TERMINATED if signum == signal.SIGTERM else ExitCode.INTERRUPTED


def interrupted(command: str, signum: int) -> LazylogError:
    """What a command stopped by SIGINT or SIGTERM reports."""
    name = signal.Signals(signum).name
    if command == "diagnose":
        text = f"Interrupted by {name}: diagnose only reads, so nothing was written; run it again"
    else:
        text = (
            f"Interrupted by {name}: every file is either as it was or as the command leaves it. "
            f"Run `{program()} verify` to see which, and the same command again to finish"
        )
    return LazylogError(signal_code(signum), text)
