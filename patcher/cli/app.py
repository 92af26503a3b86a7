"""The command line: unpack options, call the engine, print the report, exit with its code."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import click

from patcher import __version__
from patcher.cli import commands
from patcher.cli.argv import command_word
from patcher.core.errors import Interrupted, LazylogError
from patcher.core.exitcodes import EXIT_CODE_HELP, ExitCode

EPILOG = "\b\n" + EXIT_CODE_HELP  # \b: click prints the block as written, unwrapped

if TYPE_CHECKING:
    from patcher.core.installed import Target
    from patcher.core.report import JsonValue, Report
    from patcher.core.spec import PatchSpec

F = TypeVar("F", bound=Callable[..., None])


def _empty_is_not_given(context: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An empty value is no value, wherever it is given: an empty variable is unset (click's rule, and
    pip's), and an empty option is as if it were not there, so its variable, if set, applies."""
    if value != "":
        return value
    variable = os.environ.get(str(param.envvar)) or None
    if variable is not None and param.name:
        context.set_parameter_source(param.name, click.core.ParameterSource.ENVIRONMENT)
    return variable


def target_options(func: F) -> F:
    options = [
        click.option(
            "--python",
            "python",
            metavar="PATH",
            envvar="TORCH_LAZYLOG_PYTHON",
            show_envvar=True,
            callback=_empty_is_not_given,
            help="Interpreter whose `import torch` is meant (default: the one running torch-lazylog).",
        ),
        click.option(
            "--torch-dir",
            metavar="DIR",
            envvar="TORCH_LAZYLOG_TORCH_DIR",
            show_envvar=True,
            callback=_empty_is_not_given,
            help="The torch package directory itself (.../site-packages/torch), instead of finding it.",
        ),
        click.option(
            "--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead of text."
        ),
        click.option(
            "--verbose",
            "-v",
            is_flag=True,
            help="Show a traceback for errors, and every known release with a refusal.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _given(
    command: str, as_json: bool, verbose: bool, python: str | None, torch_dir: str | None
) -> commands.Given:
    """The command as given, with the target options whose value click took from their environment
    variable, each with the variable's name (declared once, on the option)."""
    context = click.get_current_context()
    from_env = {
        param.opts[0]: str(param.envvar)
        for param in context.command.params
        if param.name and context.get_parameter_source(param.name) == click.core.ParameterSource.ENVIRONMENT
    }
    return commands.Given(command, as_json, verbose, python, torch_dir, from_env)


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="torch-lazylog")
def cli() -> None:
    """Make torch Inductor's implicit-fallback log line lazy in an installed torch (< 2.13).

    The fix torch 2.13 ships, applied once to the installed source, checked, and reversible.
    """


@cli.command(epilog=EPILOG)
@target_options
@click.option("--dry-run", is_flag=True, help="Print the unified diff that apply would make; write nothing.")
def apply(python: str | None, torch_dir: str | None, as_json: bool, verbose: bool, dry_run: bool) -> None:
    """Patch graph.py of the installed torch.

    Makes the one-argument change torch 2.13 ships; nothing to do on 2.13+, nothing more on a second run.
    """

    def work(target: Target, spec: PatchSpec) -> Report:
        from patcher.install import engine

        return engine.apply(target, spec, dry_run=dry_run)

    commands.emit(_given("apply", as_json, verbose, python, torch_dir), work)


