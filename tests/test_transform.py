"""The pure transform, in pairs: what it leaves alone (noop/refused) and what it rewrites."""

from __future__ import annotations

import pytest

from patcher import spec as spec_module
from patcher.edits import line_edit
from patcher.outcome import Refused, Rewritten, Unchanged
from patcher.transform import rewrite, site_of

SPEC = spec_module.load()

EAGER = "error.operator_str(target, args, kwargs)"
LAZY = "LazyString(error.operator_str, target, args, kwargs)"

TEMPLATE = """\
from torch._logging import LazyString, trace_structured


class GraphLowering:
    def call_function(self, target, args, kwargs):
        if target not in lowerings:
            if base_name in FALLBACK_ALLOW_LIST:
                make_fallback(target)
            elif config.implicit_fallbacks:
                error = (
                    MissingOperatorWithDecomp
                    if get_decompositions([target])
                    else MissingOperatorWithoutDecomp
                )
                log.info(
                    "Creating implicit fallback for:\\n%s",
                    {arg},
                )
                make_fallback(target)
"""


def src(arg: str = EAGER, template: str = TEMPLATE) -> bytes:
    return template.replace("{arg}", arg).encode()


def lazy(source: bytes) -> bytes:
    return source.replace(EAGER.encode(), LAZY.encode())


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(src(), src(LAZY), id="basic"),
        pytest.param(src().replace(b"\n", b"\r\n"), src(LAZY).replace(b"\n", b"\r\n"), id="crlf-kept"),
        pytest.param(b"\xef\xbb\xbf" + src(), b"\xef\xbb\xbf" + src(LAZY), id="bom-kept"),
        pytest.param(
            src().replace(b"make_fallback(target)\n", b"make_fallback(target)   \n"),
            src(LAZY).replace(b"make_fallback(target)\n", b"make_fallback(target)   \n"),
            id="trailing-whitespace-kept",
        ),
        pytest.param(src(EAGER + ",  # why"), lazy(src(EAGER + ",  # why")), id="comment-kept"),
        pytest.param(
            b"# -*- coding: latin-1 -*-\n"
            + src().replace(b"class GraphLowering:", b"class GraphLowering:  # \xe9"),
            b"# -*- coding: latin-1 -*-\n"
            + src(LAZY).replace(b"class GraphLowering:", b"class GraphLowering:  # \xe9"),
            id="latin-1-declared",
        ),
        pytest.param(
            src().replace(b"    ", b"\t"),
            lazy(src().replace(b"    ", b"\t")),
            id="tabs",
        ),
        pytest.param(
            src().replace(b"(target, args, kwargs)", b"(target,args,kwargs)"),
            src().replace(b"error.operator_str(target, args, kwargs)", LAZY.encode()),
            id="other-spacing-same-code",
        ),
    ],
)
def test_rewrite(before: bytes, after: bytes) -> None:
    outcome = rewrite(before, SPEC)
    assert isinstance(outcome, Rewritten), outcome
    assert outcome.source == after
    assert outcome.edit.apply(before) == after
    assert outcome.edit.inverted().apply(after) == before
    assert outcome.edit.old.count(b"\n") == 1 == outcome.edit.new.count(b"\n")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(src(LAZY), id="already-lazy"),
        pytest.param(src(LAZY).replace(b"\n", b"\r\n"), id="already-lazy-crlf"),
    ],
)
def test_rewrite_noop(source: bytes) -> None:
    outcome = rewrite(source, SPEC)
    assert isinstance(outcome, Unchanged)
    assert outcome.site.form == "lazy"


def test_rewrite_back_to_eager_is_the_inverse() -> None:
    outcome = rewrite(src(LAZY), SPEC, to="eager")
    assert isinstance(outcome, Rewritten)
    assert outcome.source == src()


