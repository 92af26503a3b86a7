"""Locating torch as the target interpreter will when the server starts: its environment counts.

Real torch 2.10.0 trees (torch/__init__.py made to raise: nothing may import them) in real venvs
of another CPython than the runner, and on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from patcher.install import definitions, interpreter, locate
from tests import realdata
from tests.conftest import need, need_other_python, snapshot
from tests.helpers import check_pyc, make_pyc

ROOT = Path(__file__).resolve().parent.parent
NO_IMPORT = "raise RuntimeError('torch was imported')\n"


def _tree(destination: Path) -> Path:
    """A real 2.10.0 tree below `destination` (a site directory); returns its torch directory."""
    torch_dir = need(lambda: realdata.release_tree("2.10.0", destination))
    assert isinstance(torch_dir, Path)
    (torch_dir / "__init__.py").write_text(NO_IMPORT)
    return torch_dir


def _purelib(python: Path) -> Path:
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def _venv(tmp_path: Path, name: str = "venv") -> Path:
    """A real venv (no pip, fast) of another CPython than the runner: never this process."""
    venv = tmp_path / name
    subprocess.run([str(need_other_python()), "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


def _json(result: Result) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_the_pythonpath_copy_is_the_one_patched_and_verified(
    tmp_path: Path, run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = _venv(tmp_path)
    python = str(venv / "bin" / "python")
    in_venv = _tree(_purelib(venv / "bin" / "python"))
    on_path = _tree(tmp_path / "pythonpath")
    monkeypatch.setenv("PYTHONPATH", str(on_path.parent))
    untouched = snapshot(in_venv.parent)

    applied = run("apply", "--python", python, "--json")
    assert applied.exit_code == 0, applied.output
    assert (_json(applied)["torch_dir"], _json(applied)["state"]) == (str(on_path), "patched")
    assert run("verify", "--python", python).exit_code == 0
    target = locate.locate(python, None, definitions.load())
    assert (target.torch_dir, target.owner) == (on_path, python)
    assert target.torch_path_entry == str(on_path.parent)
    assert snapshot(in_venv.parent) == untouched  # the copy `import torch` does not load: byte for byte

    for given in (["--python", python], []):  # the interpreter given, or the one derived as its owner
        for command in ("verify", "apply", "revert"):
            result = run(command, "--torch-dir", str(in_venv), *given, "--json")
            assert result.exit_code == 4, (command, given, result.output)
            message = _json(result)["message"]
            assert message.startswith(f"Expected `import torch` in {python} "), message
            assert f"but it loads {on_path} (sys.path entry {on_path.parent})" in message
    assert snapshot(in_venv.parent) == untouched


def test_neither_the_working_directory_nor_a_safe_path_changes_what_is_found(
    tmp_path: Path, run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a directory holding a torch (a pytorch checkout): the server does not import it. With
    PYTHONSAFEPATH nothing is put first, so nothing is taken off: PYTHONPATH's first entry stays."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    in_venv = _tree(_purelib(venv / "bin" / "python"))
    checkout = _tree(tmp_path / "checkout")
    monkeypatch.chdir(checkout.parent)
    assert _json(run("verify", "--python", python, "--json"))["torch_dir"] == str(in_venv)

    on_path = _tree(tmp_path / "pythonpath")
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    monkeypatch.setenv("PYTHONPATH", str(on_path.parent))
    assert _json(run("verify", "--python", python, "--json"))["torch_dir"] == str(on_path)


def test_a_torch_dir_is_owned_by_the_interpreter_beside_it(
    tmp_path: Path, run: Callable[..., Result]
) -> None:
    venv = _venv(tmp_path)
    python = str(venv / "bin" / "python")
    torch_dir = _tree(_purelib(venv / "bin" / "python"))
    target = locate.locate(None, str(torch_dir), definitions.load())
    assert (target.owner, target.torch_path_entry) == (python, str(torch_dir.parent))
    assert target.interpreter.executable == python and not interpreter.in_process(python)

    # The owner, not the runner, rebuilds graph.py's bytecode: its cache tag, its magic number.
    graph = torch_dir / "_inductor" / "graph.py"
    owned = make_pyc(graph, "checked-hash", 0, python=python)
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    seen = check_pyc(owned, graph, 0, python)
    assert seen == {"flags": 3, "magic_ok": True, "fresh": True, "same_code": True}
    assert run("verify", "--torch-dir", str(torch_dir)).exit_code == 0
    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0


def test_a_bare_tree_has_no_owner_and_is_checked_on_its_bytes(tmp_path: Path) -> None:
    torch_dir = _tree(tmp_path / "site")
    target = locate.locate(None, str(torch_dir), definitions.load())
    assert (target.owner, target.torch_path_entry) == (None, None)
    assert (
        interpreter.in_process(target.interpreter.executable)
        and target.interpreter.executable == sys.executable
    )


def _tool(python: Path, *args: str, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), *args, "--json"], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_two_names_of_one_interpreter_give_the_same_report(tmp_path: Path) -> None:
    """In-process (the tool run by that interpreter), by another name in its bin, by a symlink beside
    it, from another interpreter: one environment, one answer. torch is on PYTHONPATH only; the tool
    runs from a directory that holds another torch, which the server would not import."""
    venv = _venv(tmp_path)
    bin_dir = venv / "bin"
    (bin_dir / "server-python").symlink_to("python")
    on_path = _tree(tmp_path / "pythonpath")
    deps = need(lambda: realdata.deps_venv(need_other_python()))
    assert isinstance(deps, Path)
    pythonpath = os.pathsep.join([str(on_path.parent), str(ROOT), str(_purelib(deps / "bin" / "python"))])
    env = dict(os.environ, PYTHONPATH=pythonpath)
    cwd = _tree(tmp_path / "checkout").parent
    tool = ["-m", "patcher"]
    # The tool itself started with -E (PYTHONPATH ignored): the plainly started target still sees it.
    started_with_e = (
        f"import sys; sys.path[:0] = {pythonpath.split(os.pathsep)[1:]!r}; "
        "sys.argv[0] = 'torch-lazylog'; from patcher.cli.app import main; main()"
    )
    assert _tool(bin_dir / "python", *tool, "apply", env=env, cwd=cwd)["changed"] is True

    reports = [
        _tool(bin_dir / "python", *tool, "verify", env=env, cwd=cwd),  # in-process
        _tool(bin_dir / "python3", *tool, "verify", "--python", str(bin_dir / "python"), env=env, cwd=cwd),
        _tool(
            bin_dir / "python", "-E", "-c", started_with_e, "verify", env=env, cwd=cwd
        ),  # asks a plain start
        *(
            _tool(Path(sys.executable), *tool, "verify", "--python", str(bin_dir / name), env=env, cwd=cwd)
            for name in ("python", "python3", "server-python")
        ),
    ]
    assert reports[0]["torch_dir"] == str(on_path) and reports[0]["state"] == "patched"
    assert all(report == reports[0] for report in reports), reports


def _site(kind: str, prefix: str, version: str) -> str:
    return f"{prefix}/lib/python{version}/{kind}-packages"


@pytest.mark.parametrize(
    ("site", "candidates"),
    [
        pytest.param(
            _site("site", "/opt/venv", "{v}"),
            ["/opt/venv/bin/python", "/opt/venv/bin/python3", "/opt/venv/bin/python{v}"],
            id="venv",
        ),
        pytest.param(
            _site("site", "/opt/conda/envs/py", "{v}"),
            [
                "/opt/conda/envs/py/bin/python",
                "/opt/conda/envs/py/bin/python3",
                "/opt/conda/envs/py/bin/python{v}",
            ],
            id="conda-env",
        ),
        pytest.param("/usr/lib/python3/dist-packages", ["/usr/bin/python3"], id="debian-system"),
        pytest.param(
            _site("dist", "/usr/local", "{v}"), ["/usr/bin/python{v}", "/usr/bin/python3"], id="debian-local"
        ),
        pytest.param(
            "/srv/app/lib64/python{v}/site-packages",
            ["/srv/app/bin/python", "/srv/app/bin/python3", "/srv/app/bin/python{v}"],
            id="lib64",
        ),
        pytest.param("/tmp/site", [], id="bare-tree"),
        pytest.param("/opt/venv/lib/python{v}/site-packages/extra", [], id="below-a-site"),
    ],
)
def test_owner_candidates_come_from_where_the_site_directory_lives(site: str, candidates: list[str]) -> None:
    v = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert locate.owner_candidates(site.format(v=v)) == [c.format(v=v) for c in candidates]


def test_advice_with_only_a_torch_dir_names_the_target_interpreter(
    tmp_path: Path, run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-uv"))  # no installer on PATH: the advice is the target's
    venv = _venv(tmp_path)
    python = str(venv / "bin" / "python")
    torch_dir = _tree(_purelib(venv / "bin" / "python"))
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    graph = torch_dir / "_inductor" / "graph.py"
    graph.write_bytes(graph.read_bytes() + b"# edited after apply\n")
    result = run("revert", "--torch-dir", str(torch_dir), "--json")  # only a reinstall can fix this
    advice = _json(result)["next"]
    # that venv has no pip (and this machine no uv on PATH): what to do, for that interpreter
    assert result.exit_code == 3 and "has no pip and no uv is on PATH" in advice, result.output
    assert advice.startswith(f"reinstall torch==2.10.0 for {shlex.quote(python)} "), advice
    assert sys.executable not in advice


def test_the_runtime_probe_never_runs_in_this_process(tmp_path: Path) -> None:
    """inductor.answer changes the working directory and imports torch: even asked with no interpreter
    and no environment of its own (where interp runs in-process), call starts a process for it."""
    from patcher.in_target import inductor

    here = os.getcwd()
    request = {"depth": 1, "expect_graph": str(tmp_path / "graph.py"), "cwd": str(tmp_path)}
    answer = interpreter.call(None, inductor, request, "run the runtime check")
    assert os.getcwd() == here and "torch" not in sys.modules
    assert str(answer["error"]).startswith("import torch failed: ModuleNotFoundError"), answer
    assert interpreter.in_process(None)  # what would have run it here


def test_torchs_metadata_is_read_once_when_it_is_located(release: Callable[[str], Path]) -> None:
    """The distribution's version is read from METADATA once, when torch is located: the refusal's
    vendor check and the reinstall advice's version reuse it (they read it again each before).
    Counted by the interpreter's own audit events, whatever reads the file."""
    from patcher.core.errors import LazylogError
    from patcher.install import reading

    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    graph.write_bytes(graph.read_bytes().replace(b"log.info(\n", b"log.warning(\n", 1))  # refused
    reads: list[str] = []
    counting = [True]

    def opened(event: str, args: tuple[object, ...]) -> None:
        if counting[0] and event == "open" and str(args[0]).endswith(os.sep + "METADATA"):
            reads.append(str(args[0]))

    sys.addaudithook(opened)  # a hook stays for the process: `counting` ends what it records
    try:
        spec = definitions.load()
        target = locate.locate(None, str(torch_dir), spec)
        with pytest.raises(LazylogError) as raised:
            reading.verify(target, spec)
        assert raised.value.next == "reinstall"  # a release's graph.py changed: not a vendor build
        assert reading.install_of(target).dist_version == "2.10.0"
    finally:
        counting[0] = False
    assert len(reads) == 1, reads
