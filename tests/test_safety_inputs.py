"""Permissions, disk space, broken records, edited files, odd encodings, reproducibility."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import Result

from patcher.install import fsio
from tests import faults
from tests.conftest import sha256, snapshot
from tests.helpers import tool

COMMANDS = ("apply", "verify", "revert")


def _dist_info(torch_dir: Path) -> Path:
    return next(torch_dir.parent.glob("torch-*.dist-info"))


@pytest.fixture
def restore_modes() -> Iterator[list[Path]]:
    """Paths whose mode a test drops; made writable again so tmp_path can be cleaned."""
    paths: list[Path] = []
    yield paths
    for path in paths:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _read_only(path: Path, keep: list[Path]) -> None:
    keep.append(path)
    path.chmod(path.stat().st_mode & ~0o222)


@pytest.mark.parametrize(
    "which",
    ["site-packages", "_inductor", "graph.py", "dist-info", "RECORD"],
)
def test_read_only_parts_are_an_environment_error(
    which: str, release: Callable[[str], Path], run: Callable[..., Result], restore_modes: list[Path]
) -> None:
    torch_dir = release("2.10.0")
    site = torch_dir.parent
    targets = {
        "site-packages": [p for p in [site, *site.rglob("*")] if not p.is_symlink()],
        "_inductor": [torch_dir / "_inductor"],
        "graph.py": [torch_dir / "_inductor" / "graph.py"],
        "dist-info": [_dist_info(torch_dir)],
        "RECORD": [_dist_info(torch_dir) / "RECORD"],
    }[which]
    for path in targets:
        _read_only(path, restore_modes)
    before = snapshot(site)
    result = run("apply", "--torch-dir", str(torch_dir), "--json")
    assert result.exit_code == 4, result.output
    report = json.loads(result.stdout)
    assert "read-only" in report["message"]
    assert snapshot(site) == before
    # the error comes after the read, and keeps what was read: the state, the hash, the release
    graph = torch_dir / "_inductor" / "graph.py"
    found = (report["state"], report["sha256"], report["release"], report["match"], report["changed"])
    assert found == ("pristine", sha256(graph.read_bytes()), "2.10.0", "exact", False), report


@pytest.mark.parametrize("point", ["write:torch_lazylog.json", "write:graph.py", "fsync:RECORD"])
def test_disk_full_changes_nothing(
    point: str, release: Callable[[str], Path], run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    torch_dir = release("2.10.0")
    before = snapshot(torch_dir.parent)
    monkeypatch.setattr(fsio, "os", faults.Faults(os, point, "enospc", None))
    result = run("apply", "--torch-dir", str(torch_dir))
    assert result.exit_code == 4
    assert "no space left on the device holding" in result.stderr and "Nothing was changed" in result.stderr
    assert snapshot(torch_dir.parent) == before


def _undo(torch_dir: Path) -> Path:
    return _dist_info(torch_dir) / "torch_lazylog.json"


def _mangle(field: str) -> Callable[[dict[str, object]], object]:
    def change(record: dict[str, object]) -> object:
        graph = record["graph"]
        assert isinstance(graph, dict)
        if field == "version":
            record["version"] = 0  # no torch-lazylog wrote it: a newer one's (a higher version) is named
        elif field == "hashes":
            graph["after"] = {"sha256": "0" * 64, "size": 112}
            graph["before"] = {"sha256": "1" * 64, "size": 100}
        elif field == "dotdot":
            graph["path"] = "../../etc/passwd"
        elif field == "absolute":
            graph["path"] = "/etc/passwd"
        elif field == "record-path":
            record_change = record["record"]
            assert isinstance(record_change, dict)
            record_change["path"] = "../RECORD"
        elif field == "edit-offset":
            graph["edit"] = {"offset": -5, "old": "", "new": ""}
        elif field == "setuid":
            graph["mode"] = 0o4755
        elif field == "future":
            graph["mtime_ns"] = 2**62
        elif field == "other-edit":
            edit = graph["edit"]
            assert isinstance(edit, dict)
            edit["old"] = "import os\n"
        return record

    return change


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda raw: b"{not json", id="invalid-json"),
        pytest.param(lambda raw: b"\xff\xfe", id="not-text"),
        pytest.param(lambda raw: b"[]", id="not-an-object"),
        pytest.param("version", id="version-no-tool-wrote"),
        pytest.param("hashes", id="wrong-hashes"),
        pytest.param("dotdot", id="path-dotdot"),
        pytest.param("absolute", id="path-absolute"),
        pytest.param("record-path", id="record-path-elsewhere"),
        pytest.param("edit-offset", id="negative-offset"),
        pytest.param("setuid", id="mode-setuid"),
        pytest.param("future", id="mtime-after-the-file"),
        pytest.param("other-edit", id="edit-not-the-patch"),
    ],
)
def test_an_untrustworthy_undo_record_proves_nothing(
    damage: object, release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    """The bytes decide: the patched 2.10.0 file stays lazy for verify, apply writes a true record,
    and revert restores the release's exact bytes, never what the record says."""
    torch_dir = release("2.10.0")
    pristine_copy = tmp_path / "pristine"
    shutil.copytree(torch_dir.parent, pristine_copy)
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    undo = _undo(torch_dir)
    if callable(damage):
        undo.write_bytes(damage(undo.read_bytes()))
    else:
        assert isinstance(damage, str)
        undo.write_text(json.dumps(_mangle(damage)(json.loads(undo.read_text()))))
    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    report = json.loads(verify.stdout)
    assert (verify.exit_code, report["state"]) == (0, "untrusted-patched"), report
    assert report["next"] and report["next"].startswith("torch-lazylog apply"), report
    graph = torch_dir / "_inductor" / "graph.py"
    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert sha256(graph.read_bytes()) == sha256((pristine_copy / "torch/_inductor/graph.py").read_bytes())
    assert not undo.exists()
    record = (_dist_info(torch_dir) / "RECORD").read_bytes()
    assert record == (pristine_copy / _dist_info(torch_dir).name / "RECORD").read_bytes()
    assert not graph.stat().st_mode & 0o7000


