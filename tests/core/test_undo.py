"""patcher.core.undo: the undo record's bytes, and every rule of its validation, each with its message."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from patcher.core import undo
from patcher.core.edits import Edit
from patcher.core.undo import FileChange, FileState, UndoRecord
from tests.core import world
from tests.core.world import PATCHED, RECORD_ROW, ROW, SOURCE, sha


def _record() -> bytes:
    return world.applied()[2]


def _parse(raw: bytes, record_path: str | None = RECORD_ROW) -> UndoRecord:
    return UndoRecord.parse(raw, world.PATCH_ID, ROW, record_path)


def test_a_record_reads_back_field_by_field() -> None:
    parsed = _parse(_record())
    offset, old = world.line_of(SOURCE, world.EAGER)
    assert parsed.patch_id == world.PATCH_ID and (parsed.release, parsed.match) == ("9.0.0", "exact")
    assert parsed.graph_change == FileChange(
        ROW,
        FileState(sha(SOURCE), len(SOURCE)),
        FileState(sha(PATCHED), len(PATCHED)),
        Edit(offset, old, old.replace(world.EAGER, world.LAZY)),
        0o644,
        world.GRAPH_STAT.mtime_ns,
    )
    assert parsed.record_change is not None and parsed.record_change.path == RECORD_ROW
    assert (
        parsed.record_change.mode == world.RECORD_STAT.mode
        and parsed.record_change.mtime_ns == world.RECORD_STAT.mtime_ns
    )
    assert parsed.to_bytes() == _record()  # written back byte for byte: sorted keys, indent 2, a newline


def test_to_bytes_is_ascii_json_with_stable_keys() -> None:
    edit = Edit(3, "é\udcff".encode("utf-8", "surrogateescape"), b"x")
    change = FileChange(ROW, FileState("a" * 64, 9), FileState("b" * 64, 10 - len(edit.old)), edit, 0o600, -5)
    raw = UndoRecord("p", "r", "site", change, None).to_bytes()
    expected = {
        "graph": {
            "after": {"sha256": "b" * 64, "size": 10 - len(edit.old)},
            "before": {"sha256": "a" * 64, "size": 9},
            "edit": {"new": "x", "offset": 3, "old": "\u00e9\udcff"},
            "mode": 0o600,
            "mtime_ns": -5,
            "path": ROW,
        },
        "match": "site",
        "patch": "p",
        "record": None,
        "release": "r",
        "tool": "torch-lazylog",
        "version": 1,
    }
    assert raw == (json.dumps(expected, indent=2, sort_keys=True) + "\n").encode("ascii")
    assert UndoRecord.parse(raw, "p", ROW, None).graph_change.edit == edit  # any byte round-trips


def test_the_record_part_is_read_only_where_a_record_is() -> None:
    assert _parse(_record(), None).record_change is None  # no RECORD beside torch: its part is ignored
    data = json.loads(_record())
    data["record"] = None
    assert _parse(json.dumps(data).encode()).record_change is None


Damage = Callable[[dict[str, Any]], None]


def _set(path: str, value: object) -> Damage:
    def damage(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for name in parents:
            node = node[name]
        node[last] = value

    return damage


def _drop(path: str) -> Damage:
    def damage(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for name in parents:
            node = node[name]
        del node[last]

    return damage


RULES: list[tuple[str, Damage, str]] = [
    ("tool", _set("tool", "other-tool"), "it is 'other-tool' version 1, expected 'torch-lazylog' version 1"),
    ("no-tool", _drop("tool"), "it is None version 1, expected 'torch-lazylog' version 1"),
    ("version", _set("version", 2), "it is 'torch-lazylog' version 2, expected 'torch-lazylog' version 1"),
    ("version-text", _set("version", "1"), "it is 'torch-lazylog' version '1', expected"),
    ("version-zero", _set("version", 0), "it is 'torch-lazylog' version 0, expected"),
    ("version-bool", _set("version", True), "it is 'torch-lazylog' version True, expected"),
    ("version-float", _set("version", 1.0), "it is 'torch-lazylog' version 1.0, expected"),
    ("patch", _set("patch", "another"), "it is for patch 'another', expected 'lazy-implicit-fallback'"),
    ("release", _set("release", 7), "its release or match is not valid"),
    ("match", _set("match", "fuzzy"), "its release or match is not valid"),
    ("no-match", _drop("match"), "its release or match is not valid"),
    ("graph", _set("graph", []), "file change is not an object"),
    ("path", _set("graph.path", "../graph.py"), f"it names '../graph.py' where '{ROW}' was expected"),
    ("mode-text", _set("graph.mode", "644"), f"the mode of {ROW} is not valid"),
    ("mode-bool", _set("graph.mode", True), f"the mode of {ROW} is not valid"),
    ("mode-negative", _set("graph.mode", -1), f"the mode of {ROW} is not valid"),
    ("mode-too-big", _set("graph.mode", 0o10000), f"the mode of {ROW} is not valid"),
    ("mtime-bool", _set("graph.mtime_ns", True), f"the mtime of {ROW} is not valid"),
    ("mtime-float", _set("graph.mtime_ns", 1.5), f"the mtime of {ROW} is not valid"),
    ("state", _set("graph.after", "x"), "file state is not an object"),
    ("hash-not-hex", _set("graph.before.sha256", "x" * 64), "sha256 is not 64 lowercase hex digits"),
    ("hash-upper", _set("graph.before.sha256", "A" * 64), "sha256 is not 64 lowercase hex digits"),
    ("hash-short", _set("graph.before.sha256", "a" * 63), "sha256 is not 64 lowercase hex digits"),
    ("hash-long", _set("graph.before.sha256", "a" * 65), "sha256 is not 64 lowercase hex digits"),
    ("hash-number", _set("graph.before.sha256", 7), "sha256 is not 64 lowercase hex digits"),
    ("size-negative", _set("graph.after.size", -1), "size is not a non-negative integer"),
    ("size-bool", _set("graph.after.size", False), "size is not a non-negative integer"),
    ("size-text", _set("graph.after.size", "1"), "size is not a non-negative integer"),
    ("edit", _set("graph.edit", "x"), "edit is not an object"),
    ("offset-negative", _set("graph.edit.offset", -1), "edit offset is not a non-negative integer"),
    ("offset-bool", _set("graph.edit.offset", True), "edit offset is not a non-negative integer"),
    ("offset-text", _set("graph.edit.offset", "1"), "edit offset is not a non-negative integer"),
    ("old", _set("graph.edit.old", 1), "edit old/new are not strings"),
    ("new", _set("graph.edit.new", None), "edit old/new are not strings"),
    ("sizes", _set("graph.edit.new", "x" * 99), f"the edit of {ROW} does not account for its sizes"),
    ("record-path", _set("record.path", "RECORD"), f"it names 'RECORD' where '{RECORD_ROW}' was expected"),
    (
        "record-sizes",
        _set("record.after.size", 1),
        f"the edit of {RECORD_ROW} does not account for its sizes",
    ),
]


@pytest.mark.parametrize(("damage", "why"), [(d, w) for _, d, w in RULES], ids=[n for n, _, _ in RULES])
def test_every_rule_of_the_validation(damage: Damage, why: str) -> None:
    data = json.loads(_record())
    damage(data)
    with pytest.raises(ValueError) as raised:
        _parse(json.dumps(data).encode())
    assert str(raised.value).startswith(why)


@pytest.mark.parametrize(
    ("mode", "mtime"), [(0, 0), (0o7777, -1), (0o644, 2**70)], ids=["lowest", "highest", "any-mtime"]
)
def test_the_bounds_that_are_valid(mode: int, mtime: int) -> None:
    data = json.loads(_record())
    data["graph"].update(mode=mode, mtime_ns=mtime)
    data["graph"]["after"]["size"] = data["graph"]["before"]["size"] + 12  # sizes still add up
    data["graph"]["before"]["size"] = 0
    data["graph"]["after"]["size"] = 12
    parsed = _parse(json.dumps(data).encode())
    assert (parsed.graph_change.mode, parsed.graph_change.mtime_ns) == (mode, mtime)
    assert (parsed.graph_change.before.size, parsed.graph_change.after.size) == (0, 12)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"{not json", "it is not JSON (Expecting property name"),
        (b"\xff\xfe{", "it is not JSON ("),
        (b"[" * 100_000, "it is not JSON ("),
        (b"[]", "it is not a JSON object"),
        (b'"text"', "it is not a JSON object"),
    ],
    ids=["syntax", "not-text", "too-deep", "list", "string"],
)
def test_what_is_not_a_json_object(raw: bytes, why: str) -> None:
    with pytest.raises(ValueError) as raised:
        _parse(raw)
    assert str(raised.value).startswith(why)


def _with(**fields: object) -> bytes:
    data = json.loads(_record())
    data.update(fields)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("raw", "version"),
    [
        (_with(version=2), 2),
        (_with(version=7, graph="a later shape"), 7),
        (_with(version=1), None),
        (_with(version=True), None),
        (_with(version="2"), None),
        (_with(version=2.5), None),
        (_with(version=2, tool="other-tool"), None),
        (b"{not json", None),
        (b"[2]", None),
    ],
    ids=[
        "next",
        "any-later-shape",
        "this",
        "bool",
        "text",
        "float",
        "other-tool",
        "not-json",
        "not-an-object",
    ],
)
def test_a_newer_tool_s_record_is_told_apart_from_damage(raw: bytes, version: int | None) -> None:
    assert undo.newer(raw) == version


def test_every_version_from_the_oldest_to_this_one_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A later tool reads the records of every version before its own, as they were written."""
    monkeypatch.setattr(undo, "UNDO_VERSION", 3)
    for version in (1, 2, 3):
        assert _parse(_with(version=version)).graph_change == _parse(_record()).graph_change
    assert undo.newer(_with(version=3)) is None and undo.newer(_with(version=4)) == 4
    with pytest.raises(ValueError, match="version 4, expected 'torch-lazylog' version 3"):
        _parse(_with(version=4))
    monkeypatch.setattr(undo, "OLDEST_VERSION", 2)
    with pytest.raises(ValueError, match="version 1, expected"):
        _parse(_with(version=1))
