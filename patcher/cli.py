"""The command line: unpack options, call the engine, print the report, exit with its code."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

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


def _caught(command: str, as_json: bool, verbose: bool, work: Callable[[], T]) -> T:
    """Run one command; the single place where errors are caught and turned into an exit code."""
    try:
        return work()
    except LazylogError as exc:
        if verbose:
            _traceback()
        _fail(command, as_json, exc.code, exc.message, exc.state, exc.details)
    except Exception as exc:  # an OSError nothing expected, or a bug: never let it read as exit 1
        if verbose:
            _traceback()
        what = (
            f"{exc.strerror} ({exc.filename})" if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        )
        message = (
            f"Unexpected error: {what}. Rerun with --verbose for the traceback and report it if it is a bug."
        )
        _fail(command, as_json, ExitCode.ENVIRONMENT, message, "unknown", {})


def _traceback() -> None:
    import traceback

    traceback.print_exc()


def _emit(command: str, as_json: bool, verbose: bool, work: Callable[[], Report]) -> NoReturn:
    report = _caught(command, as_json, verbose, work)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        if report.diff:
            click.echo(report.diff, nl=False)
        click.echo(report.message)
    sys.exit(int(report.code))


def _fail(
    command: str, as_json: bool, code: ExitCode, message: str, state: str, details: dict[str, object]
) -> NoReturn:
    if as_json:
        payload = {
            "command": command,
            "state": state,
            "changed": False,
            "exit_code": int(code),
            "message": message,
            "torch_version": details.get("torch_version"),
            "torch_dir": details.get("torch_dir"),
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(f"torch-lazylog: error: {message}", err=True)
    sys.exit(int(code))


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

    _emit("apply", as_json, verbose, work)


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

    _emit("verify", as_json, verbose, work)


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

    _emit("revert", as_json, verbose, work)


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
def fingerprint(wheels: tuple[Path, ...], output: Path | None, check: bool, markdown: bool) -> None:
    """Maintainers: regenerate the release table.

    Fingerprints graph.py of real torch wheels into the patch definition's releases table.
    """
    from patcher import fingerprint as fp
    from patcher import fsio, spec

    patch = spec.load()
    releases = _caught(
        "fingerprint",
        False,
        False,
        lambda: fp.build_releases((fp.graph_from_wheel(w, patch) for w in wheels), patch),
    )
    text = json.dumps(releases.to_json(patch.id), indent=2, sort_keys=True) + "\n"
    if markdown:
        click.echo(fp.releases_table(releases), nl=False)
    if check:
        shipped = json.dumps(patch.releases.to_json(patch.id), indent=2, sort_keys=True) + "\n"
        if shipped != text:
            click.echo("The shipped releases table differs from the one these wheels give.", err=True)
            sys.exit(1)
        click.echo(f"The shipped releases table matches {len(wheels)} wheel(s).")
    elif output is not None:
        fsio.run([fsio.Write(output, text.encode(), 0o644, -1, -1, label="releases")], "fingerprint")
        click.echo(f"Wrote {len(releases.rows)} release(s) to {output}.")
    elif not markdown:
        click.echo(text, nl=False)


def main() -> None:
    cli(prog_name="torch-lazylog")
