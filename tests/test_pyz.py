"""The single file, dist/torch-lazylog.pyz, run by a bare interpreter (a fresh venv without pip,
nothing installed in it) on real 2.10.0 trees: it reads its patch definitions from inside the zip,
carries click (the whole command line), reads a vendor's graph.py with a libcst directory beside it,
and says in one sentence what to mount when there is none."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import patcher
from patcher import pyz
from tests import libsdir, realdata
from tests.conftest import need, snapshot, torch_venv
from tests.helpers import build_single_file, tool

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file as the README's one command makes it, from this checkout."""
    out = tmp_path_factory.mktemp("dist") / pyz.NAME
    return build_single_file(out)


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


def test_the_file_holds_the_tool_its_data_and_click_with_its_license(single: Path) -> None:
    import zipfile
    from importlib import metadata

    archive = zipfile.ZipFile(single)
    names = set(archive.namelist())
    assert {"__main__.py", "patcher/cli/app.py", "patcher/patches/lazy_implicit_fallback.json"} <= names
    assert "patcher/patches/lazy_implicit_fallback.releases.json" in names
    assert archive.read("__main__.py") == (ROOT / "patcher" / "cli" / "zipmain.py").read_bytes()
    click = metadata.distribution("click")
    info = f"click-{click.version}.dist-info"
    assert {"click/__init__.py", "click/core.py", f"{info}/METADATA"} <= names
    licenses = [n for n in names if n.startswith(f"{info}/") and "LICENSE" in n.upper() and n[-1] != "/"]
    assert licenses and archive.read(licenses[0]) == Path(str(click.locate_file(licenses[0]))).read_bytes()
    assert not [n for n in names if n.startswith(("libcst/", "tests/")) or n.endswith((".pyc", ".so"))]


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


def _vendor_tree(release: Callable[[str], Path]) -> Path:
    """A site match (the 2.10.0 file with an edit elsewhere): reading it takes a libcst parse."""
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    graph.write_bytes(graph.read_bytes() + b"# a vendor's line\n")
    assert (
        tool("verify", "--torch-dir", str(torch_dir), "--json").returncode == 1
    )  # with libcst: a site match
    return torch_dir


