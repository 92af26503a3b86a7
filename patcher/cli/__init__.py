"""The command line: click's parser (app), the commands and their rendering, the single file's first
module (zipmain) and its build (pyz). Everything here is thin: it unpacks options and calls the
layers below.

The single file's __main__ imports this module before it knows its Python is new enough: plain
Python 3.6 syntax here, as in zipmain (annotations quoted, no __future__ import).
"""

from collections.abc import Collection


def command_word(argv: "list[str]", known: "Collection[str]" = ()) -> str:
    """The command a report names: the first word that is not an option (one of `known`, when
    given), else the program's name."""
    words = [w for w in argv if not w.startswith("-")]
    return words[0] if words and (not known or words[0] in known) else "torch-lazylog"
