"""patcher.core.edits: the line-widened byte edit, its inverse, its JSON, and the one-occurrence swap."""

from __future__ import annotations

import pytest

from patcher.core.edits import Edit, _common_prefix, line_edit, swapped


@pytest.mark.parametrize(
    ("before", "after", "offset", "old", "new"),
    [
        pytest.param(b"a\nb\nc\n", b"a\nB\nc\n", 2, b"b\n", b"B\n", id="middle-line"),
        pytest.param(b"a\nbxc\n", b"a\nbyc\n", 2, b"bxc\n", b"byc\n", id="inside-a-line"),
        pytest.param(b"x", b"y", 0, b"x", b"y", id="no-newline"),
        pytest.param(b"a\n", b"a\nb\n", 2, b"", b"b\n", id="append"),
        pytest.param(b"a\nb\n", b"a\n", 2, b"b\n", b"", id="remove-last-line"),
        pytest.param(b"a\r\nb\r\n", b"a\r\nc\r\n", 3, b"b\r\n", b"c\r\n", id="crlf"),
        pytest.param(b"ab\ncd\nef\n", b"ab\ncX\nYf\n", 3, b"cd\nef\n", b"cX\nYf\n", id="two-lines"),
        pytest.param(b"aaa\n", b"aaaa\n", 0, b"aaa\n", b"aaaa\n", id="repeated-bytes"),
        pytest.param(b"abc\nabc\n", b"abc\nabc\n", 8, b"", b"", id="same"),
        pytest.param(b"", b"x\n", 0, b"", b"x\n", id="from-empty"),
        pytest.param(b"q\nab", b"q\nb", 2, b"ab", b"b", id="shorter-last-line"),
        pytest.param(b"a\na\n", b"a\na\na\n", 4, b"", b"a\n", id="a-repeated-line-added"),
        pytest.param(b"\nab\n", b"\nac\n", 1, b"ab\n", b"ac\n", id="after-a-blank-first-line"),
    ],
)
def test_line_edit(before: bytes, after: bytes, offset: int, old: bytes, new: bytes) -> None:
    edit = line_edit(before, after)
    assert (edit.offset, edit.old, edit.new) == (offset, old, new)
    assert edit.apply(before) == after
    assert edit.inverted() == Edit(offset, new, old) and edit.inverted().apply(after) == before


@pytest.mark.parametrize(
    ("a", "b", "n"),
    [
        (b"", b"", 0),
        (b"abc", b"abd", 2),
        (b"abc", b"abc", 3),
        (b"abc", b"ab", 2),
        (b"x", b"y", 0),
        (b"ab", b"abc", 2),
    ],
)
def test_common_prefix(a: bytes, b: bytes, n: int) -> None:
    assert _common_prefix(a, b) == n


def test_an_edit_applies_only_where_its_old_bytes_are() -> None:
    edit = Edit(2, b"cd", b"XYZ")
    assert edit.applies_to(b"abcdef") and edit.apply(b"abcdef") == b"abXYZef"
    assert not edit.applies_to(b"abcXef") and not edit.applies_to(b"abc")
    with pytest.raises(ValueError, match=r"^edit at byte 2 does not match the data$"):
        edit.apply(b"abcXef")
    assert Edit(0, b"", b"x").apply(b"") == b"x"


def test_line_number() -> None:
    data = b"a\nb\nc\n"
    assert [Edit(at, b"", b"").line_number(data) for at in (0, 1, 2, 3, 4, 6)] == [1, 1, 2, 2, 3, 4]
    assert Edit(1, b"", b"").line_number(b"\nx") == 2


def test_json_round_trip_keeps_any_byte() -> None:
    edit = Edit(5, b"\xff\xfe old\n", "é new\n".encode())
    assert edit.to_json() == {"new": "é new\n", "offset": 5, "old": "\udcff\udcfe old\n"}
    assert Edit.from_json(edit.to_json()) == edit
    assert Edit.from_json({"offset": 0, "old": "", "new": ""}) == Edit(0, b"", b"")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ([], "edit is not an object"),
        ({"offset": -1, "old": "", "new": ""}, "edit offset is not a non-negative integer"),
        ({"offset": True, "old": "", "new": ""}, "edit offset is not a non-negative integer"),
        ({"offset": 1.0, "old": "", "new": ""}, "edit offset is not a non-negative integer"),
        ({"old": "", "new": ""}, "edit offset is not a non-negative integer"),
        ({"offset": 0, "old": b"", "new": ""}, "edit old/new are not strings"),
        ({"offset": 0, "old": "", "new": 1}, "edit old/new are not strings"),
        ({"offset": 0, "new": ""}, "edit old/new are not strings"),
    ],
)
def test_from_json_rules(data: object, why: str) -> None:
    with pytest.raises(ValueError) as raised:
        Edit.from_json(data)
    assert str(raised.value) == why


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (b"a OLD b", b"a NEW b"),
        (b"OLD OLD", None),  # twice
        (b"a b", None),  # absent
        (b"OLD NEW", None),  # the new text is there already
        (b"OL D", None),
    ],
)
def test_swapped(source: bytes, expected: bytes | None) -> None:
    assert swapped(source, "OLD", "NEW") == expected
