"""Where the single file finds what it cannot carry: the libcst directory (libcst's parser is native
code, which cannot load from a zip). Stdlib only, and no syntax newer than 3.6: the single file's
__main__ (patcher.cli.zipmain) uses it on whatever Python runs the file.
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
