"""The single file as the command line sees it: whether this package runs from it, and the directory
of libcst built for this Python that it reads beside it (`pip install --target`). libcst's parser is
native code and cannot load from inside a zip: that directory is how the single file reads a graph.py
that is not a known release's bytes, and what the command line's errors name (patcher.cli.commands).

Plain Python 3.6 syntax: the single file's first module (patcher.cli.zipmain) imports it.
"""

import os
import sys

LIBS_VARIABLE = "TORCH_LAZYLOG_LIBS"
LIBS_NAME = "torch-lazylog-libs"  # a directory beside the .pyz, found without any option


def libs_dir(archive: str) -> str:
    """The libcst directory: $TORCH_LAZYLOG_LIBS, else torch-lazylog-libs beside the file; in it, the
    subdirectory named after this Python (`3.12`) when there is one, as the tool image has one a Python."""
    libs = os.environ.get(LIBS_VARIABLE) or os.path.join(os.path.dirname(os.path.abspath(archive)), LIBS_NAME)
    own = os.path.join(libs, f"{sys.version_info[0]}.{sys.version_info[1]}")
    return own if os.path.isdir(own) else libs


def in_zip() -> bool:
    """Whether this package runs from the single file (its modules are no files of their own)."""
    return not os.path.isfile(__file__)
