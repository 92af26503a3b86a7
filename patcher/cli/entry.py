"""`main`, where every way in starts: the console script, `python -m patcher` and the single file.

The single file's first module (patcher.cli.zipmain) hands over here only on a Python new enough; the
package's face (patcher.cli) imports this module, so it stays plain Python 3.6 syntax too.
"""

import sys


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
        from patcher.cli.argv import command_word
        from patcher.core.errors import missing

        error = missing("click", f"parse `{' '.join(sys.argv[1:]) or '(no command)'}`")
        commands.failed(commands.Given(command_word(sys.argv[1:]), "--json" in sys.argv[1:]), error)
    app()