@cli.command(epilog=EPILOG)
@target_options
@click.option(
    "--runtime",
    is_flag=True,
    help="Also import torch in the target interpreter and prove lazy formatting on Inductor's real path.",
)
@click.option(
    "--image",
    "images",
    metavar="REF",
    multiple=True,
    help="Read an image instead, nothing run or unpacked: docker-archive:PATH, oci-archive:PATH, "
    "oci:DIR[:TAG] or docker://HOST/NAME[:TAG|@DIGEST] (the image extra); repeat for several "
    "(one result each, the worst exit code). --python is then a path in the image.",
)
@click.option(
    "--platform", metavar="OS/ARCH", help="With --image: the platform of a multi-arch index to read."
)
def verify(
    python: str | None,
    torch_dir: str | None,
    as_json: bool,
    verbose: bool,
    runtime: bool,
    images: tuple[str, ...],
    platform: str | None,
) -> None:
    """Check that torch formats the log lazily.

    Exit 0 when the installed torch formats the implicit-fallback log lazily (what is left to tidy is
    listed, with the command that does it); exit 1 when it formats eagerly.
    """
    if images or platform:
        _verify_images(images, platform, python, torch_dir, as_json, verbose, runtime)
    given = _given("verify", as_json, verbose, python, torch_dir)

    def work(target: Target, spec: PatchSpec) -> Report:
        from patcher.install import reading

        report = reading.verify(target, spec)
        if runtime:
            from patcher.install import runtime as runtime_check

            report = runtime_check.add_checks(
                target, report, f"{commands.program()} verify" + given.options()
            )
        return report

    commands.emit(given, work)


def _verify_images(
    images: tuple[str, ...],
    platform: str | None,
    python: str | None,
    torch_dir: str | None,
    as_json: bool,
    verbose: bool,
    runtime: bool,
) -> NoReturn:
    """verify --image: one result for each image and platform (a JSON line each with --json), and
    the worst exit code."""
    if not images or torch_dir or runtime:
        why = (
            "--platform needs --image"
            if not images
            else "--image reads an image: no --torch-dir or --runtime"
        )
        raise click.UsageError(why)
    from patcher.image import run

    codes: list[int] = []
    for text in images:
        found: list[str | None] = []
        extra: dict[str, JsonValue] = {"image": text, "platform": None}
        given = commands.Given("verify", as_json, verbose, python, extra=extra, lines=True)
        try:
            found = run.platforms(text, platform)
        except Exception as exc:  # printed as execute prints any error: one sentence, its code
            codes.append(commands.each(given, functools.partial(_raise, exc)))
        for each in found:
            installs: list[JsonValue] = []
            extra = {"image": text, "platform": each, "installs": installs}
            given = commands.Given("verify", as_json, verbose, python, extra=extra, lines=True)
            work = functools.partial(run.verify, text, each or platform, python, installs)
            codes.append(commands.each(given, work))
    sys.exit(max(codes))


def _raise(error: Exception) -> Report:
    raise error


@cli.command(epilog=EPILOG)
@target_options
def revert(python: str | None, torch_dir: str | None, as_json: bool, verbose: bool) -> None:
    """Restore the original graph.py, pycs and RECORD.

    Byte for byte, with their mode and mtime, from the undo record apply wrote.
    """

    def work(target: Target, spec: PatchSpec) -> Report:
        from patcher.install import engine

        return engine.revert(target, spec)

    commands.emit(_given("revert", as_json, verbose, python, torch_dir), work)


@cli.command(epilog=EPILOG)
@click.argument("pids", nargs=-1, metavar="[PID]...")  # checked by diagnose: one sentence, exit 2
@click.option(
    "--no-children", is_flag=True, help="Read only the PIDs given, not the processes they started (ranks)."
)
@click.option(
    "--samples", type=click.IntRange(1, 100), default=3, show_default=True, help="Stack dumps per process."
)
@click.option(
    "--interval",
    type=click.FloatRange(0, 10),
    default=0.1,
    show_default=True,
    callback=lambda ctx, param, value: _finite(value),
    help="Seconds between dumps.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead of text.")