@pytest.mark.parametrize(
    ("source", "why"),
    [
        pytest.param(src("error.operator_str(target, args)"), "not in graph.py", id="other-arguments"),
        pytest.param(src(EAGER + ", extra"), "log call differs", id="extra-argument"),
        pytest.param(
            src().replace(b"Creating implicit", b"Making implicit"), "log call differs", id="other-text"
        ),
        pytest.param(src().replace(b"log.info(", b"log.warning("), "log call differs", id="other-level"),
        pytest.param(
            src().replace(b"def call_function", b"def call_function_impl"),
            "expected `GraphLowering.call_function`",
            id="moved-out",
        ),
        pytest.param(
            src().replace(b"class GraphLowering", b"class OtherLowering"),
            "expected `GraphLowering.call_function`",
            id="other-class",
        ),
        pytest.param(
            src().replace(b"LazyString, trace_structured", b"trace_structured"),
            "does not import `LazyString`",
            id="no-import",
        ),
        pytest.param(
            src().replace(b"LazyString, trace_structured", b"LazyString as LS"),
            "does not import `LazyString`",
            id="import-renamed",
        ),
        pytest.param(
            src() + b"\n\ndef other():\n    x(" + EAGER.encode() + b")\n", "occurs 2 times", id="twice"
        ),
        pytest.param(
            src().replace(b"make_fallback(target)\n", b"make_fallback(target\n", 1),
            "not valid Python",
            id="syntax-error",
        ),
        pytest.param(src().replace(b"# ", b"# \xff") + b"# \xff\n", "not valid text", id="not-utf-8"),
        pytest.param(b"return 1\n" + src(), "not valid Python", id="parses-but-does-not-compile"),
    ],
)
def test_rewrite_refused(source: bytes, why: str) -> None:
    outcome = rewrite(source, SPEC)
    assert isinstance(outcome, Refused)
    assert why in outcome.reason


def test_site_fingerprint_ignores_formatting_but_not_code() -> None:
    base = site_of(src(), SPEC)
    reformatted = site_of(
        src().replace(b"get_decompositions([target])", b"get_decompositions( [ target ] )  # c"), SPEC
    )
    recoded = site_of(
        src().replace(b"get_decompositions([target])", b"get_decompositions([target, 1])"), SPEC
    )
    assert not isinstance(base, Refused)
    assert not isinstance(reformatted, Refused)
    assert not isinstance(recoded, Refused)
    assert base.fingerprint == reformatted.fingerprint
    assert base.fingerprint != recoded.fingerprint


@pytest.mark.parametrize(
    ("before", "after", "offset", "old", "new"),
    [
        pytest.param(b"a\nb\nc\n", b"a\nB\nc\n", 2, b"b\n", b"B\n", id="middle-line"),
        pytest.param(b"a\nbxc\n", b"a\nbyc\n", 2, b"bxc\n", b"byc\n", id="inside-a-line"),
        pytest.param(b"x", b"y", 0, b"x", b"y", id="no-newline"),
        pytest.param(b"a\n", b"a\nb\n", 2, b"", b"b\n", id="append"),
        pytest.param(b"a\r\nb\r\n", b"a\r\nc\r\n", 3, b"b\r\n", b"c\r\n", id="crlf"),
    ],
)
def test_line_edit(before: bytes, after: bytes, offset: int, old: bytes, new: bytes) -> None:
    edit = line_edit(before, after)
    assert (edit.offset, edit.old, edit.new) == (offset, old, new)
    assert edit.apply(before) == after
    assert edit.inverted().apply(after) == before


def test_the_argument_text_elsewhere_in_a_comment_is_located_by_ast() -> None:
    """The site's own spelling also in a comment: the byte offset must come from the syntax tree."""
    odd = b"error.operator_str(target,args,kwargs)"
    source = src(odd.decode()).replace(b"class GraphLowering:", b"# " + odd + b"\nclass GraphLowering:")
    outcome = rewrite(source, SPEC)
    assert isinstance(outcome, Rewritten), outcome
    at = source.rindex(odd)
    assert outcome.source == source[:at] + LAZY.encode() + source[at + len(odd) :]
