"""patcher.core.record: RECORD in every form the spec allows, its rows read and rewritten.

Expected fields come from hashlib and base64 called here (tests/core/world.b64), never from
patcher.core.record's own hashing. (Absolute RECORD paths have their own file, test_record_forms.py.)
"""

from __future__ import annotations

import hashlib

import pytest

from patcher.core import record
from patcher.core.errors import LazylogError
from patcher.core.exitcodes import ExitCode
from tests.core.world import ROW, SITE, b64

DATA = b"graph\n"
NEW = b"new graph bytes\n"
ALGORITHMS = sorted(hashlib.algorithms_guaranteed - {"shake_128", "shake_256"})
BASE = str(SITE)  # the directory holding the dist-info, which every reader is given


def test_the_algorithms_read_are_hashlibs_guaranteed_ones_but_the_shakes() -> None:
    assert frozenset(ALGORITHMS) == record.GUARANTEED


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_row_in_each_guaranteed_algorithm(algorithm: str) -> None:
    field = b64(algorithm, DATA)
    assert record.hash_field(algorithm, DATA) == field
    assert record.describes(field, DATA) and not record.describes(field, DATA + b"x")
    rec = f"torch/__init__.py,,\n{ROW},{field},{len(DATA)}\n".encode()
    assert record.fit(record.rows(rec, ROW, BASE), DATA) == "current" and record.names(
        record.rows(rec, ROW, BASE), DATA
    )
    assert record.fit(record.rows(rec, ROW, BASE), NEW) == "other" and not record.names(
        record.rows(rec, ROW, BASE), NEW
    )
    # rewritten in its own algorithm, its size updated
    rewritten = record.pointed(rec, record.rows(rec, ROW, BASE)[0], NEW, add=None, drop=None, base=BASE)
    assert rewritten == f"torch/__init__.py,,\n{ROW},{b64(algorithm, NEW)},{len(NEW)}\n".encode()


@pytest.mark.parametrize(
    "odd", ["shake_128=abc", "sha512_256=abc", "foo=abc", "sha256", "=abc", "sha256=" + "A" * 43]
)
def test_a_hash_no_guaranteed_algorithm_reads_names_nothing_and_becomes_sha256(odd: str) -> None:
    rec = f"{ROW},{odd},3\n".encode()
    assert not record.describes(odd, DATA)
    assert record.fit(record.rows(rec, ROW, BASE), DATA) == "other" and not record.names(
        record.rows(rec, ROW, BASE), DATA
    )
    assert (
        record.pointed(rec, record.rows(rec, ROW, BASE)[0], DATA, add=None, drop=None, base=BASE)
        == f"{ROW},{b64('sha256', DATA)},{len(DATA)}\n".encode()
    )


@pytest.mark.parametrize(
    ("row", "after"),
    [
        (f"{ROW},,", f"{ROW},,"),  # no hash, no size: stays without
        (f"{ROW},,3", f"{ROW},,{len(NEW)}"),  # no hash: none given, the size kept up to date
        (f"{ROW},{b64('sha256', DATA)},", f"{ROW},{b64('sha256', NEW)},"),  # an empty size stays empty
        (f"{ROW}", f"{ROW},,"),  # the path alone
    ],
    ids=["bare", "size-only", "hash-only", "path-only"],
)
def test_rows_without_hash_or_size(row: str, after: str) -> None:
    rec = f"{row}\n".encode()
    assert record.fit(record.rows(rec, ROW, BASE), DATA) == ("current" if "sha256" in row else "unhashed")
    assert record.names(record.rows(rec, ROW, BASE), DATA) == ("sha256" in row)
    assert (
        record.pointed(rec, record.rows(rec, ROW, BASE)[0], NEW, add=None, drop=None, base=BASE)
        == f"{after}\n".encode()
    )


def test_crlf_rows_keep_their_line_ends() -> None:
    rec = f"a.py,,\r\n{ROW},{b64('sha256', DATA)},6\r\nb.py,,\r\n".encode()
    assert record.fit(record.rows(rec, ROW, BASE), DATA) == "current"
    (row,) = record.rows(rec, ROW, BASE)
    assert (row.offset, row.line, row.path, row.hash, row.size) == (
        8,
        rec[8:-8],
        ROW,
        b64("sha256", DATA),
        "6",
    )
    out = record.pointed(rec, record.rows(rec, ROW, BASE)[0], NEW, add="u.json", drop=None, base=BASE)
    assert out == f"a.py,,\r\n{ROW},{b64('sha256', NEW)},{len(NEW)}\r\nu.json,,\r\nb.py,,\r\n".encode()


