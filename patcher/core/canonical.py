"""The site fingerprint's canonical form, defined here rather than by libcst's dataclass layout.

FORM_VERSION names this definition. Each covered node kind lists the fields that carry meaning, in
order; whitespace, commas, parentheses and comments are never listed, so formatting does not count.
A node kind not listed here cannot be fingerprinted (the branch is refused, never guessed at), and a
libcst release that renames a listed field is caught by the tests, which check every field exists
and compute the real releases' fingerprints under the oldest and newest libcst allowed.
"""

from __future__ import annotations

import hashlib
import json

import libcst as cst

FORM_VERSION = 2

# Operators and other leaves: the kind is the whole meaning.
_LEAVES = [
    "Add",
    "And",
    "BitAnd",
    "BitInvert",
    "BitOr",
    "BitXor",
    "Divide",
    "Ellipsis",
    "Equal",
    "FloorDivide",
    "GreaterThan",
    "GreaterThanEqual",
    "In",
    "Is",
    "IsNot",
    "LeftShift",
    "LessThan",
    "LessThanEqual",
    "MatrixMultiply",
    "Minus",
    "Modulo",
    "Multiply",
    "Not",
    "NotEqual",
    "NotIn",
    "Or",
    "Plus",
    "Power",
    "RightShift",
    "Subtract",
    "Pass",
    "Break",
    "Continue",
    "AddAssign",
    "SubtractAssign",
    "MultiplyAssign",
    "DivideAssign",
    "FloorDivideAssign",
    "ModuloAssign",
    "BitOrAssign",
    "BitAndAssign",
    "BitXorAssign",
    "PowerAssign",
    "LeftShiftAssign",
    "RightShiftAssign",
]

NODE_FIELDS: dict[str, tuple[str, ...]] = {
    **{kind: () for kind in _LEAVES},
    # expressions
    "Name": ("value",),
    "Attribute": ("value", "attr"),
    "Call": ("func", "args"),
    "Arg": ("star", "keyword", "value"),
    "SimpleString": ("value",),
    "Integer": ("value",),
    "Float": ("value",),
    "Imaginary": ("value",),
    "ConcatenatedString": ("left", "right"),
    "FormattedString": ("start", "parts", "end"),
    "FormattedStringText": ("value",),
    "FormattedStringExpression": ("expression", "conversion", "format_spec"),
    "Tuple": ("elements",),
    "List": ("elements",),
    "Set": ("elements",),
    "Dict": ("elements",),
    "Element": ("value",),
    "StarredElement": ("value",),
    "DictElement": ("key", "value"),
    "StarredDictElement": ("value",),
    "Subscript": ("value", "slice"),
    "SubscriptElement": ("slice",),
    "Index": ("star", "value"),
    "Slice": ("lower", "upper", "step"),
    "BinaryOperation": ("left", "operator", "right"),
    "BooleanOperation": ("left", "operator", "right"),
    "UnaryOperation": ("operator", "expression"),
    "Comparison": ("left", "comparisons"),
    "ComparisonTarget": ("operator", "comparator"),
    "IfExp": ("test", "body", "orelse"),
    "NamedExpr": ("target", "value"),
    "Await": ("expression",),
    "Lambda": ("params", "body"),
    "Parameters": ("posonly_params", "params", "star_arg", "kwonly_params", "star_kwarg"),
    "Param": ("star", "name", "annotation", "default"),
    "ParamStar": (),
    "ListComp": ("elt", "for_in"),
    "SetComp": ("elt", "for_in"),
    "GeneratorExp": ("elt", "for_in"),
    "DictComp": ("key", "value", "for_in"),
    "CompFor": ("asynchronous", "target", "iter", "ifs", "inner_for_in"),
    "CompIf": ("test",),
    "Asynchronous": (),
    # statements
    "SimpleStatementLine": ("body",),
    "SimpleStatementSuite": ("body",),
    "IndentedBlock": ("body",),
    "Expr": ("value",),
    "Assign": ("targets", "value"),
    "AssignTarget": ("target",),
    "AnnAssign": ("target", "annotation", "value"),
    "Annotation": ("annotation",),
    "AugAssign": ("target", "operator", "value"),
    "Return": ("value",),
    "Raise": ("exc", "cause"),
    "Assert": ("test", "msg"),
    "Del": ("target",),
    "Global": ("names",),
    "Nonlocal": ("names",),
    "NameItem": ("name",),
    "If": ("test", "body", "orelse"),
    "Else": ("body",),
    "For": ("asynchronous", "target", "iter", "body", "orelse"),
    "While": ("test", "body", "orelse"),
    "Try": ("body", "handlers", "orelse", "finalbody"),
    "ExceptHandler": ("type", "name", "body"),
    "Finally": ("body",),
    "With": ("asynchronous", "items", "body"),
    "WithItem": ("item", "asname"),
    "AsName": ("name",),
    "Import": ("names",),
    "ImportFrom": ("relative", "module", "names"),
    "ImportAlias": ("name", "asname"),
    "ImportStar": (),
    "Dot": (),
}

Canonical = str | None | list["Canonical"]


class Uncovered(ValueError):
    """A node kind (or field value) the canonical form does not define."""


def canonical(node: cst.CSTNode) -> Canonical:
    """The node as [kind, field values...], in the order NODE_FIELDS gives."""
    kind = type(node).__name__
    fields = NODE_FIELDS.get(kind)
    if fields is None:
        raise Uncovered(f"the canonical form (version {FORM_VERSION}) does not cover `{kind}` nodes")
    return [kind, *(_value(getattr(node, name)) for name in fields)]


def _value(value: object) -> Canonical:
    if isinstance(value, cst.CSTNode):
        return canonical(value)
    if isinstance(value, (list, tuple)):
        return [_value(item) for item in value]
    if value is None or isinstance(value, cst.MaybeSentinel):
        return None
    if isinstance(value, str):
        return value
    raise Uncovered(f"the canonical form does not cover a field value of type {type(value).__name__}")


def digest(value: object) -> str:
    text = json.dumps({"form": FORM_VERSION, "value": value}, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()
