"""The unified diff of apply's edit, with lines split as `patch` splits them (on \\n only)."""

from __future__ import annotations

import difflib
import io


def _lines(data: bytes) -> list[str]:
    return io.StringIO(data.decode("utf-8", "surrogateescape"), newline="\n").readlines()  # \n only


def unified(before: bytes, after: bytes, name: str) -> str:
    """difflib's diff, with patch's mark after a last line that has no newline."""
    lines = difflib.unified_diff(_lines(before), _lines(after), f"a/{name}", f"b/{name}")
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