def test_cr_only_line_ends_delimit_rows() -> None:
    rec = f"a.py,,\r{ROW},{b64('sha256', DATA)},6\n".encode()
    (row,) = record.rows(rec, ROW, BASE)
    assert row.offset == 7 and row.line == rec[7:]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_last_row_without_a_line_end(newline: str) -> None:
    rec = f"a.py,,{newline}{ROW},{b64('sha256', DATA)},6".encode()
    assert record.fit(record.rows(rec, ROW, BASE), DATA) == "current"
    out = record.pointed(rec, record.rows(rec, ROW, BASE)[0], NEW, add="u.json", drop=None, base=BASE)
    assert out == f"a.py,,{newline}{ROW},{b64('sha256', NEW)},{len(NEW)}{newline}u.json,,".encode()


def test_quoted_fields() -> None:
    rec = f'"{ROW}","{b64("sha256", DATA)}","6"\r\n'.encode()
    assert record.fit(record.rows(rec, ROW, BASE), DATA) == "current"
    assert (
        record.pointed(rec, record.rows(rec, ROW, BASE)[0], NEW, add=None, drop=None, base=BASE)
        == f"{ROW},{b64('sha256', NEW)},{len(NEW)}\r\n".encode()
    )
    comma = "torch/a,b.py"
    quoted = f'"{comma}",,\n{ROW},,\n'.encode()
    (row,) = record.rows(quoted, comma, BASE)
    assert (row.offset, row.path) == (0, comma)
    assert (
        record.pointed(quoted, record.rows(quoted, comma, BASE)[0], NEW, add=None, drop=None, base=BASE)
        == f'"{comma}",,\n{ROW},,\n'.encode()
    )
    assert (
        record.pointed(quoted, record.rows(quoted, ROW, BASE)[0], NEW, add='u"x.json', drop=None, base=BASE)
        == f'"{comma}",,\n{ROW},,\n"u""x.json",,\n'.encode()
    )


def test_rows_of_other_paths_that_contain_it_are_not_its_rows() -> None:
    rec = f"x{ROW},,\n{ROW}c,,\n{ROW}.bak,,\nother,{ROW},\n{ROW},,1\n".encode()
    (row,) = record.rows(rec, ROW, BASE)
    assert row.size == "1" and rec[row.offset :] == f"{ROW},,1\n".encode()
    assert record.fit(record.rows(rec, ROW, BASE), DATA) == "unhashed"