@pytest.mark.parametrize("patched", [True, False], ids=["patched", "pristine"])
def test_a_newer_tool_s_undo_record_is_named_and_left_as_it_is(
    patched: bool, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """A record of a higher version is a newer torch-lazylog's, not damage: verify judges graph.py
    alone and names the version; apply (a dry run too) and revert refuse and write nothing."""
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    pristine = graph.read_bytes()
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    undo = _undo(torch_dir)
    data = json.loads(undo.read_text())
    data.update(version=2, written_later={"any": "field"})
    undo.write_text(json.dumps(data))
    if not patched:
        graph.write_bytes(pristine)  # as a newer tool's revert might stop before the record
    before = snapshot(torch_dir.parent)
    said = "a newer torch-lazylog wrote"
    named = f"({undo}: undo record version 2, where this one reads up to version 1)"
    verify = json.loads(run("verify", "--torch-dir", str(torch_dir), "--json").stdout)
    assert verify["exit_code"] == (0 if patched else 1) and verify["next"] is None, verify
    assert verify["state"] == ("newer-patched" if patched else "newer-eager")  # named as a newer tool's
    assert said in verify["message"] and named in verify["message"], verify["message"]
    assert "does not describe" not in verify["message"]
    assert "to apply or revert" in verify["message"]
    for command in ("apply", "apply --dry-run", "revert"):
        result = run(*command.split(), "--torch-dir", str(torch_dir))
        assert result.exit_code == 3, result.output
        assert said in result.stderr and named in result.stderr and "Nothing was written" in result.stderr
        assert f"to {command.split()[0]}." in result.stderr and "does not describe" not in result.stderr
        report = json.loads(run(*command.split(), "--torch-dir", str(torch_dir), "--json").stdout)
        assert (report["state"], report["next"]) == (verify["state"], None), report
    assert snapshot(torch_dir.parent) == before


def test_a_record_of_an_older_version_is_read_and_replaced_without_a_word_of_damage(
    release: Callable[[str], Path], run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a later torch-lazylog (writing version 2) sees today's records: read as they were written,
    rewritten in its own version, with the sentences a record of its own version gets."""
    from patcher.core import undo as undo_module

    torch_dir = release("2.10.0")
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    undo = _undo(torch_dir)
    assert json.loads(undo.read_text())["version"] == 1
    monkeypatch.setattr(undo_module, "UNDO_VERSION", 2)
    verify = json.loads(run("verify", "--torch-dir", str(torch_dir), "--json").stdout)
    assert (verify["exit_code"], verify["state"], verify["next"]) == (0, "patched", None), verify
    # A revert stopped after graph.py: apply replaces the old record with its own.
    graph = torch_dir / "_inductor" / "graph.py"
    result = run("revert", "--torch-dir", str(torch_dir))
    assert result.exit_code == 0 and result.stdout.startswith("Reverted graph.py"), result.output
    monkeypatch.setattr(undo_module, "UNDO_VERSION", 1)
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    patched = graph.read_bytes()
    graph.write_bytes(patched.replace(b"LazyString(error.operator_str, ", b"error.operator_str("))
    monkeypatch.setattr(undo_module, "UNDO_VERSION", 2)
    verify = json.loads(run("verify", "--torch-dir", str(torch_dir), "--json").stdout)
    assert verify["state"] == "revert-interrupted", verify
    result = run("apply", "--torch-dir", str(torch_dir), "--json")
    report = json.loads(result.stdout)
    assert (result.exit_code, report["state"]) == (0, "patched"), report
    assert "does not describe" not in report["message"] and "newer" not in report["message"]
    assert json.loads(undo.read_text())["version"] == 2 and graph.read_bytes() == patched


@pytest.mark.parametrize(
    ("damage", "commands"),
    [
        pytest.param("not-utf-8", ("apply",), id="not-utf-8"),
        pytest.param("no-graph-row", ("apply",), id="no-graph-row"),
        pytest.param("two-graph-rows", ("apply",), id="two-graph-rows"),
    ],
)
def test_broken_record_is_an_environment_error(
    damage: str, commands: tuple[str, ...], release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    record = _dist_info(torch_dir) / "RECORD"
    rows = record.read_bytes().splitlines(keepends=True)
    graph_row = [r for r in rows if r.startswith(b"torch/_inductor/graph.py,")]
    if damage == "not-utf-8":
        record.write_bytes(record.read_bytes() + b"\xff\xfe,,\n")
    elif damage == "no-graph-row":
        record.write_bytes(b"".join(r for r in rows if r not in graph_row))
    else:
        record.write_bytes(b"".join(rows) + graph_row[0])
    before = snapshot(torch_dir.parent)
    for command in commands:
        result = run(command, "--torch-dir", str(torch_dir))
        assert result.exit_code == 4, (command, result.output)
        assert "RECORD" in result.stderr and "reinstall" in result.stderr
    assert snapshot(torch_dir.parent) == before


def test_graph_edited_after_apply_is_refused_by_revert(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    graph = torch_dir / "_inductor" / "graph.py"
    graph.write_bytes(graph.read_bytes() + b"# edited by hand\n")
    before = snapshot(torch_dir.parent)
    result = run("revert", "--torch-dir", str(torch_dir))
    assert result.exit_code == 3
    assert "changed since apply" in result.stderr
    assert snapshot(torch_dir.parent) == before


def test_torch_reinstalled_over_a_patched_one(
    release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    torch_dir = release("2.10.0")
    site = torch_dir.parent
    copy = tmp_path / "pristine-copy"
    shutil.copytree(site, copy)
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    # A reinstall that rewrote graph.py and RECORD but left the undo record behind.
    for rel in ("torch/_inductor/graph.py", f"{_dist_info(torch_dir).name}/RECORD"):
        shutil.copy2(copy / rel, site / rel)

    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    report = json.loads(verify.stdout)
    # the same release's bytes beside its own record: by the bytes, an apply stopped before graph.py
    assert verify.exit_code == 1 and report["state"] == "record-only", report
    assert "undo record" in report["message"]

    result = run("revert", "--torch-dir", str(torch_dir), "--json")
    assert result.exit_code == 0
    assert "removed the undo record" in json.loads(result.stdout)["message"]
    assert snapshot(site) == snapshot(copy)


def test_torch_upgraded_in_place_leaves_a_stale_record(
    release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    torch_dir = release("2.10.0")
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    other = release("2.13.0")
    shutil.copy2(other / "_inductor" / "graph.py", torch_dir / "_inductor" / "graph.py")
    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    report = json.loads(verify.stdout)
    assert (verify.exit_code, report["state"]) == (0, "upgraded"), report  # lazy: never failed
    assert "stale undo record" in report["message"] and report["next"].startswith("torch-lazylog apply")
    result = run("revert", "--torch-dir", str(torch_dir), "--json")
    assert result.exit_code == 0 and "removed the undo record" in json.loads(result.stdout)["message"]
    assert not _undo(torch_dir).exists()
    assert (torch_dir / "_inductor" / "graph.py").read_bytes() == (
        other / "_inductor" / "graph.py"
    ).read_bytes()


@pytest.mark.parametrize(
    ("encode", "code"),
    [
        pytest.param(lambda b: b.replace(b"\n", b"\r\n"), 0, id="crlf"),
        pytest.param(lambda b: b"\xef\xbb\xbf" + b, 0, id="bom"),
        pytest.param(
            lambda b: b.replace(b"# Note: [Input Alignment", b"# Note: \xff[Input Alignment"),
            3,
            id="not-utf-8",
        ),
    ],
)
def test_encodings_of_the_real_file(
    encode: Callable[[bytes], bytes], code: int, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    graph.write_bytes(encode(graph.read_bytes()))
    original = graph.read_bytes()
    result = run("apply", "--torch-dir", str(torch_dir), "--json")
    assert result.exit_code == code, result.output
    if code == 0:
        report = json.loads(result.stdout)
        assert (report["match"], report["release"]) == ("site", "2.10.0")
        new = graph.read_bytes()
        eol = b"\r\n" if b"\r\n" in original else b"\n"
        old_line = b"                    error.operator_str(target, args, kwargs)," + eol
        new_line = b"                    LazyString(error.operator_str, target, args, kwargs)," + eol
        assert original.count(old_line) == 1
        assert new == original.replace(old_line, new_line)
        assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert graph.read_bytes() == original


def test_reproducible_bytes(
    release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    first = release("2.10.0")
    second = tmp_path / "twin"
    shutil.copytree(first.parent, second)  # copy2: same bytes, modes and mtimes
    for torch_dir in (first, second / "torch"):
        assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    for rel in (
        "torch/_inductor/graph.py",
        "torch-2.10.0.dist-info/torch_lazylog.json",
        "torch-2.10.0.dist-info/RECORD",
    ):
        assert (first.parent / rel).read_bytes() == (second / rel).read_bytes(), rel
    assert (
        os.stat(first / "_inductor" / "graph.py").st_mode
        == os.stat(second / "torch" / "_inductor" / "graph.py").st_mode
    )


def test_a_patched_torch_whose_undo_record_was_lost_is_repaired_in_place(
    release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    """The release table determines the original: revert restores its exact bytes, no reinstall."""
    torch_dir = release("2.10.0")
    site = torch_dir.parent
    copy = tmp_path / "pristine"
    shutil.copytree(site, copy)
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    _undo(torch_dir).unlink()
    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    report = json.loads(verify.stdout)
    assert (verify.exit_code, report["state"]) == (0, "unrecorded"), report
    assert "undo record is gone" in report["message"]
    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert snapshot(site)["torch/_inductor/graph.py"][0] == snapshot(copy)["torch/_inductor/graph.py"][0]
    record = f"{_dist_info(torch_dir).name}/RECORD"
    assert (site / record).read_bytes() == (copy / record).read_bytes()
    assert not _undo(torch_dir).exists()


def test_apply_writes_a_lost_undo_record_again(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    written = _undo(torch_dir).read_bytes()
    _undo(torch_dir).unlink()
    result = run("apply", "--torch-dir", str(torch_dir), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["state"] == "patched", result.stdout
    assert (
        json.loads(_undo(torch_dir).read_bytes())["graph"]["before"] == json.loads(written)["graph"]["before"]
    )
    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert (verify.exit_code, json.loads(verify.stdout)["next"]) == (0, None), verify.stdout


def test_a_file_of_another_owner_is_named_as_such(release: Callable[[str], Path]) -> None:
    """The tree belongs to `nobody`; the tool runs as root without the capability to override file
    permissions (as an unprivileged user would): the cause is ownership, not the mode (0o644)."""
    import subprocess

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and util-linux's setpriv, to drop the permission override")
    torch_dir = release("2.10.0")
    for path in [torch_dir.parent, *torch_dir.parent.rglob("*")]:
        os.chown(path, 65534, 65534)
    before = snapshot(torch_dir.parent)
    drop = "-dac_override,-fowner"
    done = subprocess.run(
        ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}",
         sys.executable, "-m", "patcher", "apply", "--torch-dir", str(torch_dir)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    assert "belongs to nobody (uid 65534) and torch-lazylog runs as root (uid 0)" in done.stderr, done.stderr
    assert "read-only" not in done.stderr
    assert snapshot(torch_dir.parent) == before


def test_a_read_only_filesystem_is_named_as_such(release: Callable[[str], Path], tmp_path: Path) -> None:
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("needs root, to mount a filesystem")
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], check=True)
    try:
        torch_dir = mount / "site" / "torch"
        shutil.copytree(release("2.10.0").parent, mount / "site")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        result_json = subprocess.run(
            [sys.executable, "-m", "patcher", "apply", "--torch-dir", str(torch_dir), "--json"],
            capture_output=True, text=True,
        )  # fmt: skip
        report = json.loads(result_json.stdout)
        assert result_json.returncode == 4 and "read-only filesystem" in report["message"], report
        assert "mode" not in report["message"]
        graph = (torch_dir / "_inductor" / "graph.py").read_bytes()
        assert (report["state"], report["sha256"], report["release"]) == ("pristine", sha256(graph), "2.10.0")
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_torch_without_record_is_judged_by_its_bytes(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """PEP 627 makes RECORD optional and distribution packages strip it: nothing is "damaged"."""
    torch_dir = release("2.10.0")
    (_dist_info(torch_dir) / "RECORD").unlink()
    graph = torch_dir / "_inductor" / "graph.py"
    original = graph.read_bytes()
    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert (verify.exit_code, json.loads(verify.stdout)["state"]) == (1, "pristine"), verify.stdout
    applied = run("apply", "--torch-dir", str(torch_dir), "--json")
    assert applied.exit_code == 0 and "there was no RECORD to keep" in json.loads(applied.stdout)["message"]
    assert run("verify", "--torch-dir", str(torch_dir)).exit_code == 0
    reverted = run("revert", "--torch-dir", str(torch_dir), "--json")
    assert reverted.exit_code == 0 and "no RECORD" in json.loads(reverted.stdout)["message"]
    assert graph.read_bytes() == original and not (_dist_info(torch_dir) / "RECORD").exists()
    for result in (verify, applied, reverted):
        assert "damaged" not in result.output


def test_a_file_swapped_in_during_apply_is_not_overwritten(release: Callable[[str], Path]) -> None:
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    record = (_dist_info(torch_dir) / "RECORD").read_bytes()
    done = tool("apply", "--torch-dir", str(torch_dir), env=faults.env("fsync:graph.py", "swap"))
    assert done.returncode == 4, done.stderr
    assert "changed meanwhile" in done.stderr and str(graph) in done.stderr
    assert graph.read_bytes() == faults.SWAPPED  # the other installer's file, kept
    assert (_dist_info(torch_dir) / "RECORD").read_bytes() == record
    assert not _undo(torch_dir).exists() and not list(torch_dir.parent.rglob("*.torch-lazylog.tmp"))


def test_a_pristine_release_beside_a_record_that_agrees_with_it_is_eager(
    release: Callable[[str], Path], run: Callable[..., Result], tmp_path: Path
) -> None:
    """The record claims graph.py is what apply made, with hashes that agree with the pristine file:
    the bytes are a known eager release, so verify says eager and revert writes no graph.py."""
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    pristine = graph.read_bytes()
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    record = json.loads(_undo(torch_dir).read_text())
    record["graph"]["after"] = {"sha256": sha256(pristine), "size": len(pristine)}
    record["graph"]["edit"] = {"offset": 0, "old": "", "new": ""}
    _undo(torch_dir).write_text(json.dumps(record))
    graph.write_bytes(pristine)
    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    report = json.loads(verify.stdout)
    assert (verify.exit_code, report["state"]) == (1, "untrusted-eager"), report
    assert "eagerly" in report["message"]
    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert graph.read_bytes() == pristine and not _undo(torch_dir).exists()


def test_a_torch_that_ships_the_fix_is_left_alone_by_every_command(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """A vendor 2.10 with the fix cherry-picked (the lazy call at the site, an edit elsewhere,
    RECORD naming those bytes, no undo record): natively lazy, nothing written by any command."""
    from patcher.core.record import pointed, rows

    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    vendor = b"# vendor build\n" + graph.read_bytes().replace(
        b"error.operator_str(target, args, kwargs),", b"LazyString(error.operator_str, target, args, kwargs),"
    )
    graph.write_bytes(vendor)
    record = _dist_info(torch_dir) / "RECORD"
    site = str(torch_dir.parent)  # RECORD's rows are relative to it
    listed = record.read_bytes()
    (row,) = rows(listed, "torch/_inductor/graph.py", site)
    record.write_bytes(pointed(listed, row, vendor, None, None, site))
    before = snapshot(torch_dir.parent)
    for command in ("verify", "apply", "revert", "verify"):
        result = run(command, "--torch-dir", str(torch_dir), "--json")
        report = json.loads(result.stdout)
        assert (result.exit_code, report["state"], report["changed"]) == (0, "ships-lazy", False), report
    assert snapshot(torch_dir.parent) == before


@pytest.mark.parametrize("change", ["crlf-to-lf", "row-between"])
def test_revert_leaves_record_true_after_record_changed(
    change: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    from patcher.core.record import names, rows

    torch_dir = release("2.10.0")
    pristine = (torch_dir / "_inductor" / "graph.py").read_bytes()
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    record = _dist_info(torch_dir) / "RECORD"
    data = record.read_bytes()
    undo_row = f"{_dist_info(torch_dir).name}/torch_lazylog.json"
    if change == "crlf-to-lf":
        data = data.replace(b"\r\n", b"\n")
    else:
        data = data.replace(f"\r\n{undo_row},,".encode(), f"\r\ntorch/other.py,,\r\n{undo_row},,".encode())
    assert data != record.read_bytes()
    record.write_bytes(data)
    result = run("revert", "--torch-dir", str(torch_dir))
    assert result.exit_code == 0, result.output
    restored = record.read_bytes()
    site = str(torch_dir.parent)  # RECORD's rows are relative to it
    assert names(rows(restored, "torch/_inductor/graph.py", site), pristine) and not rows(
        restored, undo_row, site
    )
    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert json.loads(verify.stdout)["problems"] == []