def test_a_vendor_build_without_a_libcst_directory_says_what_to_mount(
    single: Path, bare: Path, release: Callable[[str], Path]
) -> None:
    """exit 4, one sentence naming the directory it looked in and the pip line that makes it for this
    very Python, no traceback, nothing written."""
    torch_dir = _vendor_tree(release)
    before = snapshot(torch_dir.parent)
    minor = subprocess.run(
        [str(bare), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    for command in ("verify", "apply"):
        done = _run(bare, single, command, "--torch-dir", str(torch_dir))
        assert done.returncode == 4, done.stderr
        assert "Expected libcst to read a graph.py that is not a known release's bytes" in done.stderr
        assert f"in {single.parent / 'torch-lazylog-libs'}." in done.stderr
        assert f"pip install --target torch-lazylog-libs --only-binary=:all: --python-version {minor} " in (
            done.stderr
        )
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert snapshot(torch_dir.parent) == before


def test_a_vendor_build_with_the_libcst_directory_beside_the_file(
    single: Path, bare: Path, release: Callable[[str], Path], tmp_path: Path
) -> None:
    """The directory the sentence names, made as it says, beside a copy of the file: verify reads the
    site match, apply patches it, and $TORCH_LAZYLOG_LIBS names the same directory from elsewhere."""
    torch_dir = _vendor_tree(release)
    minor = subprocess.run(
        [str(bare), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    libs = need(lambda: libsdir.libcst_dir(minor))
    assert isinstance(libs, Path)
    beside = tmp_path / "mnt"
    shutil.copytree(libs, beside / "torch-lazylog-libs", symlinks=True)
    shutil.copy2(single, beside / single.name)
    found = _run(bare, beside / single.name, "verify", "--torch-dir", str(torch_dir), "--json")
    assert found.returncode == 1, found.stderr
    assert (json.loads(found.stdout)["state"], json.loads(found.stdout)["match"]) == ("pristine", "site")
    by_variable = subprocess.run(
        [str(bare), str(single), "apply", "--torch-dir", str(torch_dir)],
        capture_output=True, text=True, cwd="/", check=False, env={**os.environ, "TORCH_LAZYLOG_LIBS": str(libs)},
    )  # fmt: skip
    assert by_variable.returncode == 0, by_variable.stderr
    patched = _run(bare, beside / single.name, "verify", "--torch-dir", str(torch_dir), "--json")
    assert patched.returncode == 0 and json.loads(patched.stdout)["state"] == "patched", patched.stderr


def test_the_next_step_from_the_file_runs_the_file_as_printed(
    single: Path, bare: Path, release: Callable[[str], Path]
) -> None:
    """The file installs no `torch-lazylog` command: the apply its verify advises names the Python
    that ran it and the file, with the options typed before it (-B), and that line, run as printed,
    patches."""
    torch_dir = release("2.10.0")
    env = dict(os.environ)
    line = f"{bare} -B {single} apply --torch-dir {torch_dir}"
    eager = subprocess.run(
        [str(bare), "-B", str(single), "verify", "--torch-dir", str(torch_dir)],
        capture_output=True, text=True, cwd="/", env=env, check=False,
    )  # fmt: skip
    assert eager.returncode == 1 and eager.stdout.endswith(f"\nNext: {line}\n"), eager.stdout
    as_json = subprocess.run(
        [str(bare), str(single), "verify", "--torch-dir", str(torch_dir), "--json"],
        capture_output=True, text=True, cwd="/", env=env, check=False,
    )  # fmt: skip
    assert json.loads(as_json.stdout)["next"] == line.replace(" -B ", " ")
    assert tool("verify", "--torch-dir", str(torch_dir), "--json").stdout == as_json.stdout.replace(
        f"{bare} {single} ", "torch-lazylog "
    )  # the installed tool's own advice names its command, the rest is the same
    # Run by runpy from -c, the command line holds no file: the advice is the Python and the file.
    by_runpy = subprocess.run(
        [str(bare), "-c", f"import runpy; runpy.run_path({str(single)!r}, run_name='__main__')",
         "verify", "--torch-dir", str(torch_dir), "--json"],
        capture_output=True, text=True, cwd="/", env=env, check=False,
    )  # fmt: skip
    assert json.loads(by_runpy.stdout)["next"] == line.replace(" -B ", " "), by_runpy.stderr
    applied = subprocess.run(shlex.split(line), capture_output=True, text=True, cwd="/", env=env, check=False)
    assert applied.returncode == 0, applied.stderr
    assert _run(bare, single, "verify", "--torch-dir", str(torch_dir)).returncode == 0


def test_an_interrupted_run_of_the_file_names_the_file_s_verify(
    single: Path, bare: Path, release: Callable[[str], Path]
) -> None:
    """apply from the file waits for the torch directory's lock another run holds; SIGTERM ends it
    with 143, and its sentence names the verify to run as the file runs, not a command it lacks."""
    import fcntl
    import signal
    import time

    torch_dir = release("2.10.0")
    holder = os.open(torch_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        waiting = subprocess.Popen(
            [str(bare), "-B", str(single), "apply", "--torch-dir", str(torch_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
        )  # fmt: skip
        time.sleep(3)  # the file has started and waits for the lock
        waiting.send_signal(signal.SIGTERM)
        out, err = waiting.communicate(timeout=60)
    finally:
        os.close(holder)
    assert waiting.returncode == 143, err
    assert f"Run `{bare} -B {single} verify` to see which" in out, out


def test_the_file_as_a_command_on_path_names_itself_and_runs_by_its_own_line(
    single: Path, bare: Path, release: Callable[[str], Path], tmp_path: Path
) -> None:
    """As the tool image puts it (/usr/local/bin/torch-lazylog, run by its `env -S python3 -B` line):
    the advice is `torch-lazylog ...`, and that line, run as printed by a shell, patches."""
    torch_dir = release("2.10.0")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(single, bin_dir / "torch-lazylog")
    assert (bin_dir / "torch-lazylog").stat().st_mode & 0o111 == 0o111, "not a command for every user"
    assert single.read_bytes().startswith(b"#!/usr/bin/env -S python3 -B\n")  # no bytecode written
    (bin_dir / "python3").symlink_to(bare)  # the python3 the file's first line finds on PATH
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    eager = subprocess.run(
        ["torch-lazylog", "verify", "--torch-dir", str(torch_dir)],
        capture_output=True, text=True, cwd="/", env=env, check=False,
    )  # fmt: skip
    line = f"torch-lazylog apply --torch-dir {torch_dir}"
    assert eager.returncode == 1 and eager.stdout.endswith(f"\nNext: {line}\n"), eager.stdout + eager.stderr
    applied = subprocess.run(line, shell=True, capture_output=True, text=True, cwd="/", env=env, check=False)
    assert applied.returncode == 0, applied.stderr
    assert _run(bare, single, "verify", "--torch-dir", str(torch_dir)).returncode == 0


def test_help_and_every_command_parse_from_the_file(single: Path, bare: Path) -> None:
    """click travels inside: --help exits 0 and names every command, as the installed tool's does."""
    done = _run(bare, single, "--help")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    # The file installs no `torch-lazylog` command: its usage names the Python and the file that ran.
    usage, _, rest = done.stdout.partition("\n\n")
    assert usage.startswith(f"Usage: {bare} {single} ") and rest == tool("--help").stdout.partition("\n\n")[2]
    for command in ("apply", "verify", "revert", "diagnose", "fingerprint"):
        assert f"  {command} " in done.stdout
        sub = _run(bare, single, command, "--help")
        assert sub.returncode == 0 and sub.stdout.startswith(f"Usage: {bare} {single} {command} "), sub.stderr
    assert _run(bare, single, "--version").stdout.strip() == f"torch-lazylog, version {patcher.__version__}"


def test_json_and_runtime_lines_parse_where_torch_is_missing(single: Path, bare: Path) -> None:
    """`verify --runtime --json` is parsed by click from the zip: its answer is the torch it lacks."""
    done = _run(bare, single, "verify", "--runtime", "--json")
    assert done.returncode == 4 and done.stderr == "", done.stderr
    report = json.loads(done.stdout)
    assert (report["command"], report["exit_code"]) == ("verify", 4)
    assert report["message"].startswith("Expected `import torch` to find torch for ")


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


def _checks(done: subprocess.CompletedProcess[str]) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in json.loads(done.stdout)["checks"]}


@pytest.mark.e2e
@pytest.mark.usefixtures("shared_torch_venvs")
def test_verify_runtime_from_the_file_where_torch_imports(single: Path) -> None:
    """The torch venv's own Python runs the file: `verify --runtime` compiles Inductor's real path
    there, eager before apply (the text formatted with the logger filtered), lazy after."""
    python = torch_venv("2.10.0") / "bin" / "python"
    assert _run(python, single, "revert").returncode == 0
    try:
        eager = _run(python, single, "verify", "--runtime", "--json")
        assert eager.returncode == 1, eager.stderr
        assert (
            _checks(eager)["not_formatted_when_filtered"] is False
            and _checks(eager)["compiled_result_correct"]
        )
        assert _run(python, single, "apply").returncode == 0
        lazy = _run(python, single, "verify", "--runtime", "--json")
        assert lazy.returncode == 0 and all(_checks(lazy).values()), lazy.stdout
        assert "not_formatted_when_filtered" in _checks(lazy)
    finally:
        assert _run(python, single, "revert").returncode == 0


@pytest.mark.e2e
def test_diagnose_from_the_file_finds_py_spy_as_the_tool_does(single: Path, tmp_path: Path) -> None:
    """A process that imported torch, read by the file run with the torch venv's Python: no py-spy
    beside that Python nor on PATH is exit 4 naming the command that installs it; py-spy on PATH is
    found and the process judged."""
    from patcher.diagnose import stacks

    python = torch_venv("2.10.0") / "bin" / "python"
    process = subprocess.Popen(
        [str(python), "-c", "import torch, time; print('up', flush=True); time.sleep(120)", "pyz-diagnose"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None and process.stdout.readline() == "up\n"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        done = subprocess.run(
            [str(python), str(single), "diagnose", str(process.pid)],
            capture_output=True, text=True, env=env, cwd="/", timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 4 and f"{python} -m pip install 'py-spy>=0.4'" in done.stderr, done.stderr
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "py-spy").symlink_to(stacks.find())
        env["PATH"] = f"{tmp_path / 'bin'}:/usr/bin:/bin"
        done = subprocess.run(
            [str(python), str(single), "diagnose", str(process.pid), "--json"],
            capture_output=True, text=True, env=env, cwd="/", timeout=120, check=False,
        )  # fmt: skip
        (entry,) = json.loads(done.stdout)["processes"]
        assert entry["pid"] == process.pid and done.returncode in (0, 1), done.stderr
        if done.returncode == 1:  # its torch formats eagerly: the apply named is the file's own
            assert entry["next"] == f"{python} {single} apply --python {python}", entry
        assert entry["torch_dir"] == str(
            next((python.parent.parent / "lib").glob("python3*/site-packages/torch"))
        )
    finally:
        process.kill()
        process.wait(timeout=30)


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
