"""patcher.core.installed.metadata_version: METADATA's Version field, read as the email package's
header parser reads it (the oracle here), without importing that package."""

from __future__ import annotations

from email.parser import BytesHeaderParser

import pytest

from patcher.core.installed import metadata_version

CASES = {
    "plain": b"Metadata-Version: 2.4\nName: torch\nVersion: 2.10.0\nSummary: x\n\nbody\n",
    "local": b"Metadata-Version: 2.1\nName: torch\nVersion: 2.10.0a0+git8514f05\n",
    "crlf": b"Metadata-Version: 2.1\r\nName: torch\r\nVersion: 2.9.1+rocm6.4\r\n\r\nbody",
    "any case": b"Name: torch\nversion:2.11.0\n",
    "folded": b"Name: torch\nVersion:\n 2.12.0\nSummary: x\n",
    "folded by a tab": b"Name: torch\nVersion:\n\t2.9.1\n",
    "first wins": b"Version: 2.10.0\nVersion: 9.9.9\n",
    "absent": b"Metadata-Version: 2.1\nName: torch\n",
    "only in the body": b"Name: torch\n\nVersion: 2.10.0\n",
    "a continuation first": b" Version: 1.0\nName: torch\nVersion: 2.10.0\n",
    "empty": b"",
}


@pytest.mark.parametrize("name", CASES)
def test_the_version_is_the_email_parsers(name: str) -> None:
    data = CASES[name]
    field = BytesHeaderParser().parsebytes(data)["Version"]
    expected = None if field is None else " ".join(str(field).split())
    assert metadata_version(data) == expected


def test_what_the_cases_read() -> None:
    """The cases are not all one answer: the oracle agrees on different versions and on none."""
    assert metadata_version(CASES["local"]) == "2.10.0a0+git8514f05"
    assert metadata_version(CASES["folded"]) == "2.12.0"
    assert metadata_version(CASES["folded by a tab"]) == "2.9.1"
    assert metadata_version(CASES["only in the body"]) is None
