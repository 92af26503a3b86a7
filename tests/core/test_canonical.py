"""patcher.core.canonical: the site fingerprint's canonical form, written out here for small nodes."""

from __future__ import annotations

import hashlib
import json

import libcst as cst
import pytest

from patcher.core import canonical
from patcher.core.canonical import FORM_VERSION, NODE_FIELDS, Uncovered


@pytest.mark.parametrize(
    ("code", "form"),
    [
        ("x", ["Name", "x"]),
        ("a.b", ["Attribute", ["Name", "a"], ["Name", "b"]]),
        (
            "f(x, k=1)",
            [
                "Call",
                ["Name", "f"],
                [["Arg", "", None, ["Name", "x"]], ["Arg", "", ["Name", "k"], ["Integer", "1"]]],
            ],
        ),
        (
            "f(*a, **k)",
            ["Call", ["Name", "f"], [["Arg", "*", None, ["Name", "a"]], ["Arg", "**", None, ["Name", "k"]]]],
        ),
        ("a if b else c", ["IfExp", ["Name", "b"], ["Name", "a"], ["Name", "c"]]),
        ("not a", ["UnaryOperation", ["Not"], ["Name", "a"]]),
        ("a + 1.5", ["BinaryOperation", ["Name", "a"], ["Add"], ["Float", "1.5"]]),
        (
            "a in [b]",
            [
                "Comparison",
                ["Name", "a"],
                [["ComparisonTarget", ["In"], ["List", [["Element", ["Name", "b"]]]]]],
            ],
        ),
        ("'s' 't'", ["ConcatenatedString", ["SimpleString", "'s'"], ["SimpleString", "'t'"]]),
        (
            "x[1:]",
            ["Subscript", ["Name", "x"], [["SubscriptElement", ["Slice", ["Integer", "1"], None, None]]]],
        ),
        ("lambda: 0", ["Lambda", ["Parameters", [], [], None, [], None], ["Integer", "0"]]),
    ],
)
def test_canonical_form_of_small_expressions(code: str, form: object) -> None:
    assert canonical.canonical(cst.parse_expression(code)) == form


def test_formatting_and_comments_do_not_count() -> None:
    tight = canonical.canonical(cst.parse_expression("f(a,b)"))
    loose = canonical.canonical(cst.parse_expression("f( a ,\n  b ,  # why\n)"))
    assert tight == loose


def test_statements() -> None:
    module = cst.parse_module("if a:\n    pass\nelse:\n    x = 1\n")
    assert canonical.canonical(module.body[0]) == [
        "If",
        ["Name", "a"],
        ["IndentedBlock", [["SimpleStatementLine", [["Pass"]]]]],
        [
            "Else",
            [
                "IndentedBlock",
                [["SimpleStatementLine", [["Assign", [["AssignTarget", ["Name", "x"]]], ["Integer", "1"]]]]],
            ],
        ],
    ]


def test_an_uncovered_node_or_value_is_refused() -> None:
    with pytest.raises(Uncovered) as raised:
        canonical.canonical(cst.parse_expression("(yield)"))
    assert str(raised.value) == f"the canonical form (version {FORM_VERSION}) does not cover `Yield` nodes"
    with pytest.raises(Uncovered) as value:
        canonical._value(3)
    assert str(value.value) == "the canonical form does not cover a field value of type int"
    assert canonical._value(cst.MaybeSentinel.DEFAULT) is None and canonical._value(None) is None
    assert canonical._value(("a", ["b"])) == ["a", ["b"]]


def test_every_listed_field_exists_in_libcst() -> None:
    for kind, fields in NODE_FIELDS.items():
        node_type = getattr(cst, kind)
        names = set(node_type.__dataclass_fields__)
        assert set(fields) <= names, kind


def test_digest_is_sha256_of_the_versioned_json() -> None:
    value = ["Name", "x"]
    text = '{"form":2,"value":["Name","x"]}'
    assert FORM_VERSION == 2
    assert canonical.digest(value) == hashlib.sha256(text.encode()).hexdigest()
    assert (
        canonical.digest({"é": None})
        == hashlib.sha256(
            json.dumps({"form": 2, "value": {"\u00e9": None}}, separators=(",", ":")).encode()
        ).hexdigest()
    )
    assert canonical.digest({"é": None}) == hashlib.sha256(b'{"form":2,"value":{"\\u00e9":null}}').hexdigest()
