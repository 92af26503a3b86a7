"""The pure transform, in pairs: what it leaves alone (noop/refused) and what it rewrites."""

from __future__ import annotations

from typing import Any

import pytest

from patcher.core import transform
from patcher.core.outcome import Refused, Rewritten, Unchanged
from patcher.core.spec import PatchSpec
from patcher.core.transform import rewrite, site_of

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
def test_rewrite(spec: PatchSpec, before: bytes, after: bytes) -> None:
    outcome = rewrite(before, spec)
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
def test_rewrite_noop(spec: PatchSpec, source: bytes) -> None:
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Unchanged)
    assert outcome.site.lazy


@pytest.mark.parametrize(
    ("source", "why"),
    [
        pytest.param(src("error.operator_str(target, args)"), "passes no `", id="other-arguments"),
        pytest.param(src(EAGER + ", extra"), "log call differs", id="extra-argument"),
        pytest.param(
            src().replace(b"Creating implicit", b"Making implicit"), "log call differs", id="other-text"
        ),
        pytest.param(src().replace(b"log.info(", b"log.warning("), "log call differs", id="other-level"),
        pytest.param(
            src().replace(b"def call_function", b"def call_function_impl"),
            "`GraphLowering.call_function` passes no",
            id="moved-out",
        ),
        pytest.param(
            src().replace(b"class GraphLowering", b"class OtherLowering"),
            "`GraphLowering.call_function` passes no",
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
def test_rewrite_refused(spec: PatchSpec, source: bytes, why: str) -> None:
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Refused)
    assert why in outcome.reason


def test_site_fingerprint_ignores_formatting_but_not_code(spec: PatchSpec) -> None:
    base = site_of(src(), spec)
    reformatted = site_of(
        src().replace(b"get_decompositions([target])", b"get_decompositions( [ target ] )  # c"), spec
    )
    recoded = site_of(
        src().replace(b"get_decompositions([target])", b"get_decompositions([target, 1])"), spec
    )
    assert not isinstance(base, Refused)
    assert not isinstance(reformatted, Refused)
    assert not isinstance(recoded, Refused)
    assert base.fingerprint == reformatted.fingerprint
    assert base.fingerprint != recoded.fingerprint


def test_the_argument_text_elsewhere_in_a_comment_is_located_by_ast(spec: PatchSpec) -> None:
    """The site's own spelling also in a comment: the byte offset must come from the syntax tree."""
    odd = b"error.operator_str(target,args,kwargs)"
    source = src(odd.decode()).replace(b"class GraphLowering:", b"# " + odd + b"\nclass GraphLowering:")
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Rewritten), outcome
    at = source.rindex(odd)
    assert outcome.source == source[:at] + LAZY.encode() + source[at + len(odd) :]


ODD = "error.operator_str(target,args,kwargs)"  # the site's own spelling: libcst's text of the argument


def _odd_site(extra_before: bytes = b"", extra_after: bytes = b"", tail: bytes = b"") -> bytes:
    source = src(ODD).replace(b"class GraphLowering:", extra_before + b"class GraphLowering:")
    return (
        source.replace(
            b"                make_fallback(target)\n",
            b"                make_fallback(target)\n" + extra_after,
        )
        + tail
    )


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(_odd_site(extra_before=b"# " + ODD.encode() + b"\n"), id="comment-before"),
        pytest.param(_odd_site(extra_after=b"                # " + ODD.encode() + b"\n"), id="comment-after"),
        pytest.param(_odd_site(tail=b"# " + ODD.encode() + b"\n"), id="comment-at-the-end"),
        pytest.param(
            _odd_site(tail=b"\n\ndef other():\n    y = " + ODD.encode() + b"\n"), id="expression-after"
        ),
        pytest.param(_odd_site(extra_before=b"x = " + ODD.encode() + b"\n"), id="expression-before"),
        pytest.param(
            _odd_site(extra_after=b'                s = "' + ODD.encode() + b'"\n'),
            id="string-after-in-scope",
        ),
        pytest.param(
            _odd_site(tail=b"# " + ODD.encode() + b"\n").replace(b"\n", b"\r\n"), id="comment-after-crlf"
        ),
        pytest.param(
            _odd_site(tail=b"# " + ODD.encode() + b"\n").replace(b"\n", b"\r"), id="comment-after-cr-only"
        ),
        pytest.param(
            b"\xef\xbb\xbf" + _odd_site(tail=b"# " + ODD.encode() + b"\n"), id="comment-after-with-bom"
        ),
        pytest.param(
            b"# -*- coding: latin-1 -*-\n# \xe9\n" + _odd_site(tail=b"# \xe9 " + ODD.encode() + b"\n"),
            id="comment-after-latin-1",
        ),
    ],
)
def test_the_argument_text_elsewhere_is_located_by_ast(spec: PatchSpec, source: bytes) -> None:
    """The call site found with its argument's text elsewhere in the file, before or after it."""
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Rewritten), outcome
    head = b"                    "
    at = source.index(head + ODD.encode()) + len(head)  # the one at the call site
    assert outcome.source == source[:at] + LAZY.encode() + source[at + len(ODD) :]


