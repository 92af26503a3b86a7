"""Mutation fuzzing over the real release files.

Property: for any mutation of a real graph.py, inside or outside the patch site, apply's decision
either makes exactly the one intended change (and the result compiles) or refuses; it never
produces a file that does not compile. The suite runs FUZZ_CASES cases; `pytest -m fuzz_long` runs
FUZZ_LONG_CASES (the README's Safety table gives both).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import itertools
import warnings

import libcst as cst
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from patcher.core.classify import classify
from patcher.install import definitions as spec_module
from tests import realdata
from tests.conftest import need
from tests.helpers import FUZZ_CASES, FUZZ_LONG_CASES

SPEC = spec_module.load()
EAGER = b"error.operator_str(target, args, kwargs)"
LAZY = b"LazyString(error.operator_str, target, args, kwargs)"
TOKENS = [b" ", b"\n", b"\r\n", b"\t", b"(", b")", b",", b":", b"#", b"x", b"1", b"'", b'"', b"\\", b"\xff",
          b"error", b"args", b"LazyString", b"log.info(", b"elif ", b"return", b"    ", b"pass\n"]  # fmt: skip


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
    """The oracle, apart from the tool (ast, not libcst): `result` is `source` with one call that Python
    reads as EAGER replaced by LAZY, nothing else. Any spelling of that call counts: the long run found
    `error.operator_str (target, args, kwargs)` (a space inserted) on 2.2.0, which the tool patches,
    as it should, since it matches the site by its code, formatting aside; an oracle that looked for
    EAGER's bytes alone called that patch a change of more than the one argument."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree, eager = ast.parse(source), ast.dump(ast.parse(EAGER, mode="eval").body)
    except (SyntaxError, ValueError):
        return False
    starts = [0, *itertools.accumulate(len(line) for line in source.splitlines(keepends=True))]
    for call in ast.walk(tree):  # offsets: the line's start, then UTF-8 bytes into the line
        if isinstance(call, ast.Call) and ast.dump(call) == eager and call.end_lineno is not None:
            start = starts[call.lineno - 1] + call.col_offset
            end = starts[call.end_lineno - 1] + (call.end_col_offset or 0)
            if result == source[:start] + LAZY + source[end:]:
                return True
    return False


def _method(tree: ast.Module) -> ast.FunctionDef | None:
    """GraphLowering.call_function, when the module has exactly one of each."""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GraphLowering"]
    methods = [
        n for c in classes for n in c.body if isinstance(n, ast.FunctionDef) and n.name == "call_function"
    ]
    return methods[0] if len(classes) == 1 and len(methods) == 1 else None


def _imports_lazystring(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.ImportFrom)
        and n.module == "torch._logging"
        and n.level == 0
        and any(a.name == "LazyString" and a.asname is None for a in n.names)
        for n in tree.body
    )


def _must_patch(original: bytes, source: bytes) -> bool:
    """Decided apart from the tool (ast, not libcst): the mutation left GraphLowering.call_function
    the same code (whitespace and comments aside), the LazyString import and the argument's single
    occurrence in place, and the file valid UTF-8 Python. Such a file is the release with edits
    elsewhere: refusing it would be over-refusal."""
    if source.count(EAGER) != 1 or LAZY in source or not _compiles(source):
        return False
    try:
        source.decode("utf-8")  # the releases' encoding (no coding cookie); CPython skips bad bytes
    except UnicodeDecodeError:  # in comments, a parser that reads the declared encoding does not
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before, after = ast.parse(original), ast.parse(source)
    old, new = _method(before), _method(after)
    if old is None or new is None or not _imports_lazystring(after):
        return False
    return ast.dump(old) == ast.dump(new)


def _libcst_rejects(source: bytes) -> bool:
    """libcst, the parser the tool ships, rejects some files every CPython from 3.10 to 3.13 compiles,
    and the fuzzer makes two of them: a line holding only a backslash continuation (`\\` inserted on a
    blank line before a `def`), and indentation mixing a tab with spaces where the width does not depend
    on the tab's (LibCST issues 951 and 829, both open). The tool edits only what libcst parsed, so such
    a file can only be refused, with libcst's error; patching it would take another parser."""
    try:
        cst.parse_module(source)
    except cst.ParserSyntaxError:
        return True
    return False


def _check(case: tuple[str, bytes, bytes]) -> None:
    version, original, source = case
    known, rewritten = classify(source, sha(source), SPEC, version, None)
    event(f"outcome: {'patched' if rewritten else 'refused' if known.kind == 'unknown' else known.kind}")
    if rewritten is None:
        assert known.kind in ("unknown", "native", "patched", "lazy")
        if _must_patch(original, source):
            assert _libcst_rejects(source), f"refused a file that must be patched: {known.reason}"
            assert "ParserSyntaxError" in known.reason, known.reason
        return
    assert known.kind == "eager" and known.release is not None
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


def test_the_oracle_demands_a_patch_for_edits_outside_the_method() -> None:
    """The over-refusal oracle is not vacuous: an edit outside the method must be patched."""
    _, source = _sources()[7]
    lines = source.splitlines(keepends=True)
    assert _must_patch(source, b"".join([*lines[:5], b"# vendor comment\n", *lines[5:]]))
    assert not _must_patch(source, source.replace(EAGER, b"error.operator_str(target, args)"))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(b"\n    def call_function(", b"\\\n    def call_function(", id="backslash-line"),
        pytest.param(
            b"\n" + b" " * 16 + b"raise MissingOperatorWithout",
            b"\n" + b" " * 7 + b"\t" + b" " * 9 + b"raise MissingOperatorWithout",
            id="tab",
        ),
    ],
)
def test_what_libcst_cannot_parse_is_refused_though_it_compiles(before: bytes, after: bytes) -> None:
    """The two shapes the long run found on 2.2.0 (_libcst_rejects): the oracle would demand a patch,
    libcst rejects the file, and the tool refuses it naming libcst's error. When libcst parses them, this
    fails: drop the exception in _check then."""
    version, source = _sources()[0]
    assert version == "2.2.0" and source.count(before) == 1
    mutated = source.replace(before, after)
    assert _must_patch(source, mutated) and _libcst_rejects(mutated)
    known, rewritten = classify(mutated, sha(mutated), SPEC, version, None)
    assert rewritten is None and known.kind == "unknown" and "ParserSyntaxError" in known.reason


def test_the_fuzzer_reaches_both_outcomes() -> None:
    """Not a vacuous property: some mutations are patched, some refused, some inside the site."""
    seen = {"patched": 0, "refused": 0}
    for version, source in _sources()[:11]:
        lines = source.splitlines(keepends=True)
        site = next(i for i, line in enumerate(lines) if b"operator_str" in line)
        outside = b"".join([*lines[:5], b"# vendor comment\n", *lines[5:]])
        inside = b"".join([*lines[: site - 2], lines[site - 2] * 2, *lines[site - 2 :]])
        for candidate in (outside, inside):
            _, rewritten = classify(candidate, sha(candidate), SPEC, version, None)
            seen["patched" if rewritten else "refused"] += 1
    assert seen == {"patched": 11, "refused": 11}
