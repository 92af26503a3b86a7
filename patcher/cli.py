"""The command line: unpack options, call the engine, print the report, exit with its code."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn, TypeVar

import click

from patcher import __version__
from patcher.errors import EXIT_CODE_HELP, ExitCode, Interrupted, LazylogError

if TYPE_CHECKING:
    from patcher.locate import Target
    from patcher.report import Report
    from patcher.spec import PatchSpec

F = TypeVar("F", bound=Callable[..., None])
T = TypeVar("T")


def target_options(func: F) -> F:
    options = [
        click.option(
            "--python",
            "python",
            metavar="PATH",
            envvar="TORCH_LAZYLOG_PYTHON",
            show_envvar=True,
            help="Interpreter whose `import torch` is meant (default: the one running torch-lazylog).",
        ),
        click.option(
            "--torch-dir",
            metavar="DIR",
            envvar="TORCH_LAZYLOG_TORCH_DIR",
            show_envvar=True,
            help="The torch package directory itself (.../site-packages/torch), instead of finding it.",
        ),
        click.option(
            "--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead of text."
        ),
        click.option("--verbose", "-v", is_flag=True, help="Show a traceback for errors."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


class Given(NamedTuple):
    """The target options as the user gave them (or their environment variables): advice repeats them."""

    python: str | None = None
    torch_dir: str | None = None

    def command(self, step: str | None, details: dict[str, str | None]) -> str | None:
        """The next step as a command line to run as it is (or, for a reinstall no command can
        name, what to do instead)."""
        if step is None:
            return None
        if step == "reinstall":
            from patcher.messages import reinstall

            owner = details.get("owner")
            python = self.python or owner or (sys.executable if self.torch_dir is None else None)
            vendor = details.get("vendor") == "yes"
            return reinstall(shlex.quote(python) if python else None, details.get("dist_version"), vendor)
        options = (("--python", self.python), ("--torch-dir", self.torch_dir))
        return "torch-lazylog " + step + "".join(f" {flag} {shlex.quote(v)}" for flag, v in options if v)


def _caught(
    command: str, as_json: bool, verbose: bool, work: Callable[[], T], given: Given | None = None
) -> T:
    """Run one command; the single place where errors are caught and turned into an exit code."""
    try:
        return work()
    except LazylogError as exc:
        if verbose:
            _traceback()
        error = _error_report(command, exc.code, exc.message, exc.state, exc.details)
        _finish(
            error._replace(next=(given or Given()).command(exc.next, exc.details), diff=exc.diff), as_json
        )
    except Interrupted as exc:
        import signal

        name = signal.Signals(exc.signum).name
        code = ExitCode.INTERRUPTED if exc.signum == signal.SIGINT else ExitCode.TERMINATED
        from patcher.messages import interrupted

        _finish(_error_report(command, code, interrupted(name), "unknown", {}), as_json)
    except Exception as exc:  # an OSError nothing expected, or a bug: never let it read as exit 1
        if verbose:
            _traceback()
        what = (
            f"{exc.strerror} ({exc.filename})" if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        )
        message = (
            f"Unexpected error: {what}. Rerun with --verbose for the traceback and report it if it is a bug"
        )
        _finish(_error_report(command, ExitCode.ENVIRONMENT, message, "unknown", {}), as_json)


def _error_report(
    command: str, code: ExitCode, message: str, state: str, details: dict[str, str | None]
) -> Report:
    from patcher.report import Report

    return Report(
        command,
        state,
        False,
        message,
        code,
        torch_version=details.get("torch_version"),
        torch_dir=details.get("torch_dir"),
        graph_py=details.get("graph_py"),
        undo_record=details.get("undo_record"),
    )


def _traceback() -> None:
    import traceback

    traceback.print_exc()


def _render(report: Report, as_json: bool) -> tuple[str, str]:
    """What goes to stdout and to stderr."""
    if as_json:
        return json.dumps(report.to_json(), indent=2) + "\n", ""
    text = report.message
    if report.next:
        ours = report.next.startswith("torch-lazylog ")
        only = "Next" if ours else "Only a reinstall of torch can fix this"
        text += f"\n{only}: {report.next}"
    diff = report.diff or ""
    if report.code in (ExitCode.REFUSED, ExitCode.ENVIRONMENT):
        return "", f"torch-lazylog: error: {text}\n" + (diff + "\n" if diff else "")
    return diff + text + "\n", ""


def _finish(report: Report, as_json: bool) -> NoReturn:
    """Print a result or an error the same way: one JSON shape, or the sentence and the next step.
    A closed or full stdout is exit 5 (OUTPUT), never the command's own code."""
    report = report._replace(message=report.message.rstrip(".") + ".")  # one full stop, whatever the source
    out, err = _render(report, as_json)
    try:
        if err:
            sys.stderr.write(err)
            sys.stderr.flush()
        if out:
            sys.stdout.write(out)
            sys.stdout.flush()
    except OSError as exc:
        _silence()
        if report.code == ExitCode.OK:
            from patcher.messages import output_lost

            with contextlib.suppress(OSError):
                sys.stderr.write(f"torch-lazylog: error: {output_lost(exc)}.\n")
        sys.exit(int(ExitCode.OUTPUT))
    sys.exit(int(report.code))