def test_the_same_expression_twice_in_the_scope_is_refused(spec: PatchSpec) -> None:
    source = _odd_site(extra_after=b"                y = " + ODD.encode() + b"\n")
    assert rewrite(source, spec) == Refused(
        f"the argument `{EAGER}` could not be located by its byte offsets"
    )


def test_an_ambiguous_scope_is_refused(spec: PatchSpec) -> None:
    source = _odd_site(tail=b"# " + ODD.encode() + b"\n" + b"\n\nclass GraphLowering:\n    pass\n")
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Refused)
    assert outcome.reason in (
        f"the argument `{EAGER}` could not be located by its byte offsets",
        "the argument `error.operator_str(target, args, kwargs)` (or its lazy form) occurs 2 times; expected once",
    )


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        pytest.param(
            src("error.operator_str(target, args)"),
            f"`GraphLowering.call_function` passes no `{EAGER}` (nor its lazy form) to `log.info`",
            id="absent",
        ),
        pytest.param(
            src() + b"\n\ndef other():\n    x(" + LAZY.encode() + b")\n",
            f"the argument `{EAGER}` (or its lazy form) occurs 2 times; expected once",
            id="lazy-elsewhere",
        ),
        pytest.param(
            src()
            .replace(b"        if target not in lowerings:\n", b"        if True:\n")
            .replace(b"            elif config.implicit_fallbacks:\n", b"            if 1:\n"),
            None,
            id="other-branch-still-a-branch",
        ),
        pytest.param(
            src().replace(
                b"from torch._logging import LazyString, trace_structured", b"from torch._logging import *"
            ),
            "graph.py does not import `LazyString` from `torch._logging` at module level",
            id="star-import",
        ),
        pytest.param(
            src().replace(b"from torch._logging import", b"from ._logging import"),
            "graph.py does not import `LazyString` from `torch._logging` at module level",
            id="relative-import",
        ),
        pytest.param(
            src().replace(b"from torch._logging import", b"from torch.logging import"),
            "graph.py does not import `LazyString` from `torch._logging` at module level",
            id="other-module",
        ),
        pytest.param(
            src().replace(
                b"from torch._logging import LazyString, trace_structured",
                b"if 1:\n    from torch._logging import LazyString",
            ),
            "graph.py does not import `LazyString` from `torch._logging` at module level",
            id="not-at-module-level",
        ),
        pytest.param(
            src().replace(
                b"from torch._logging import LazyString, trace_structured",
                b"x = 1; from torch._logging import LazyString",
            ),
            None,
            id="import-after-another-statement",
        ),
        pytest.param(
            src().replace(
                b"from torch._logging import LazyString, trace_structured",
                b"import os\nfrom torch._logging import LazyString as LazyString",
            ),
            None,
            id="import-as-itself",
        ),
        pytest.param(
            src().replace(
                b"from torch._logging import LazyString, trace_structured",
                b"from torch._logging import trace_structured as LazyString",
            ),
            "graph.py does not import `LazyString` from `torch._logging` at module level",
            id="another-name-bound",
        ),
    ],
)
def test_refusal_reasons(spec: PatchSpec, source: bytes, reason: str | None) -> None:
    outcome = rewrite(source, spec)
    if reason is None:
        assert isinstance(outcome, Rewritten) and outcome.source == lazy(source)
    else:
        assert isinstance(outcome, Refused) and outcome.reason == reason
        # a missing import is the cause the command line names a release series for (2.0.x, 2.1.x)
        assert outcome.cause == ("import" if "does not import" in reason else "site"), outcome


