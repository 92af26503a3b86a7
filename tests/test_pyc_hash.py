"""A hash-based pyc's source hash, computed here for the Python that wrote it (PEP 552): each CPython
on this machine hashes a real graph.py with its own key, and install.pyc.source_hash, given only
that Python's magic number, must say the same."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from patcher.install import pyc
from tests import realdata
from tests.conftest import need

ASK = "import importlib.util, sys; data = sys.stdin.buffer.read(); "
ASK += "print(importlib.util.MAGIC_NUMBER.hex(), importlib.util.source_hash(data).hex())"


def test_every_python_here_agrees_with_the_hash_by_its_magic_number() -> None:
    source: bytes = need(lambda: realdata.graph_source("2.10.0"))  # type: ignore[assignment]
    pythons = [sys.executable, *map(str, realdata.other_pythons())]
    if len(pythons) == 1 and realdata.IN_CI:
        pytest.fail("this machine has no CPython besides the one running the tests")
    seen = set()
    for python in pythons:
        done = subprocess.run([python, "-c", ASK], input=source, capture_output=True, check=True)
        magic, expected = done.stdout.decode().split()
        assert pyc.source_hash(bytes.fromhex(magic), source) == expected, python
        seen.add(expected)
    assert len(seen) == len(pythons)  # each Python's key gives its own hash: the magic number matters


def test_this_pythons_own_hash() -> None:
    data = b"x = 1\n" * 3
    assert pyc.source_hash(importlib.util.MAGIC_NUMBER, data) == importlib.util.source_hash(data).hex()