def test_duplicated_and_missing_rows() -> None:
    field = b64("sha256", DATA)
    twice = f"{ROW},{field},6\na.py,,\n{ROW},{field},6\n".encode()
    assert [r.offset for r in record.rows(twice, ROW, BASE)] == [0, len(twice) // 2 + 4]
    assert record.fit(record.rows(twice, ROW, BASE), DATA) == "duplicate" and not record.names(
        record.rows(twice, ROW, BASE), DATA
    )
    assert record.fit(record.rows(b"a.py,,\n", ROW, BASE), DATA) == "missing"
    assert record.fit(None, DATA) == "absent" and not record.names(None, DATA)
    assert record.rows(b"", ROW, BASE) == []


def test_the_undo_row_is_added_once_and_dropped_wherever_it_sits() -> None:
    rec = f"u.json,,\n{ROW},,\nu.json,,\nb.py,,\n".encode()
    assert (
        record.pointed(rec, record.rows(rec, ROW, BASE)[0], NEW, add="u.json", drop=None, base=BASE) == rec
    )  # already listed: not added again
    assert (
        record.pointed(rec, record.rows(rec, ROW, BASE)[0], NEW, add=None, drop="u.json", base=BASE)
        == f"{ROW},,\nb.py,,\n".encode()
    )
    assert record.without(rec, "u.json", BASE) == f"{ROW},,\nb.py,,\n".encode()
    assert record.without(rec, "absent.py", BASE) == rec
    lf = f"{ROW},,".encode()
    assert (
        record.pointed(lf, record.rows(lf, ROW, BASE)[0], NEW, add="u.json", drop=None, base=BASE)
        == f"{ROW},,\nu.json,,".encode()
    )


def test_non_utf8_bytes_are_a_damaged_install() -> None:
    record.check(f"{ROW},,\n".encode())
    for bad in (b"\xff,,\n", f"{ROW},\xff,\n".encode("latin-1")):
        with pytest.raises(LazylogError) as raised:
            record.check(bad)
        assert "not UTF-8 (invalid start byte)" in str(raised.value)
    with pytest.raises(LazylogError) as raised:
        record.fit(record.rows(f"{ROW},\xff,\n".encode("latin-1"), ROW, BASE), DATA)
    assert "not UTF-8 (invalid start byte)" in str(raised.value) and raised.value.code == ExitCode.ENVIRONMENT


def test_a_malformed_quoted_row_is_a_damaged_install() -> None:
    with pytest.raises(LazylogError) as raised:
        record.fit(record.rows(f'"{ROW}",a\rb,\n'.encode(), ROW, BASE), DATA)
    assert "it has a malformed row (new-line character seen" in str(raised.value)


@pytest.mark.parametrize(
    ("rec", "offset"),
    [
        (f"\n{ROW},,\n", 1),  # a blank first line
        (f"\r{ROW},,\n", 1),
        (f"a.py,,\rb.py,,\r{ROW},,\n", 14),  # CR-only line ends: the row starts after the last CR
        (f"a.py,,\r\nb.py,,\r{ROW},,\n", 15),
    ],
)
def test_where_a_row_starts(rec: str, offset: int) -> None:
    (row,) = record.rows(rec.encode(), ROW, BASE)
    assert row.offset == offset and row.line == f"{ROW},,\n".encode()


def test_three_rows_are_all_found() -> None:
    rec = f"{ROW},,1\n{ROW},,2\n{ROW},,3\n".encode()
    assert [r.size for r in record.rows(rec, ROW, BASE)] == ["1", "2", "3"]


def test_a_path_ending_in_x_and_a_size_of_spaces() -> None:
    (row,) = record.rows(b"a/X\n", "a/X", BASE)
    assert row.path == "a/X"
    spaced = f"{ROW},{b64('sha256', DATA)}, \n".encode()  # a size of spaces is a size
    assert (
        record.pointed(spaced, record.rows(spaced, ROW, BASE)[0], NEW, add=None, drop=None, base=BASE)
        == f"{ROW},{b64('sha256', NEW)},{len(NEW)}\n".encode()
    )


def test_a_hash_ending_in_x_is_written_whole() -> None:
    # sha384's 48 bytes need no padding: its last character can be any, an X among them
    data = next(d for d in (b"%d" % i for i in range(10_000)) if b64("sha384", d).endswith("X"))
    assert record.hash_field("sha384", data) == b64("sha384", data)


def test_a_malformed_hash_keeps_its_algorithm() -> None:
    rec = f"{ROW},md5=a=b,3\n".encode()
    assert not record.describes("md5=a=b", DATA)
    assert (
        record.pointed(rec, record.rows(rec, ROW, BASE)[0], DATA, add=None, drop=None, base=BASE)
        == f"{ROW},{b64('md5', DATA)},{len(DATA)}\n".encode()
    )


def test_the_added_row_takes_the_line_end_of_graph_pys_row() -> None:
    rec = f"a.py,,\r\n{ROW},,\nb.py,,\r\n".encode()
    assert (
        record.pointed(rec, record.rows(rec, ROW, BASE)[0], NEW, add="u.json", drop=None, base=BASE)
        == f"a.py,,\r\n{ROW},,\nu.json,,\nb.py,,\r\n".encode()
    )


def test_a_rejected_name_does_not_skip_the_rows_after_it() -> None:
    """`subgraph.py` ends with graph.py's name; the scan goes on from there, row by row."""
    rec = f"torch/_inductor/subgraph.py,,\n{ROW},,1\ntorch/x/graph.py,,\n".encode()
    assert [r.size for r in record.rows(rec, ROW, BASE)] == ["1"]