def test_a_call_not_inside_a_branch_is_refused(spec: PatchSpec) -> None:
    source = b"""from torch._logging import LazyString


class GraphLowering:
    def call_function(self, target, args, kwargs):
        log.info(
            "Creating implicit fallback for:\\n%s",
            error.operator_str(target, args, kwargs),
        )
"""
    assert rewrite(source, spec) == Refused("the log call is not inside an `if`/`elif` branch")
    # a differing call with no branch to diff: the reason says what was expected and found, and the
    # form it was found in
    lazy_warned = rewrite(lazy(source).replace(b"log.info(", b"log.warning("), spec)
    assert isinstance(lazy_warned, Refused) and (lazy_warned.lazy, lazy_warned.branch) == (True, None)
    assert rewrite(source.replace(b"log.info(", b"log.warning("), spec) == Refused(
        'the log call differs from the known one: expected `log.info("Creating implicit fallback for:\\n%s", '
        f'{EAGER})`, found `log.warning( "Creating implicit fallback for:\\n%s", {EAGER}, )`'
    )


def test_the_call_found_is_the_one_the_argument_is_passed_to(spec: PatchSpec) -> None:
    """A call made before the argument, among the log call's own arguments, is not its call."""
    source = b"""from torch._logging import LazyString


class GraphLowering:
    def call_function(self, target, args, kwargs):
        log.info(str("Creating implicit fallback for:\\n%s"), error.operator_str(target, args, kwargs))
"""
    assert rewrite(source, spec) == Refused(
        'the log call differs from the known one: expected `log.info("Creating implicit fallback for:\\n%s", '
        f'{EAGER})`, found `log.info(str("Creating implicit fallback for:\\n%s"), {EAGER})`'
    )


def test_a_differing_call_names_what_was_expected_and_found(spec: PatchSpec) -> None:
    outcome = rewrite(src().replace(b"log.info(", b"log.warning("), spec)
    assert isinstance(outcome, Refused)
    # in a branch, its diff against the nearest release says what differs; the reason stays short
    assert outcome.reason == "the log call differs from the known one"
    assert not outcome.lazy and outcome.branch is not None
    assert outcome.branch.startswith("if config.implicit_fallbacks:\n    error = (\n")
    lazy_outcome = rewrite(lazy(src()).replace(b"log.info(", b"log.warning("), spec)
    assert isinstance(lazy_outcome, Refused) and lazy_outcome.lazy
    bare = rewrite(
        src()
        .replace(b"                log.info(\n", b"                (\n")
        .replace(b'\\n%s",\n', b'\\n%s",\n', 1),
        spec,
    )
    assert isinstance(bare, Refused)


@pytest.mark.parametrize(
    ("scope_change", "found"),
    [
        (b"    def call_function(self, target, args, kwargs):\n", True),
        (
            b"    def call_function(self, target, args, kwargs):\n        def call_function():\n",
            False,
        ),  # nested
        (b"    def other(self):\n        pass\n\n    def call_function(self, target, args, kwargs):\n", True),
        (b"    class Inner:\n        pass\n\n    def call_function(self, target, args, kwargs):\n", True),
    ],
    ids=["plain", "nested-same-name", "after-another-method", "after-a-nested-class"],
)
def test_only_the_scope_is_entered(spec: PatchSpec, scope_change: bytes, found: bool) -> None:
    source = src().replace(b"    def call_function(self, target, args, kwargs):\n", scope_change)
    if b"def call_function():" in scope_change:
        source = source.replace(b"\n        if target", b"\n            if target").replace(
            b"\n            ", b"\n                "
        )
    outcome = site_of(source, spec)
    assert isinstance(outcome, Refused) != found, outcome


def test_site_of_gives_the_branch_and_its_form(spec: PatchSpec) -> None:
    eager, lazy_site = site_of(src(), spec), site_of(src(LAZY), spec)
    assert not isinstance(eager, Refused) and not isinstance(lazy_site, Refused)
    assert (eager.lazy, lazy_site.lazy) == (False, True)
    assert eager.code == (
        "if config.implicit_fallbacks:\n"
        "    error = (\n"
        "        MissingOperatorWithDecomp\n"
        "        if get_decompositions([target])\n"
        "        else MissingOperatorWithoutDecomp\n"
        "    )\n"
        "    log.info(\n"
        '        "Creating implicit fallback for:\\n%s",\n'
        f"        {EAGER},\n"
        "    )\n"
        "    make_fallback(target)\n"
    )
    assert len(eager.fingerprint) == 64 and eager.fingerprint != lazy_site.fingerprint
    other_scope = site_of(src(), spec._replace(scope="GraphLowering.call_function"))
    assert not isinstance(other_scope, Refused) and other_scope.fingerprint == eager.fingerprint
    assert site_of(b"x = (\n", spec) == rewrite(b"x = (\n", spec)


