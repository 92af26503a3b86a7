"""Mutation fuzzing over the real release files.

Property: for any mutation of a real graph.py, inside or outside the patch site, apply's decision
either makes exactly the one intended change (and the result compiles) or refuses; it never
produces a file that does not compile. The suite runs FUZZ_CASES cases; `pytest -m fuzz_long` runs
FUZZ_LONG_CASES (the README's Safety table gives both).
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from patcher import spec as spec_module
from patcher.classify import decide
from tests import realdata
from tests.conftest import need

FUZZ_CASES = 300
FUZZ_LONG_CASES = 5000
SPEC = spec_module.load()
EAGER = b"error.operator_str(target, args, kwargs)"
LAZY = b"LazyString(error.operator_str, target, args, kwargs)"
TOKENS = [b" ", b"\n", b"\r\n", b"\t", b"(", b")", b",", b":", b"#", b"x", b"1", b"'", b'"', b"\\", b"\xff",
          b"error", b"args", b"LazyString", b"log.info(", b"elif ", b"return", b"    ", b"pass\n"]  # fmt: skip


@functools.cache
def _sources() -> list[tuple[str, bytes]]:
    return [(v, need(lambda v=v: realdata.graph_source(v))) for v in realdata.ALL_RELEASES]  # type: ignore[misc]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes, bytes]:
    version, source = draw(st.sampled_from(_sources()))
    lines = source.splitlines(keepends=True)
    site = next(i for i, line in enumerate(lines) if b"operator_str" in line)
    near = draw(st.booleans())
    index = draw(
        st.integers(max(0, site - 25), min(len(lines) - 1, site + 25))
        if near
        else st.integers(0, len(lines) - 1)
    )
    kind = draw(st.sampled_from(["delete", "duplicate", "swap", "insert", "byte", "dedent"]))
    line = lines[index]
    if kind == "delete":
        lines[index] = b""
    elif kind == "duplicate":
        lines[index] = line + line
    elif kind == "swap" and index + 1 < len(lines):
        lines[index], lines[index + 1] = lines[index + 1], line
    elif kind == "insert":
        at = draw(st.integers(0, len(line)))
        lines[index] = line[:at] + draw(st.sampled_from(TOKENS)) + line[at:]
    elif kind == "byte" and line:
        at = draw(st.integers(0, len(line) - 1))
        lines[index] = line[:at] + bytes([draw(st.integers(0, 255))]) + line[at + 1 :]
    elif kind == "dedent":
        lines[index] = line.lstrip(b" ")
    return version, source, b"".join(lines)


def _compiles(source: bytes) -> bool:
    try:
        compile(source, "graph.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _one_replacement(source: bytes, result: bytes) -> bool:
    """The oracle, from bytes alone: `result` is `source` with one EAGER replaced by LAZY, nothing else."""
    if len(result) != len(source) + len(LAZY) - len(EAGER):
        return False
    at = 0
    while (at := source.find(EAGER, at)) != -1:
        if result == source[:at] + LAZY + source[at + len(EAGER) :]:
            return True
        at += 1
    return False


def _check(case: tuple[str, bytes, bytes]) -> None:
    version, _, source = case
    known, rewritten = decide(source, SPEC, version)
    event(f"outcome: {'patched' if rewritten else 'refused' if known.state == 'unknown' else known.state}")
    if rewritten is None:
        assert known.state in ("unknown", "native", "patched")
        return
    assert known.state == "eager" and known.release is not None
    assert _one_replacement(source, rewritten.source), "the rewrite changed more than the one argument"
    assert _compiles(rewritten.source)


@settings(max_examples=FUZZ_CASES, deadline=None, derandomize=True)
@given(mutated())
def test_mutations_are_patched_exactly_or_refused(case: tuple[str, bytes, bytes]) -> None:
    _check(case)


@pytest.mark.fuzz_long
@settings(max_examples=FUZZ_LONG_CASES, deadline=None)
@given(mutated())
def test_mutations_long_run(case: tuple[str, bytes, bytes]) -> None:
    _check(case)


def test_the_fuzzer_reaches_both_outcomes() -> None:
    """Not a vacuous property: some mutations are patched, some refused, some inside the site."""
    seen = {"patched": 0, "refused": 0}
    for version, source in _sources()[:11]:
        lines = source.splitlines(keepends=True)
        site = next(i for i, line in enumerate(lines) if b"operator_str" in line)
        outside = b"".join([*lines[:5], b"# vendor comment\n", *lines[5:]])
        inside = b"".join([*lines[: site - 2], lines[site - 2] * 2, *lines[site - 2 :]])
        for candidate in (outside, inside):
            _, rewritten = decide(candidate, SPEC, version)
            seen["patched" if rewritten else "refused"] += 1
    assert seen == {"patched": 11, "refused": 11}
