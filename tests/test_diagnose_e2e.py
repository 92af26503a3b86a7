"""diagnose on live processes: the custom-op chain compiled unpatched by real torch 2.10.0 in the
background (tests/scenarios/chain.py, a fresh Inductor cache each), read while it is in the slow path.
Every process a test starts is killed in a finally."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patcher.diagnose import judge, procs, stacks
from tests.conftest import need, torch_venv
from tests.diagnosing import diagnose_json, diagnose_text, probe_text, running
from tests.docs import command, commands
from tests.helpers import venv_tool

SCENARIO = Path(__file__).parent / "scenarios" / "chain.py"
TAG = "diagnose-e2e"  # an argument that marks this suite's processes
DEEP = 26  # minutes unpatched: still formatting when read

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("shared_torch_venvs")]


def _chain(venv: Path, depth: int, *extra: str) -> list[str]:
    return [str(venv / "bin" / "python"), str(SCENARIO), TAG, str(depth), *extra]


def _formatting(pid: int, timeout: float = 300, how: str = "eager") -> None:
    """Until a py-spy dump shows the process in the eager formatting (or the one `how` names)."""
    spy, end = stacks.find(), time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            sample = stacks.dump(spy, pid)
        except stacks.Failed:
            sample = ()
        if any((f := judge.formatting(s)) and f[0] == how for s in sample):
            return
        time.sleep(0.5)
    pytest.fail(f"process {pid} never reached the {how} formatting in {timeout:.0f} s")


def _pristine(venv: Path) -> None:
    code, report = venv_tool(venv, "revert")  # an interrupted run elsewhere may have left it patched
    assert code == 0, report


def _torch_dir(venv: Path) -> str:
    (found,) = venv.glob("lib/python3.*/site-packages/torch")
    return str(found)


def _torch_files(venv: Path) -> dict[str, tuple[bytes, int, int]]:
    """graph.py's directory and torch's dist-info: bytes, mode, mtime (the whole tree is 7 GB)."""
    torch_dir = Path(_torch_dir(venv))
    (dist_info,) = torch_dir.parent.glob("torch-*.dist-info")
    places = [torch_dir / "_inductor", torch_dir / "_inductor" / "__pycache__", dist_info]
    return {
        str(p): (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns)
        for place in places
        for p in sorted(place.iterdir())
        if p.is_file()
    } | {str(place): (b"", 0, place.stat().st_mtime_ns) for place in [torch_dir, *places]}


def test_a_deep_chain_is_named_and_keepsrunning(tmp_path: Path) -> None:
    venv = torch_venv("2.10.0")
    _pristine(venv)
    with running(_chain(venv, DEEP), tmp_path, "deep") as process:
        _formatting(process.pid)
        before = _torch_files(venv)
        start = time.monotonic()
        code, report, _ = diagnose_json(str(process.pid))
        assert time.monotonic() - start < 30
        assert _torch_files(venv) == before  # read, never written: not even a pyc or a lock file
        assert code == 1 and report["exit_code"] == 1 and report["state"] == "pristine", report
        (entry,) = report["processes"]
        assert entry["finding"] == "eager-formatting" and entry["pid"] == process.pid
        assert entry["in_formatting"] >= 1 and entry["str_depth"] >= 10
        assert entry["torch_dir"] == _torch_dir(venv)
        names = [f["name"] for f in entry["frames"]]
        assert "OperatorIssue.operator_str" in names and "GraphLowering.call_function" in names
        assert report["next"] == f"torch-lazylog apply --python {venv / 'bin' / 'python'}"
        text = diagnose_text(str(process.pid))
        assert text.returncode == 1 and "nested __str__ frames" in text.stdout
        assert _torch_dir(venv) in text.stdout and "Next: torch-lazylog apply --python" in text.stdout
        probed = probe_text(process.pid)  # the probe: stuck, and its first line names the fix
        first = probed.stdout.splitlines()[0]
        assert probed.returncode == 1 and first.startswith(f"stuck: PID {process.pid}: TL-D001"), probed
        assert f"; torch-lazylog apply --python {venv / 'bin' / 'python'}" in first, first
        time.sleep(1)
        assert process.poll() is None  # still compiling: read, not harmed
        _formatting(process.pid, timeout=10)


def test_a_parent_reports_both_ranks(tmp_path: Path) -> None:
    venv = torch_venv("2.10.0")
    _pristine(venv)
    with running(_chain(venv, DEEP, "--ranks", "2"), tmp_path, "ranks") as parent:
        end = time.monotonic() + 60
        while len(ranks := procs.read().below(parent.pid)) < 2 and time.monotonic() < end:
            time.sleep(0.2)
        assert len(ranks) == 2
        for rank in ranks:
            _formatting(rank)
        code, report, _ = diagnose_json(str(parent.pid))
        assert code == 1, report
        assert sorted(e["pid"] for e in report["processes"]) == ranks  # the parent has no torch loaded
        assert {e["finding"] for e in report["processes"]} == {"eager-formatting"}
        code, report, _ = diagnose_json(str(parent.pid), "--no-children")
        assert code == 4 and "has not imported torch" in report["message"], report


def test_a_diagnosed_run_ends_as_an_undiagnosed_one(tmp_path: Path) -> None:
    venv = torch_venv("2.10.0")
    _pristine(venv)
    with (
        running(_chain(venv, 22), tmp_path, "plain") as plain,
        running(_chain(venv, 22), tmp_path, "read") as read,
    ):
        _formatting(read.pid)
        for _ in range(3):
            code, report, _ = diagnose_json(str(read.pid))
            assert code == 1 and report["processes"][0]["finding"] == "eager-formatting", report
        assert read.wait(timeout=600) == 0 and plain.wait(timeout=600) == 0
    ours, theirs = (tmp_path / "read.out").read_text(), (tmp_path / "plain.out").read_text()
    assert ours == theirs and ours.endswith("done\n")


def test_after_apply_restart_it_then_it_reads_lazy(tmp_path: Path) -> None:
    venv = torch_venv("2.10.0")
    _pristine(venv)
    try:
        with running(_chain(venv, DEEP), tmp_path, "before") as before:
            _formatting(before.pid)
            assert venv_tool(venv, "apply")[0] == 0
            code, report, _ = diagnose_json(str(before.pid))
            (entry,) = report["processes"]
            assert code == 1 and entry["restart"] is True and entry["state"] == "patched", report
            assert "restart it" in entry["message"] and entry["next"] is None
        with running(_chain(venv, DEEP, "--stay"), tmp_path, "after") as after:
            end = time.monotonic() + 300
            while "done" not in (tmp_path / "after.out").read_text() and time.monotonic() < end:
                time.sleep(0.5)
            assert "done" in (tmp_path / "after.out").read_text()
            code, report, _ = diagnose_json(str(after.pid))
            (entry,) = report["processes"]
            assert code == 0 and entry["finding"] == "lazy" and entry["restart"] is False, report
            assert report["next"] is None
        with running(_chain(venv, DEEP), tmp_path, "info", TORCH_LOGS="inductor") as info:
            _formatting(info.pid, how="logging")  # lazy, and built all the same: INFO emits it
            code, report, _ = diagnose_json(str(info.pid))
            (entry,) = report["processes"]
            assert code == 0 and entry["finding"] == "info-formatting", report
            assert "TORCH_LOGS=inductor" in entry["message"] and entry["str_depth"] >= 10
    finally:
        _pristine(venv)


def test_a_torch_on_pythonpath_is_patched_by_the_advice_as_printed(tmp_path: Path) -> None:
    """A server run by the venv's base interpreter with the venv's site directory on PYTHONPATH:
    that interpreter alone imports no torch, so `apply --python` with it would find none. diagnose
    names the directory the process loaded; its advice, run as printed, patches that torch, verify
    then says lazy, and the process, restarted as it was, runs lazily."""
    venv = torch_venv("2.10.0")
    _pristine(venv)
    base = os.path.realpath(venv / "bin" / "python")
    torch_dir = _torch_dir(venv)
    alone = subprocess.run([base, "-c", "import torch"], capture_output=True)
    assert alone.returncode != 0, "the base interpreter imports a torch of its own"
    server = [base, str(SCENARIO), TAG, str(DEEP)]
    try:
        with running(server, tmp_path, "path", PYTHONPATH=os.path.dirname(torch_dir)) as process:
            _formatting(process.pid)
            code, report, _ = diagnose_json(str(process.pid))
            (entry,) = report["processes"]
            assert code == 1 and entry["interpreter"] == base and entry["torch_dir"] == torch_dir, report
            assert report["next"] == f"torch-lazylog apply --torch-dir {shlex.quote(torch_dir)}", report
            step = shlex.split(report["next"])
            applied = subprocess.run(
                [sys.executable, "-m", "patcher", *step[1:]], capture_output=True, text=True
            )
            assert applied.returncode == 0, applied.stderr
            verify = subprocess.run(
                [sys.executable, "-m", "patcher", "verify", *step[2:]], capture_output=True, text=True
            )
            assert verify.returncode == 0 and "formats the implicit-fallback log lazily" in verify.stdout
        done = subprocess.run(
            [*server[:-1], "40"],
            env=dict(os.environ, PYTHONPATH=os.path.dirname(torch_dir), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "i")),
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0 and done.stdout.endswith("done\n"), done.stderr[-2000:]
    finally:
        _pristine(venv)


def test_no_pid_finds_every_process_with_torch(tmp_path: Path) -> None:
    venv = torch_venv("2.10.0")
    _pristine(venv)
    with running(_chain(venv, DEEP), tmp_path, "any") as process:
        _formatting(process.pid)
        code, report, _ = diagnose_json()
        assert code == 1 and process.pid in [e["pid"] for e in report["processes"]], report


@pytest.mark.image
def test_a_container_is_diagnosed_from_the_host() -> None:
    from tests import images

    need(images.engine)
    base = need(images.rocm_base)
    assert isinstance(base, str)
    name = f"torch-lazylog-diagnose-{os.getpid()}"
    # docs/diagnose.md's example, as printed, with this run's names
    values: dict[str, str | list[str]] = {
        "demo": name, "IMAGE": base, "$PWD/tests/scenarios": str(SCENARIO.parent), "hang": TAG, "26": str(DEEP),
    }  # fmt: skip
    shown = command("diagnose-demo", values)
    assert shown[:2] == ["docker", "run"] and "/scenario/chain.py" in shown, shown
    started = images.docker(*shown[1:])
    assert started.returncode == 0, started.stderr
    try:
        inner = re.fullmatch(r"torch-lazylog diagnose \$\((docker .*)\)", commands("diagnose-demo")[1])
        assert inner, commands("diagnose-demo")
        pid = int(
            images.docker(*[name if w == "demo" else w for w in shlex.split(inner[1])][1:]).stdout.strip()
        )
        _formatting(pid)
        code, report, _ = diagnose_json(str(pid))
        (entry,) = report["processes"]
        assert code == 1 and entry["finding"] == "eager-formatting" and entry["container"] is True, report
        assert entry["torch_dir"].startswith("/opt/venv/lib/python3.")
        assert entry["torch_dir_read_at"] == f"/proc/{pid}/root{entry['torch_dir']}"
        assert entry["interpreter"] == "/opt/venv/bin/python" and entry["state"] == "pristine"
        assert report["next"] == "torch-lazylog apply --python /opt/venv/bin/python"
        assert "inside its container" in entry["message"] and entry["str_depth"] >= 10
        assert images.docker("inspect", "-f", "{{.State.Running}}", name).stdout.strip() == "true"
    finally:
        images.docker("rm", "-f", name)


def test_without_py_spy_it_says_how_to_get_it(tmp_path: Path) -> None:
    """The tool run by an interpreter with no py-spy beside it (the torch venv's) and none on PATH."""
    import click

    venv = torch_venv("2.10.0")
    imports = "import torch, time; time.sleep(120)"
    with running([str(venv / "bin" / "python"), "-c", imports, TAG], tmp_path, "torch") as process:
        end = time.monotonic() + 120
        while procs.torch_library(procs.loaded_files(process.pid)) is None and time.monotonic() < end:
            time.sleep(0.2)
        assert click.__file__ is not None
        path = os.pathsep.join([str(SCENARIO.parent.parent.parent), str(Path(click.__file__).parent.parent)])
        env = dict(os.environ, PYTHONPATH=path, PATH="/usr/bin:/bin")
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "patcher", "diagnose", str(process.pid)],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == 4 and done.stdout == "", done.stderr
        # that interpreter's environment has pip: its own pip is the command
        install = f"{venv / 'bin' / 'python'} -m pip install 'py-spy>=0.4'"
        assert install in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert process.poll() is None
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "py-spy").symlink_to(stacks.find())  # on PATH only: found there
        env["PATH"] = f"{tmp_path / 'bin'}:/usr/bin:/bin"
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "patcher", "diagnose", str(process.pid)],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == 1 and "the next deep graph it compiles can hang" in done.stdout, done.stderr