def test_an_uncovered_node_in_the_branch_is_refused(spec: PatchSpec) -> None:
    source = src().replace(b"                make_fallback(target)\n", b"                yield target\n")
    outcome = site_of(source, spec)
    assert outcome == Refused(
        "its implicit-fallback branch cannot be fingerprinted: "
        "the canonical form (version 2) does not cover `Yield` nodes"
    )


def test_a_call_of_operator_str_that_cannot_be_fingerprinted_is_not_the_site(spec: PatchSpec) -> None:
    source = src().replace(
        b"                make_fallback(target)\n            elif",
        b"                make_fallback(error.operator_str(target, (yield)))\n            elif",
    )
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Rewritten) and outcome.source == lazy(source)


def test_what_libcst_accepts_and_ast_does_not_is_refused(spec: PatchSpec) -> None:
    import ast

    source = _odd_site(tail=b"# \x00 " + ODD.encode() + b"\n")
    try:  # the oracle: this Python's own words (a ValueError before 3.11, a SyntaxError since)
        ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    assert rewrite(source, spec) == Refused(f"graph.py is not valid Python ({why})")


def test_the_compile_check_does_not_inherit_the_tools_future_imports(spec: PatchSpec) -> None:
    """Under `from __future__ import annotations` a yield in an annotation is an error; not in graph.py."""
    source = src() + b"\n\ndef g():\n    x: (yield) = 1\n"
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Rewritten) and outcome.source == lazy(source)


def test_two_in_the_scope_are_counted_exactly(spec: PatchSpec) -> None:
    at = src().rindex(b"make_fallback(target)")  # the call after the log line, in the branch
    source = src()[:at] + b"print(" + EAGER.encode() + b")" + src()[at + len(b"make_fallback(target)") :]
    assert rewrite(source, spec) == Refused(
        f"the argument `{EAGER}` (or its lazy form) occurs 2 times; expected once"
    )


def test_the_argument_as_a_class_base_is_no_call(spec: PatchSpec) -> None:
    source = (
        b"from torch._logging import LazyString\n\n\nclass GraphLowering("
        + EAGER.encode()
        + b"):\n    pass\n"
    )
    assert rewrite(source, spec) == Refused(
        "the log call differs from the known one: expected "
        f'`log.info("Creating implicit fallback for:\\n%s", {EAGER})`, found `no call`',
        None,
        False,
    )


BRANCHED = (
    TEMPLATE.replace(
        "            elif config.implicit_fallbacks:\n",
        "            # why\n            elif config.implicit_fallbacks:\n",
    )
    + "            else:\n                pass\n"
)


def test_the_branch_is_shown_without_what_precedes_or_follows_it(spec: PatchSpec) -> None:
    site = site_of(src(template=BRANCHED), spec)
    assert not isinstance(site, Refused)
    assert site.code.startswith("if config.implicit_fallbacks:\n") and site.code.endswith(
        "    make_fallback(target)\n"
    )
    refused = rewrite(src(template=BRANCHED).replace(b"log.info(", b"log.warning("), spec)
    assert isinstance(refused, Refused) and refused.branch is not None
    assert refused.branch.startswith("if config.implicit_fallbacks:\n")
    assert refused.branch.endswith("    make_fallback(target)\n")


@pytest.mark.parametrize(
    ("imports", "rewritten"),
    [
        (b"if 1:\n    pass\nfrom torch._logging import LazyString", True),  # after a compound statement
        (b"from os import path; from torch._logging import LazyString", True),
        (b"from . import LazyString", False),
        (b"from .torch._logging import LazyString", False),
    ],
    ids=["after-compound", "after-another-import", "relative-no-module", "relative-same-name"],
)
def test_which_imports_count(spec: PatchSpec, imports: bytes, rewritten: bool) -> None:
    source = src().replace(b"from torch._logging import LazyString, trace_structured", imports)
    outcome = rewrite(source, spec)
    if rewritten:
        assert isinstance(outcome, Rewritten) and outcome.source == lazy(source)
    else:
        assert outcome == Refused(
            "graph.py does not import `LazyString` from `torch._logging` at module level", cause="import"
        )


