"""RECORD rows for graph.py in every form the spec allows, on the real 2.10.0 tree: absolute, and
relative paths that reach the file another way. Each row keeps its own form when rewritten; the undo
row is added in the plain relative form; a row through a symlinked directory is not graph.py's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests.conftest import sha256

GRAPH = "torch/_inductor/graph.py"


def _dist_info(torch_dir: Path) -> Path:
    return next(torch_dir.parent.glob("torch-*.dist-info"))


def _respell(record: Path, spelling: str) -> bytes:
    """RECORD with graph.py's row spelled another way (the rest of the row as released)."""
    data = record.read_bytes()
    start = data.index(b"\n" + GRAPH.encode() + b",") + 1
    assert data.count(b"\n" + GRAPH.encode() + b",") == 1
    new = data[:start] + spelling.encode() + data[start + len(GRAPH) :]
    record.write_bytes(new)
    return new


def _row(record: bytes, spelling: str) -> str:
    lines = [line for line in record.decode().splitlines() if line.split(",")[0] == spelling]
    assert len(lines) == 1, lines
    return lines[0]


SPELLINGS: dict[str, Callable[[Path], str]] = {
    "absolute": lambda site: f"{site}/{GRAPH}",
    "dot": lambda site: f"./{GRAPH}",
    "through-parent": lambda site: f"../{site.name}/{GRAPH}",
    "dotdot-inside": lambda site: "torch/_inductor/../_inductor/graph.py",
    "absolute-dotted": lambda site: f"{site}/./torch/../{GRAPH}",
}


@pytest.mark.parametrize("form", sorted(SPELLINGS))
def test_each_row_form_is_graph_pys_row_and_keeps_its_form(
    form: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    site, record = torch_dir.parent, _dist_info(torch_dir) / "RECORD"
    spelling = SPELLINGS[form](site)
    before = _respell(record, spelling)
    pristine = (torch_dir / "_inductor" / "graph.py").read_bytes()

    eager = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert eager.exit_code == 1, eager.output
    assert json.loads(eager.stdout)["state"] == "pristine"

    applied = run("apply", "--torch-dir", str(torch_dir))
    assert applied.exit_code == 0, applied.output
    patched = (torch_dir / "_inductor" / "graph.py").read_bytes()
    after = record.read_bytes()
    row = _row(after, spelling).split(",")
    # the row kept its own path text and now names the patched bytes (same algorithm, size given)
    digest = json.loads(run("verify", "--torch-dir", str(torch_dir), "--json").stdout)
    assert digest["exit_code"] == 0 and digest["state"] == "patched" and digest["problems"] == []
    assert row[2] == str(len(patched)) and row[1] != _row(before, spelling).split(",")[1]
    assert after.count(b"graph.py,") == before.count(b"graph.py,")
    # the undo row: relative to the dist-info's directory, the form installers write for it
    assert f"{_dist_info(torch_dir).name}/torch_lazylog.json,," in after.decode().splitlines()

    reverted = run("revert", "--torch-dir", str(torch_dir))
    assert reverted.exit_code == 0, reverted.output
    assert (torch_dir / "_inductor" / "graph.py").read_bytes() == pristine
    assert record.read_bytes() == before


def test_a_row_through_a_symlinked_directory_is_not_followed(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """`link/torch/...` reaches graph.py only through a link: read lexically it names another file,
    so it is neither matched nor rewritten; with it as the only row, RECORD has no row for graph.py."""
    torch_dir = release("2.10.0")
    site, record = torch_dir.parent, _dist_info(torch_dir) / "RECORD"
    (site / "link").symlink_to(".")
    original = record.read_bytes()
    line = _row(original, GRAPH).encode()
    both = original.replace(b"\n" + line, b"\n" + line + b"\r\nlink/" + line)
    record.write_bytes(both)

    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    after = record.read_bytes()
    assert _row(after, "link/" + GRAPH).encode() == b"link/" + line  # untouched
    assert _row(after, GRAPH).encode() != line
    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert record.read_bytes() == both

    record.write_bytes(original.replace(b"\n" + line, b"\nlink/" + line))
    graph_sha = sha256((torch_dir / "_inductor" / "graph.py").read_bytes())
    result = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert (
        result.exit_code == 4
        and "no row for torch/_inductor/graph.py" in json.loads(result.stdout)["message"]
    )
    assert sha256((torch_dir / "_inductor" / "graph.py").read_bytes()) == graph_sha


def test_an_undo_row_in_another_form_is_found_and_removed(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """An undo row someone rewrote as an absolute path is still the undo row: revert removes it."""
    torch_dir = release("2.10.0")
    record = _dist_info(torch_dir) / "RECORD"
    original = record.read_bytes()
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    relative = f"{_dist_info(torch_dir).name}/torch_lazylog.json,,"
    absolute = f"{_dist_info(torch_dir)}/torch_lazylog.json,,"
    record.write_bytes(record.read_bytes().replace(relative.encode(), absolute.encode()))
    assert run("verify", "--torch-dir", str(torch_dir)).exit_code == 0
    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert b"torch_lazylog.json" not in record.read_bytes()
    assert record.read_bytes() == original
