"""The command line: unpack options, call the engine, print the report, exit with its code."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn, TypeVar

import click

from patcher import __version__
from patcher.errors import EXIT_CODE_HELP, ExitCode, LazylogError

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

    def command(self, step: str | None, torch_version: str | None) -> str | None:
        """The next step as a command line to run as it is."""
        if step is None:
            return None
        if step == "reinstall":
            python = shlex.quote(self.python or sys.executable)
            return (
                f"{python} -m pip install --force-reinstall --no-deps torch=={torch_version or '<version>'}"
            )
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
        details = exc.details
        version = details.get("torch_version")
        error = _error_report(command, exc.code, exc.message, exc.state, details)
        _finish(error._replace(next=(given or Given()).command(exc.next, version), diff=exc.diff), as_json)
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


def _finish(report: Report, as_json: bool) -> NoReturn:
    """Print a result or an error the same way: one JSON shape, or the sentence and the next step."""
    report = report._replace(message=report.message.rstrip(".") + ".")  # one full stop, whatever the source
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        text = report.message
        if report.next:
            only = "Only a reinstall of torch can fix this" if "pip install" in report.next else "Next"
            text += f"\n{only}: {report.next}"
        if report.code in (ExitCode.REFUSED, ExitCode.ENVIRONMENT):
            click.echo(f"torch-lazylog: error: {text}", err=True)
            if report.diff:
                click.echo(report.diff, err=True)
        else:
            if report.diff:
                click.echo(report.diff, nl=False)
            click.echo(text)
    sys.exit(int(report.code))


def _emit(command: str, as_json: bool, verbose: bool, work: Callable[[], Report], given: Given) -> NoReturn:
    report = _caught(command, as_json, verbose, work, given)
    _finish(report._replace(next=given.command(report.next, report.torch_version)), as_json)


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

    patch = spec.load()
    releases = _caught(
        "fingerprint",
        as_json,
        False,
        lambda: fp.build_releases((fp.graph_from_wheel(w, patch) for w in wheels), patch),
    )
    text = json.dumps(releases.to_json(patch.id), indent=2, sort_keys=True) + "\n"
    if markdown:
        click.echo(fp.releases_table(releases), nl=False)
    if check:
        shipped = json.dumps(patch.releases.to_json(patch.id), indent=2, sort_keys=True) + "\n"
        if shipped != text:
            message = "The shipped releases table differs from the one these wheels give"
            _finish(Report("fingerprint", "unknown", False, message, ExitCode.EAGER), as_json)
        message = f"The shipped releases table matches {len(wheels)} wheel(s)"
        _finish(Report("fingerprint", "unknown", False, message), as_json)
    elif output is not None:
        write: list[fsio.Step] = [fsio.Write(output, text.encode(), 0o644, -1, -1, label="releases")]
        _caught("fingerprint", as_json, False, lambda: fsio.run(write, "fingerprint"))
        _finish(
            Report("fingerprint", "unknown", True, f"Wrote {len(releases.rows)} release(s) to {output}"),
            as_json,
        )
    elif not markdown:
        click.echo(text, nl=False)


def main() -> None:
    """The entry point: usage errors too are one JSON object when --json was asked for."""
    try:
        code = cli.main(prog_name="torch-lazylog", standalone_mode=False)
    except click.ClickException as exc:
        if "--json" not in sys.argv[1:]:
            exc.show()
            sys.exit(exc.exit_code)
        from patcher.report import Report

        words = [w for w in sys.argv[1:] if not w.startswith("-")]
        command = words[0] if words else "torch-lazylog"
        _finish(Report(command, "unknown", False, exc.format_message(), ExitCode(exc.exit_code)), True)
    except click.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
