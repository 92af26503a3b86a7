"""apply's diff: difflib's unified diff, lines split on \\n only, patch's mark after a last line
without one."""

from __future__ import annotations

import pytest

from patcher.core.diff import unified


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        pytest.param(
            b"1\n2\n3\n4\nf(x)\n5\n6\n7\n8\n",
            b"1\n2\n3\n4\nLazy(f, x)\n5\n6\n7\n8\n",
            "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-f(x)\n+Lazy(f, x)\n 5\n 6\n 7\n",
            id="three-lines-around",
        ),
        pytest.param(
            b"1\n2\n3\n4\nf(x)",
            b"1\n2\n3\n4\nLazy(f, x)",
            "@@ -2,4 +2,4 @@\n 2\n 3\n 4\n-f(x)\n\\ No newline at end of file\n"
            "+Lazy(f, x)\n\\ No newline at end of file\n",
            id="no-newline-at-end",
        ),
        pytest.param(
            b"1\n2\x0c\n3\xe2\x80\xa8\n4\nf(x)\n5\n",
            b"1\n2\x0c\n3\xe2\x80\xa8\n4\nLazy(f, x)\n5\n",
            "@@ -2,5 +2,5 @@\n 2\x0c\n 3\u2028\n 4\n-f(x)\n+Lazy(f, x)\n 5\n",
            id="split-on-newline-only",
        ),
    ],
)
def test_unified(before: bytes, after: bytes, expected: str) -> None:
    assert unified(before, after, "t/g.py") == "--- a/t/g.py\n+++ b/t/g.py\n" + expected
