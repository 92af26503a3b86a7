"""The console script: plain `apply`, `verify` and `revert` lines run without importing click.

verify is what CI runs on every image and is timed against `python -c pass`; importing click costs
more than the whole check. A command line made only of one of the three commands and the options
they share with click (`--python`, `--torch-dir`, each as one or two words, `--json`,
`-v`/`--verbose`, and apply's `--dry-run`) goes straight to the patcher.cli.commands function that
click's command calls too, with the same environment variables; anything else (help, `--runtime`,
a repeated option, an unknown word) is parsed by click. tests/test_entry.py checks that both paths
print the same for the same command lines.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import NoReturn

_VALUED = {"--python": "TORCH_LAZYLOG_PYTHON", "--torch-dir": "TORCH_LAZYLOG_TORCH_DIR"}
_FLAGS = {"--json": "json", "-v": "verbose", "--verbose": "verbose"}
_COMMANDS = {"apply": {"--dry-run": "dry_run"}, "verify": {}, "revert": {}}


def plain(argv: list[str]) -> dict[str, str | bool | None] | None:
    """The command and options of a plain command line, or None when click must parse it."""
    if not argv or argv[0] not in _COMMANDS:
        return None
    flags = _FLAGS | _COMMANDS[argv[0]]
    found: dict[str, str | bool | None] = {
        "command": argv[0],
        "json": False,
        "verbose": False,
        "dry_run": False,
    }
    words = iter(argv[1:])
    for word in words:
        name, eq, value = word.partition("=")
        if name in _VALUED and name not in found:
            value = value if eq else next(words, "")
            if not value or value.startswith("-"):
                return None  # click's message for a missing value
            found[name] = value
        elif word in flags and not eq:
            found[flags[word]] = True
        else:
            return None
    for name, variable in _VALUED.items():
        if name not in found and os.environ.get(variable):
            found[f"env{name}"] = True  # the value came from the variable: errors name it
        found.setdefault(name, os.environ.get(variable) or None)
    return found


def main() -> None:
    options = plain(sys.argv[1:])
    if options is None:
        try:
            from patcher.cli.app import main as click_main
        except ModuleNotFoundError as exc:  # the single-file build: no click
            _without(exc)
        click_main()
        return
    from patcher.cli import commands
    from patcher.core.errors import Interrupted

    commands.handle_signals()
    try:
        _run(commands, options)
    except Interrupted as exc:  # anywhere outside a command's own handling
        commands.interrupted_exit(exc)


def _run(commands: ModuleType, options: dict[str, str | bool | None]) -> None:
    python, torch_dir = options["--python"], options["--torch-dir"]
    assert not isinstance(python, bool) and not isinstance(torch_dir, bool)
    as_json, verbose = bool(options["json"]), bool(options["verbose"])
    env = tuple(name for name in _VALUED if options.get(f"env{name}"))
    if options["command"] == "apply":
        commands.apply(python, torch_dir, as_json, verbose, bool(options["dry_run"]), env)
    if options["command"] == "revert":
        commands.revert(python, torch_dir, as_json, verbose, env)
    commands.verify(python, torch_dir, as_json, verbose, False, env)


def _without(exc: ModuleNotFoundError) -> NoReturn:
    """A command line only click parses (help, --runtime, fingerprint), where click is not there."""
    from patcher.cli import commands
    from patcher.core.errors import ExitCode, missing_dependency
    from patcher.core.report import Report

    words = [w for w in sys.argv[1:] if not w.startswith("-")]
    command = words[0] if words and words[0] in (*_COMMANDS, "fingerprint") else "torch-lazylog"
    text = missing_dependency(exc.name or "click", f"parse `{' '.join(sys.argv[1:]) or '(no command)'}`")
    commands.finish(Report(command, "unknown", False, text, ExitCode.ENVIRONMENT), "--json" in sys.argv[1:])