def _silence() -> None:
    """After a write to stdout failed: point it at /dev/null so the exit itself cannot fail too."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())


def _emit(command: str, as_json: bool, verbose: bool, work: Callable[[], Report], given: Given) -> NoReturn:
    report = _caught(command, as_json, verbose, work, given)
    details = {"torch_version": report.torch_version}
    _finish(report._replace(next=given.command(report.next, details)), as_json)


def _target(python: str | None, torch_dir: str | None) -> tuple[Target, PatchSpec]:
    from patcher import locate, spec

    patch = spec.load()
    return locate.locate(python, torch_dir, patch), patch


@click.group(epilog=EXIT_CODE_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="torch-lazylog")
def cli() -> None:
    """Make torch Inductor's implicit-fallback log line lazy in an installed torch (< 2.13).

    The fix torch 2.13 ships, applied once to the installed source, checked, and reversible.
    """


@cli.command(epilog=EXIT_CODE_HELP)
@target_options
@click.option("--dry-run", is_flag=True, help="Print the unified diff that apply would make; write nothing.")
def apply(python: str | None, torch_dir: str | None, as_json: bool, verbose: bool, dry_run: bool) -> None:
    """Patch graph.py of the installed torch.

    Makes the one-argument change torch 2.13 ships; nothing to do on 2.13+, nothing more on a second run.
    """

    def work() -> Report:
        from patcher import engine

        target, patch = _target(python, torch_dir)
        return engine.apply(target, patch, dry_run=dry_run)

    _emit("apply", as_json, verbose, work, Given(python, torch_dir))


@cli.command(epilog=EXIT_CODE_HELP)
@target_options
@click.option(
    "--runtime",
    is_flag=True,
    help="Also import torch in the target interpreter and prove lazy formatting on Inductor's real path.",
)
def verify(python: str | None, torch_dir: str | None, as_json: bool, verbose: bool, runtime: bool) -> None:
    """Check that torch formats the log lazily.

    Exit 0 when the installed torch formats the implicit-fallback log lazily and graph.py, RECORD, the
    undo record and the bytecode agree; exit 1 when it formats eagerly or the patch is incomplete.
    """

    def work() -> Report:
        from patcher import engine

        target, patch = _target(python, torch_dir)
        report = engine.verify(target, patch)
        if runtime:
            from patcher import runtime as runtime_check

            report = runtime_check.run(target, report)
        return report

    _emit("verify", as_json, verbose, work, Given(python, torch_dir))


@cli.command(epilog=EXIT_CODE_HELP)
@target_options
def revert(python: str | None, torch_dir: str | None, as_json: bool, verbose: bool) -> None:
    """Restore the original graph.py, pycs and RECORD.

    Byte for byte, with their mode and mtime, from the undo record apply wrote.
    """

    def work() -> Report:
        from patcher import engine

        target, patch = _target(python, torch_dir)
        return engine.revert(target, patch)

    _emit("revert", as_json, verbose, work, Given(python, torch_dir))


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
@click.option("--markdown", is_flag=True, help="Print the README's supported-release table.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the result) instead of text.")
def fingerprint(
    wheels: tuple[Path, ...], output: Path | None, check: bool, markdown: bool, as_json: bool
) -> None:
    """Maintainers: regenerate the release table.

    Fingerprints graph.py of real torch wheels into the patch definition's releases table.
    """
    from patcher import fingerprint as fp
    from patcher import fsio, spec
    from patcher.report import Report

    def work() -> Report:
        patch = spec.load()
        releases = fp.build_releases((fp.graph_from_wheel(w, patch) for w in wheels), patch)
        text = json.dumps(releases.to_json(patch.id), indent=2, sort_keys=True) + "\n"
        if check:
            shipped = json.dumps(patch.releases.to_json(patch.id), indent=2, sort_keys=True) + "\n"
            if shipped != text:
                message = "The shipped releases table differs from the one these wheels give"
                return Report("fingerprint", "unknown", False, message, ExitCode.EAGER)
            return Report(
                "fingerprint", "unknown", False, f"The shipped releases table matches {len(wheels)} wheel(s)"
            )
        if output is not None:
            fsio.run([fsio.Write(output, text.encode(), 0o644, -1, -1, label="releases")], "fingerprint")
            return Report(
                "fingerprint", "unknown", True, f"Wrote {len(releases.rows)} release(s) to {output}"
            )
        shown = fp.releases_table(releases) if markdown else text
        if not as_json:
            click.echo(shown, nl=False)
            sys.exit(0)
        versions = ", ".join(f"{r.version} ({r.state})" for r in releases.rows)
        return Report(
            "fingerprint",
            "unknown",
            False,
            f"Fingerprinted {len(releases.rows)} release(s): {versions}",
            diff=shown,
        )

    _finish(_caught("fingerprint", as_json, False, work), as_json)


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def main() -> None:
    """The entry point: usage errors too are one JSON object when --json was asked for; SIGINT and
    SIGTERM end in their own exit codes (130, 143), never 0 or 1."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    as_json = "--json" in sys.argv[1:]
    try:
        code = cli.main(prog_name="torch-lazylog", standalone_mode=False)
    except click.ClickException as exc:
        if not as_json:
            exc.show()
            sys.exit(exc.exit_code)
        from patcher.report import Report

        words = [w for w in sys.argv[1:] if not w.startswith("-")]
        command = words[0] if words else "torch-lazylog"
        _finish(Report(command, "unknown", False, exc.format_message(), ExitCode(exc.exit_code)), True)
    except (click.Abort, Interrupted) as exc:  # outside a command (a prompt, the group itself)
        from patcher.report import Report

        interrupted = (
            ExitCode.TERMINATED if getattr(exc, "signum", 0) == signal.SIGTERM else ExitCode.INTERRUPTED
        )
        _finish(Report("torch-lazylog", "unknown", False, "Interrupted", interrupted), as_json)
    sys.exit(code if isinstance(code, int) else 0)
