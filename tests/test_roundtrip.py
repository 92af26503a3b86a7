"""The whole lifecycle on every real release: verify -> apply -> verify -> apply -> revert -> verify."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests import realdata
from tests.conftest import changed_files, sha256, snapshot

ONE_LINE_OLD = "-                    error.operator_str(target, args, kwargs),"
ONE_LINE_NEW = "+                    LazyString(error.operator_str, target, args, kwargs),"


def _json(result: Result) -> dict[str, object]:
    data: dict[str, object] = json.loads(result.stdout)
    return data


def _changed_lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@pytest.mark.parametrize("version", realdata.EAGER_RELEASES)
def test_eager_release_round_trip(
    version: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release(version)
    site = torch_dir.parent
    pristine = snapshot(site)

    before = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert before.exit_code == 1, before.output
    assert _json(before)["state"] == "pristine"
    assert _json(before)["release"] == version

    dry = run("apply", "--dry-run", "--torch-dir", str(torch_dir))
    assert dry.exit_code == 0, dry.output
    assert _changed_lines(dry.stdout) == [ONE_LINE_OLD, ONE_LINE_NEW]
    assert snapshot(site) == pristine, "--dry-run wrote something"

    applied = run("apply", "--torch-dir", str(torch_dir), "--json")
    assert applied.exit_code == 0, applied.output
    report = _json(applied)
    assert (report["state"], report["changed"], report["match"]) == ("patched", True, "exact")
    assert _changed_lines(str(report["diff"])) == [ONE_LINE_OLD, ONE_LINE_NEW]

    graph = torch_dir / "_inductor" / "graph.py"
    old, new = pristine["torch/_inductor/graph.py"][0], graph.read_bytes()
    assert new == old.replace(
        b"error.operator_str(target, args, kwargs),", b"LazyString(error.operator_str, target, args, kwargs),"
    )
    compile(new, str(graph), "exec", dont_inherit=True)
    dist_info = f"torch-{version}.dist-info"
    assert changed_files(pristine, snapshot(site)) == {
        "torch/_inductor/graph.py",
        f"{dist_info}/RECORD",
        f"{dist_info}/torch_lazylog.json",
    }

    record = (site / dist_info / "RECORD").read_text()
    assert f"{dist_info}/torch_lazylog.json,," in record
    graph_rows = [row for row in record.splitlines() if row.startswith("torch/_inductor/graph.py,")]
    assert graph_rows == [f"torch/_inductor/graph.py,{_record_hash(new)},{len(new)}"]

    after = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert after.exit_code == 0, after.output
    assert _json(after)["state"] == "patched"

    patched = snapshot(site)
    again = run("apply", "--torch-dir", str(torch_dir), "--json")
    assert again.exit_code == 0, again.output
    assert _json(again)["changed"] is False
    assert snapshot(site) == patched

    reverted = run("revert", "--torch-dir", str(torch_dir), "--json")
    assert reverted.exit_code == 0, reverted.output
    assert _json(reverted)["changed"] is True
    assert snapshot(site) == pristine, "revert is not byte-for-byte (content, mode, mtime)"

    final = run("verify", "--torch-dir", str(torch_dir))
    assert final.exit_code == 1, final.output

    nothing = run("revert", "--torch-dir", str(torch_dir), "--json")
    assert nothing.exit_code == 0 and _json(nothing)["changed"] is False
    assert snapshot(site) == pristine


@pytest.mark.parametrize("version", realdata.NATIVE_RELEASES)
def test_native_release_needs_nothing(
    version: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release(version)
    pristine = snapshot(torch_dir.parent)
    for command in ("verify", "apply", "revert"):
        result = run(command, "--torch-dir", str(torch_dir), "--json")
        assert result.exit_code == 0, result.output
        report = _json(result)
        assert (report["state"], report["changed"], report["release"]) == ("ships-lazy", False, version)
    assert snapshot(torch_dir.parent) == pristine


def test_notes_anchor_matches_the_real_2_10_file() -> None:
    """The field notes' hash of pristine 2.10.0 graph.py, against the downloaded wheel."""
    from tests.conftest import need

    source = need(lambda: realdata.graph_source("2.10.0"))
    assert isinstance(source, bytes)
    assert sha256(source).startswith(realdata.GRAPH_SHA256_2_10_0_PREFIX)


def _record_hash(data: bytes) -> str:
    import base64
    import hashlib

    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.mark.parametrize("version", ["2.4.1", "2.12.1"])
def test_the_diff_is_what_difflib_says(
    version: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    import difflib

    torch_dir = release(version)
    graph = torch_dir / "_inductor" / "graph.py"
    before = graph.read_bytes().decode()
    report = json.loads(run("apply", "--json", "--torch-dir", str(torch_dir)).stdout)
    after = graph.read_bytes().decode()
    name = "torch/_inductor/graph.py"
    expected = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{name}", f"b/{name}"
    )
    assert report["diff"] == "".join(expected)


@pytest.mark.parametrize(
    "odd",
    [b"\x0c", b"\x1c", "\u0085".encode(), "\u2028".encode()],
    ids=["form-feed", "file-separator", "next-line", "line-separator"],
)
def test_the_dry_run_diff_applies_as_patch_reads_it(
    odd: bytes, release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    """Lines are split on \\n only, as patch and git apply split them, whatever else a line holds."""
    import shutil
    import subprocess

    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    source = graph.read_bytes()
    at = source.index(b"error.operator_str(target, args, kwargs)")
    line_start = source.rindex(b"\n", 0, source.rindex(b"\n", 0, at)) + 1  # the line above the site's
    graph.write_bytes(source[:line_start] + b"# odd" + odd + b"byte\n" + source[line_start:])
    copy = tmp_path / "copy"
    shutil.copytree(torch_dir.parent, copy)
    dry = run("apply", "--dry-run", "--json", "--torch-dir", str(torch_dir))
    assert dry.exit_code == 0, dry.output
    diff = json.loads(dry.stdout)["diff"]
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    done = subprocess.run(
        ["git", "apply", "-p1", "--unsafe-paths", "-"], input=diff.encode(), cwd=copy, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    assert (copy / "torch/_inductor/graph.py").read_bytes() == graph.read_bytes()


def test_apply_after_an_interrupted_revert_keeps_revert_byte_for_byte(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """A revert stopped after it put graph.py back (its original bytes, mode and mtime) and before
    RECORD, then apply, then revert: graph.py, RECORD (bytes, mode, mtime) and the pycs present are
    as before the first apply."""
    import os

    from tests.helpers import make_pyc

    torch_dir = release("2.10.0")
    site, graph = torch_dir.parent, torch_dir / "_inductor" / "graph.py"
    make_pyc(graph, "checked-hash", 0)
    os.chmod(site / "torch-2.10.0.dist-info" / "RECORD", 0o640)
    pristine = snapshot(site)
    original, stat = graph.read_bytes(), graph.stat()
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    graph.write_bytes(original)  # what revert's first write leaves, RECORD not yet restored
    os.chmod(graph, stat.st_mode & 0o7777)
    os.utime(graph, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    stopped = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert _json(stopped)["state"] == "revert-interrupted", stopped.output
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    now = snapshot(site)
    assert {k: v for k, v in now.items() if "__pycache__" not in k} == {
        k: v for k, v in pristine.items() if "__pycache__" not in k
    }
    assert sorted(now) == sorted(pristine)  # the same pycs present, no more, no fewer
