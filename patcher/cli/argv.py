"""What the command line says before click parses it (and where click cannot run at all).

Plain Python 3.6 syntax: the single file's first module uses it on a Python too old for the rest.
"""

from collections.abc import Collection


def command_word(argv: "list[str]", known: "Collection[str]" = ()) -> str:
    """The command a report names: the first word that is not an option (one of `known`, when
    given), else the program's name."""
    words = [w for w in argv if not w.startswith("-")]
    return words[0] if words and (not known or words[0] in known) else "torch-lazylog"