def test_a_libcst_syntax_error_names_its_first_line(spec: PatchSpec) -> None:
    import libcst as cst

    bad = b"x = (\n"
    try:
        cst.parse_module(bad)
    except cst.ParserSyntaxError as exc:
        first = str(exc).splitlines()[0]
    assert rewrite(bad, spec) == Refused(f"graph.py is not valid Python (ParserSyntaxError: {first})")


def test_the_fingerprint_is_the_digest_of_scope_test_and_body(spec: PatchSpec) -> None:
    import hashlib
    import json

    import libcst as cst

    from patcher.core.canonical import canonical

    module = cst.parse_module(src())
    node: Any = module.body[1]  # class GraphLowering > def call_function > if target ... > elif
    branch = node.body.body[0].body.body[0].body.body[0].orelse
    shape = {"scope": spec.scope, "test": canonical(branch.test), "body": canonical(branch.body)}
    text = json.dumps({"form": 2, "value": shape}, separators=(",", ":"))
    site = site_of(src(), spec)
    assert not isinstance(site, Refused) and site.fingerprint == hashlib.sha256(text.encode()).hexdigest()


def test_a_compile_error_names_the_file_and_line(spec: PatchSpec) -> None:
    assert rewrite(b"return 1\n" + src(), spec) == Refused(
        "graph.py is not valid Python (SyntaxError: 'return' outside function (graph.py, line 1))"
    )


def test_an_uncovered_branch_is_refused_by_rewrite_too(spec: PatchSpec) -> None:
    source = src().replace(b"                make_fallback(target)\n", b"                yield target\n")
    assert rewrite(source, spec) == site_of(source, spec)
    assert isinstance(rewrite(source, spec), Refused)


def test_a_unique_argument_needs_no_ast(spec: PatchSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its one occurrence is where libcst found it: ast is not asked where it is."""

    def unasked(*args: object) -> object:
        raise AssertionError("ast was asked")

    monkeypatch.setattr(transform, "_span", unasked)
    outcome = rewrite(src(), spec)
    assert isinstance(outcome, Rewritten), outcome
    assert outcome.source == lazy(src()) and outcome.before == site_of(src(), spec)


def test_a_nested_function_inside_the_scope_is_not_entered(spec: PatchSpec) -> None:
    source = src().replace(
        b"        if target not in lowerings:\n",
        b'        def helper():\n            log.info("x", '
        + EAGER.encode()
        + b")\n\n        if target not in lowerings:\n",
    )
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Refused) and "occurs 2 times" in outcome.reason  # found once, seen twice


def test_a_method_defined_twice_is_entered_each_time(spec: PatchSpec) -> None:
    source = src().replace(
        b"    def call_function(self, target, args, kwargs):\n",
        b"    def call_function(self):\n        pass\n\n    def call_function(self, target, args, kwargs):\n",
    )
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Rewritten) and outcome.source == lazy(source)


def test_the_innermost_branch_is_the_site(spec: PatchSpec) -> None:
    nested = src().replace(
        b"        if target not in lowerings:\n", b"        if True:\n          if target not in lowerings:\n"
    )
    nested = nested.replace(b"\n            ", b"\n              ")
    site = site_of(nested, spec)
    assert not isinstance(site, Refused) and site.code.startswith("if config.implicit_fallbacks:\n")


@pytest.mark.parametrize(
    "line",
    [b"print(" + ODD.encode() + b")\n", b"y = print(" + ODD.encode() + b")\n"],
    ids=["call-statement", "assignment-of-a-call"],
)
def test_statements_outside_the_scope_are_not_entered(spec: PatchSpec, line: bytes) -> None:
    source = _odd_site(extra_before=line)
    outcome = rewrite(source, spec)
    assert isinstance(outcome, Rewritten), outcome
    head = b"                    "
    at = source.index(head + ODD.encode()) + len(head)
    assert outcome.source == source[:at] + LAZY.encode() + source[at + len(ODD) :]


def test_an_argument_over_several_lines_is_refused(spec: PatchSpec) -> None:
    """libcst renders a multi-line argument without its indentation: its bytes are not found."""
    source = src("error.operator_str(\n                        target, args, kwargs\n                    )")
    assert rewrite(source, spec) == Refused(
        f"the argument `{EAGER}` could not be located by its byte offsets"
    )
