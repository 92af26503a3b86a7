"""patcher.core.record's row matching in every form the spec allows, without files: a path relative to
the directory holding the dist-info or absolute, any lexical spelling of it; no symlink followed."""

from __future__ import annotations

import pytest

from patcher.core import record

SITE = "/prefix/lib/python3/site-packages"
GRAPH = "torch/_inductor/graph.py"
UNDO = "torch-2.10.0.dist-info/torch_lazylog.json"
HASH = record.hash_field("sha256", b"old")


def _record(*paths: str, newline: bytes = b"\n") -> bytes:
    lines = [f"torch/fx/graph.py,{HASH},3".encode()]
    lines += [f"{path},{HASH},3".encode() for path in paths]
    lines += [b"torch-2.10.0.dist-info/RECORD,,"]
    return newline.join(lines) + newline


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param(GRAPH, id="plain"),
        pytest.param(f"./{GRAPH}", id="dot"),
        pytest.param(f"../site-packages/{GRAPH}", id="through-parent"),
        pytest.param("torch/_inductor/../_inductor/graph.py", id="dotdot-inside"),
        pytest.param(f"{SITE}/{GRAPH}", id="absolute"),
        pytest.param(f"{SITE}//torch/./_inductor/graph.py", id="absolute-unnormalised"),
    ],
)
def test_same(spelling: str) -> None:
    assert record.same(spelling, GRAPH, SITE)


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param("torch/fx/graph.py", id="another-file"),
        pytest.param(f"link/{GRAPH}", id="through-a-link-is-another-path"),
        pytest.param(f"/elsewhere/{GRAPH}", id="absolute-elsewhere"),
        pytest.param(f"../other/{GRAPH}", id="through-another-parent"),
        pytest.param("", id="empty"),
        pytest.param(f"{GRAPH}/x", id="below"),
    ],
)
def test_same_noop(spelling: str) -> None:
    assert not record.same(spelling, GRAPH, SITE)


def test_same_without_base_matches_only_relative_spellings() -> None:
    assert record.same(f"./{GRAPH}", GRAPH, "")
    assert not record.same(f"{SITE}/{GRAPH}", GRAPH, "")


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("spelling", [f"{SITE}/{GRAPH}", f"./{GRAPH}", f"../site-packages/{GRAPH}"])
def test_rows_finds_the_row_and_keeps_its_text(spelling: str, newline: bytes) -> None:
    data = _record(spelling, newline=newline)
    (row,) = record.rows(data, GRAPH, SITE)
    assert row.path == spelling and row.hash == HASH and row.size == "3"
    assert data[row.offset : row.offset + len(row.line)] == row.line
    assert row.line.endswith(newline)


def test_rows_of_two_spellings_are_two_rows() -> None:
    data = _record(GRAPH, f"{SITE}/{GRAPH}")
    assert [r.path for r in record.rows(data, GRAPH, SITE)] == [GRAPH, f"{SITE}/{GRAPH}"]
    assert record.fit(record.rows(data, GRAPH, SITE), b"old") == "duplicate"


def test_fit_and_names_through_an_absolute_row() -> None:
    data = _record(f"{SITE}/{GRAPH}")
    assert record.fit(record.rows(data, GRAPH, SITE), b"old") == "current"
    assert record.fit(record.rows(data, GRAPH, SITE), b"new") == "other"
    assert record.fit(record.rows(data, GRAPH, ""), b"old") == "missing"
    assert record.names(record.rows(data, GRAPH, SITE), b"old")
    assert not record.names(record.rows(data, GRAPH, SITE), b"new")


@pytest.mark.parametrize("spelling", [f"{SITE}/{GRAPH}", f"./{GRAPH}", f"../site-packages/{GRAPH}"])
def test_pointed_keeps_the_rows_form(spelling: str) -> None:
    data = _record(spelling, newline=b"\r\n")
    new = record.pointed(data, record.rows(data, GRAPH, SITE)[0], b"newer", add=UNDO, drop=None, base=SITE)
    lines = new.split(b"\r\n")
    at = lines.index(f"{spelling},{record.hash_field('sha256', b'newer')},5".encode())
    assert lines[at + 1] == f"{UNDO},,".encode()  # the undo row: relative, right after graph.py's
    assert new.replace(lines[at] + b"\r\n" + lines[at + 1], f"{spelling},{HASH},3".encode()) == data


@pytest.mark.parametrize("spelling", [f"{SITE}/{UNDO}", f"./{UNDO}"])
def test_pointed_adds_no_undo_row_listed_in_another_form(spelling: str) -> None:
    data = _record(GRAPH, spelling)
    new = record.pointed(data, record.rows(data, GRAPH, SITE)[0], b"newer", add=UNDO, drop=None, base=SITE)
    assert new.count(b"torch_lazylog.json") == 1


@pytest.mark.parametrize("spelling", [f"{SITE}/{UNDO}", f"./{UNDO}", UNDO])
def test_without_removes_every_form(spelling: str) -> None:
    data = _record(GRAPH, spelling)
    assert record.without(data, UNDO, SITE) == _record(GRAPH)
    assert record.pointed(
        data, record.rows(data, GRAPH, SITE)[0], b"old", add=None, drop=UNDO, base=SITE
    ) == _record(GRAPH)


def test_without_noop_for_another_file() -> None:
    data = _record(GRAPH, f"/elsewhere/{UNDO}")
    assert record.without(data, UNDO, SITE) == data


def test_rows_answers_each_record_by_its_own_bytes() -> None:
    """Each RECORD is answered by its own bytes and base, whatever was asked before."""
    first = _record(GRAPH)
    assert [r.path for r in record.rows(first, GRAPH, SITE)] == [GRAPH]
    answer = record.rows(first, GRAPH, SITE)
    answer.clear()  # a caller's list is its own
    assert len(record.rows(first, GRAPH, SITE)) == 1
    second = _record(f"./{GRAPH}", f"{SITE}/{GRAPH}")
    assert [r.path for r in record.rows(second, GRAPH, SITE)] == [f"./{GRAPH}", f"{SITE}/{GRAPH}"]
    assert [r.path for r in record.rows(second, GRAPH, "")] == [f"./{GRAPH}"]  # another base: asked anew
    assert [r.path for r in record.rows(first, GRAPH, SITE)] == [GRAPH]
