"""The command line: click's parser and each command's work (app), running a work and rendering its
result (commands), the single file's first module (zipmain). Everything here is thin: it unpacks
options and calls the layers below. `main` is where every way in starts: the console script,
`python -m patcher` and the single file.

The single file's __main__ imports this module before it knows its Python is new enough: plain
Python 3.6 syntax here, as in zipmain (annotations quoted, no __future__ import).
"""

import sys
from collections.abc import Collection


def command_word(argv: "list[str]", known: "Collection[str]" = ()) -> str:
    """The command a report names: the first word that is not an option (one of `known`, when
    given), else the program's name."""
    words = [w for w in argv if not w.startswith("-")]
    return words[0] if words and (not known or words[0] in known) else "torch-lazylog"


def main() -> None:
    """Click's command line, or, where click does not import (a wheel installed with `--no-deps`, a
    single file built without it), one sentence and exit 4 instead of a traceback. Nothing that
    imports click runs before the check."""
    try:
        from patcher.cli.app import main as app
    except ModuleNotFoundError as exc:
        if exc.name != "click":
            raise
        from patcher.cli import commands
        from patcher.core.errors import missing

        error = missing("click", f"parse `{' '.join(sys.argv[1:]) or '(no command)'}`")
        commands.failed(commands.Given(command_word(sys.argv[1:]), "--json" in sys.argv[1:]), error)
    app()
