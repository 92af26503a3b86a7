"""The command line: click's parser and each command's work (app), running a work and rendering its
result (commands), where every way in starts (entry), the single file's first module (zipmain) and
what it knows of itself (singlefile). Everything here is thin: it unpacks options and calls the layers
below. The package's face is `main`; no module here imports this one back.

The single file's __main__ may import this package before it knows its Python is new enough: plain
Python 3.6 syntax here, as in zipmain (annotations quoted, no __future__ import).
"""

from patcher.cli.entry import main

__all__ = ["main"]