@click.option("--verbose", "-v", is_flag=True, help="Show a traceback for errors.")
def diagnose(
    pids: tuple[str, ...], no_children: bool, samples: int, interval: float, as_json: bool, verbose: bool
) -> None:
    """Name the hang in a running server, reading only.

    Samples each process's stacks (py-spy: the diagnose extra, pip install '.[diagnose]' from a checkout) and reads the torch it
    loaded as verify does. Exit 1 when a process is in the eager implicit-fallback formatting or runs a
    torch that formats it eagerly. Without PID: every process this user may read that has torch loaded.
    """
    from patcher.diagnose import run
    from patcher.install import definitions

    entries: list[JsonValue] = []  # its JSON's `processes`, filled in as far as the run got

    def work() -> Report:
        checked = tuple(run.pid_of(word) for word in pids)  # each a process ID, else exit 2
        options = run.Options(checked, not no_children, samples, interval, commands.program())
        report, found = run.diagnose(options, definitions.load())
        entries.extend(found)
        return report

    commands.execute(commands.Given("diagnose", as_json, verbose, extra={"processes": entries}), work)


@cli.command(epilog=EPILOG)
@click.argument("pid", type=click.IntRange(min=1))
@click.option(
    "--deadline",
    type=click.FloatRange(0.5, 60),
    default=8.0,
    show_default=True,
    callback=lambda ctx, param, value: _finite(value),
    help="Seconds the read may take at most; past them it answers from what it read by then.",
)
def probe(pid: int, deadline: float) -> None:
    """For a startup, liveness or health probe: will this start end on its own?

    Exit 0 while the server is ready or making progress (compiling, building, loading, waiting on
    something that moves); non-zero only for a state that does not end on its own (a stale lock,
    a rank that never came, compile workers gone, the eager formatting). The first line,
    `ok|warning|stuck: PID N: ID summary; step`, is what a kubelet keeps in the pod's event.
    Reads the PID and the processes below it; stacks (py-spy, the diagnose extra) only where they decide.
    """
    from patcher.diagnose import probe as probing
    from patcher.install import definitions

    try:
        answer = probing.probe(pid, definitions.load(), commands.program(), deadline)
    except LazylogError as error:
        commands.failed(commands.Given("probe"), error)
    click.echo("\n".join(answer.lines()))
    sys.exit(int(answer.code))


@cli.command()
@click.argument(
    "wheels", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the releases table here (patches/lazy_implicit_fallback.releases.json in a checkout).",
)
@click.option(
    "--check", is_flag=True, help="Exit 1 when the table differs from the shipped one; write nothing."
)
@click.option("--markdown", is_flag=True, help="Print the supported-release table of docs/releases.md.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the result) instead of text.")
def fingerprint(
    wheels: tuple[Path, ...], output: Path | None, check: bool, markdown: bool, as_json: bool
) -> None:
    """Maintainers: regenerate the release table.

    Fingerprints graph.py of real torch wheels into the patch definition's releases table.
    """

    def work() -> Report:
        from patcher.install import fingerprint as fp  # libcst: its absence is one sentence, exit 4

        return fp.command(list(wheels), output, check, markdown)

    commands.execute(commands.Given("fingerprint", as_json), work)


def _finite(value: float) -> float:
    if value != value:  # NaN passes every range check
        raise click.BadParameter("nan is not a number of seconds.")
    return value


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def main() -> None:
    """The entry point: usage errors too are one JSON object when --json was asked for; SIGINT and
    SIGTERM end in their own exit codes (130, 143), never 0 or 1."""
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, _interrupt)
    as_json = "--json" in sys.argv[1:]
    word = command_word(sys.argv[1:], cli.commands)
    try:
        code = cli.main(prog_name=commands.program(), standalone_mode=False)
    except click.ClickException as exc:
        if not as_json:
            exc.show()
            sys.exit(exc.exit_code)
        error = LazylogError(ExitCode(exc.exit_code), exc.format_message())
        commands.failed(
            commands.Given(word, True, extra={"processes": []} if word == "diagnose" else None), error
        )
    except (click.Abort, Interrupted) as exc:  # outside a command's own handling
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        commands.failed(commands.Given(word, as_json), commands.interrupted(word, signum))
    sys.exit(code if isinstance(code, int) else 0)
