"""The single file, dist/torch-lazylog.pyz, run by a bare interpreter (a fresh venv without pip,
nothing installed in it) on real 2.10.0 trees: it reads its patch definitions from inside the zip,
answers verify, and says in one sentence what needs a dependency it does not carry."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from patcher import pyz
from tests import realdata
from tests.conftest import snapshot
from tests.helpers import tool

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file as the README's one command makes it, from this checkout."""
    out = tmp_path_factory.mktemp("dist") / pyz.NAME
    done = subprocess.run(
        [sys.executable, "-m", "patcher.pyz", str(out)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == str(out), done.stderr
    return out


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv without pip: nothing installed, neither click nor libcst."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    for module in ("click", "libcst", "patcher"):
        found = subprocess.run(
            [str(python), "-c", f"import {module}"], capture_output=True, cwd="/", check=False
        )
        assert found.returncode != 0, f"{module} is importable in the bare venv"
    return python


def _run(python: Path, single: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), str(single), *args], capture_output=True, text=True, cwd="/", timeout=120, check=False
    )


def test_the_file_holds_the_tool_and_its_data_only(single: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(single).namelist())
    assert {"__main__.py", "patcher/entry.py", "patcher/patches/lazy_implicit_fallback.json"} <= names
    assert "patcher/patches/lazy_implicit_fallback.releases.json" in names
    assert not [n for n in names if n.startswith(("click/", "libcst/", "tests/")) or n.endswith(".pyc")]


def test_verify_on_real_trees_by_a_bare_interpreter(
    single: Path, bare: Path, release: Callable[[str], Path]
) -> None:
    torch_dir = release("2.10.0")
    before = snapshot(torch_dir.parent)
    pristine = _run(bare, single, "verify", "--torch-dir", str(torch_dir), "--json")
    assert pristine.returncode == 1, pristine.stderr
    report = json.loads(pristine.stdout)
    assert (report["state"], report["release"], report["match"]) == ("pristine", "2.10.0", "exact")
    assert snapshot(torch_dir.parent) == before  # verify wrote nothing, not even bytecode

    applied = _run(bare, single, "apply", "--torch-dir", str(torch_dir))
    assert applied.returncode == 0, applied.stderr  # a known release: no libcst needed to patch it
    patched = _run(bare, single, "verify", "--torch-dir", str(torch_dir), "--json")
    assert patched.returncode == 0 and json.loads(patched.stdout)["state"] == "patched", patched.stderr
    assert _run(bare, single, "revert", "--torch-dir", str(torch_dir)).returncode == 0
    assert snapshot(torch_dir.parent) == before


def test_verify_of_a_tree_the_installed_tool_patched(
    single: Path, bare: Path, release: Callable[[str], Path]
) -> None:
    torch_dir = release("2.10.0")
    assert tool("apply", "--torch-dir", str(torch_dir)).returncode == 0
    done = _run(bare, single, "verify", "--torch-dir", str(torch_dir))
    assert done.returncode == 0 and "formats the implicit-fallback log lazily" in done.stdout, done.stderr


def test_a_vendor_build_needs_libcst_and_says_so(
    single: Path, bare: Path, release: Callable[[str], Path]
) -> None:
    """A site match (the 2.10.0 file with an edit elsewhere) takes a libcst parse: exit 4, one
    sentence naming libcst and what to do, no traceback, nothing written."""
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    graph.write_bytes(graph.read_bytes() + b"# a vendor's line\n")
    assert (
        tool("verify", "--torch-dir", str(torch_dir), "--json").returncode == 1
    )  # with libcst: a site match
    before = snapshot(torch_dir.parent)
    for command in ("verify", "apply"):
        done = _run(bare, single, command, "--torch-dir", str(torch_dir))
        assert done.returncode == 4, done.stderr
        assert "Expected libcst to read a graph.py that is not a known release's bytes" in done.stderr
        assert "install the torch-lazylog wheel" in done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert snapshot(torch_dir.parent) == before


@pytest.mark.parametrize("args", [["--help"], ["verify", "--runtime"], ["fingerprint", "x.whl"]])
def test_what_needs_click_says_so(single: Path, bare: Path, args: list[str]) -> None:
    done = _run(bare, single, *args, "--json")
    assert done.returncode == 4 and done.stderr == ""
    report = json.loads(done.stdout)
    assert report["exit_code"] == 4 and report["message"].startswith("Expected click to parse `")
    plain = _run(bare, single, *args)
    assert plain.returncode == 4 and "Traceback" not in plain.stderr and "Expected click" in plain.stderr


def test_from_the_zip_another_interpreter_is_probed(single: Path, bare: Path) -> None:
    """--python names a second interpreter: the probe's module goes to it as source (a module inside
    a zip is no file it could open), and its answer comes back."""
    done = subprocess.run(
        [sys.executable, str(single), "verify", "--python", str(bare)],
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
    )
    assert done.returncode == 4
    assert f"Expected `import torch` to find torch for {bare} (Python " in done.stderr, done.stderr
    assert "but it found none" in done.stderr


@pytest.mark.parametrize("version", realdata.ADDED_RELEASES)
def test_an_added_release_round_trips_without_libcst(
    version: str, single: Path, bare: Path, release: Callable[[str], Path]
) -> None:
    """Each release the index sweep added is known by its bytes: the single file, with no libcst,
    patches it (or knows it lazy), verifies it and reverts it byte for byte (content, mode, mtime)."""
    torch_dir = release(version)
    before = snapshot(torch_dir.parent)
    eager = version in realdata.EAGER_RELEASES

    def verify() -> tuple[int, str, str | None]:
        done = _run(bare, single, "verify", "--torch-dir", str(torch_dir), "--json")
        report = json.loads(done.stdout)
        return done.returncode, report["state"], report["release"]

    assert verify() == ((1, "pristine", version) if eager else (0, "ships-lazy", version))
    applied = _run(bare, single, "apply", "--torch-dir", str(torch_dir))
    assert applied.returncode == 0, applied.stderr
    graph = (torch_dir / "_inductor" / "graph.py").read_bytes()
    original = before["torch/_inductor/graph.py"][0]
    eager_arg, lazy_arg = (
        b"error.operator_str(target, args, kwargs),",
        b"LazyString(error.operator_str, target, args, kwargs),",
    )
    assert graph == (original.replace(eager_arg, lazy_arg) if eager else original)
    assert verify() == ((0, "patched", version) if eager else (0, "ships-lazy", version))
    reverted = _run(bare, single, "revert", "--torch-dir", str(torch_dir))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(torch_dir.parent) == before
