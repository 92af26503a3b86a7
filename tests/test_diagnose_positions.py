"""diagnose from where operators stand, on live processes of real torch 2.10.0: on a node where a FUSE
daemon has stopped (it never waits on a file system); exec'd into a container whose PID 1 waits on
a stale lock (its steps, followed where they say, leave one server); as an unprivileged user beside
a root holder it cannot read (never called stale, never a removal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from patcher.diagnose import stacks
from tests import images, realdata
from tests.conftest import need, need_image
from tests.stalling import SCENARIO, TAG, in_torch, printed, reaches

pytestmark = [pytest.mark.e2e]

FUSEFS = Path(__file__).parent / "scenarios" / "fusefs.py"


@contextmanager
def _stopped_fuse(tmp: Path) -> Iterator[Path]:
    """A FUSE mount (tests/scenarios/fusefs.py) whose one file an unrelated process holds open, its
    daemon then stopped with SIGSTOP: every stat of that file from then on waits forever."""
    mount = tmp / "fuse"
    mount.mkdir()
    daemon = subprocess.Popen([sys.executable, str(FUSEFS), str(mount)])
    holder = None
    try:
        end = time.monotonic() + 30
        while not os.path.ismount(mount) and time.monotonic() < end:
            time.sleep(0.1)
        assert os.path.ismount(mount), "the FUSE daemon never mounted"
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys, time; f = open(sys.argv[1]); time.sleep(3600)",
                str(mount / "held"),
            ]
        )
        time.sleep(1)
        assert holder.poll() is None
        os.kill(daemon.pid, signal.SIGSTOP)
        yield mount
    finally:  # the daemon goes on first: the holder's exit closes its file, which asks the daemon
        os.kill(daemon.pid, signal.SIGCONT)
        if holder is not None:
            holder.kill()
            holder.wait(timeout=30)
        subprocess.run(["umount", "-l", str(mount)], check=False)
        daemon.kill()
        daemon.wait(timeout=30)


def test_a_stopped_fuse_daemon_does_not_hold_up_diagnose(tmp_path: Path) -> None:
    """An unrelated process holds a file open on a FUSE mount whose daemon is stopped: a stat of it
    never returns. diagnose of a server waiting on a stale lock elsewhere still answers (a
    subprocess timeout bounds the run), with the stale lock proven: the open files are read by
    device and inode from /proc/PID/fdinfo, never by a stat."""
    lock = tmp_path / "gate" / "lock"
    lock.parent.mkdir()
    lock.touch()  # a build killed midway left it
    with in_torch(tmp_path, "baton", "baton", str(lock)) as waiter:
        printed(tmp_path, "baton", "waiting")
        reaches(waiter.pid, "wait", "torch/utils/file_baton.py")
        with _stopped_fuse(tmp_path):
            done = subprocess.run(
                [sys.executable, "-m", "patcher", "diagnose", str(waiter.pid), "--json"],
                capture_output=True, text=True, timeout=20,
            )  # fmt: skip
        report: dict[str, Any] = json.loads(done.stdout)
        (entry,) = report["processes"]
        assert done.returncode == 6 and entry["finding"] == "jit-lock-stale", (
            done.stderr,
            entry["evidence"]["lock"]["not_in_view"],
            entry["evidence"]["lock"]["unread"],
            entry["evidence"]["lock"]["mount"],
        )
        assert entry["evidence"]["lock"]["not_in_view"] == [] and entry["steps"][0]["where"] == "here"


def _container(name: str, *options: str, command: list[str]) -> None:
    """A container of the stand-in base with this checkout, the tool's dependencies and py-spy
    mounted in (as a user's image would have the tool), the stall scenario at /scenario."""
    minor = images.rocm_python_minor()
    deps = realdata.deps_venv(images.interpreter(minor)) / "lib" / f"python{minor}" / "site-packages"
    checkout = Path(__file__).resolve().parent.parent
    created = images.docker(
        "create", "--name", name, "--cap-add", "SYS_PTRACE", "-v", f"{SCENARIO.parent}:/scenario:ro",
        "-v", f"{checkout}:/src:ro", "-v", f"{deps}:/deps:ro", "-v", f"{stacks.find()}:/usr/local/bin/py-spy:ro",
        "-e", "PYTHONPATH=/src:/deps", *options, need_image(images.rocm_base), *command,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr


def _logged(name: str, text: str, count: int, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if images.docker("logs", name, timeout=60).stdout.count(text) >= count:
            return
        time.sleep(0.5)
    pytest.fail(
        f"container {name} never printed {text!r} {count} times: {images.docker('logs', name).stdout}"
    )


def _diagnosed(name: str, *args: str, user: str = "0") -> tuple[int, dict[str, Any]]:
    """diagnose --json run with `docker exec` in the container (its PID and mount namespaces)."""
    done = images.docker(
        "exec", "-u", user, "-w", "/src", name, "/opt/venv/bin/python", "-m", "patcher", "diagnose", *args, "--json",
        timeout=120,
    )  # fmt: skip
    assert done.stdout and "Traceback" not in done.stderr, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def _servers(name: str) -> list[str]:
    shown = images.docker("top", name, "-eo", "pid,args").stdout.splitlines()
    return [line for line in shown if "stalls.py" in line]


@pytest.mark.image
def test_steps_printed_inside_a_container_whose_pid_1_waits_leave_one_server(tmp_path: Path) -> None:
    """`docker exec` into a container whose PID 1 waits in FileBaton.wait on a lock a killed build
    left: the steps are the removal (here) and the container's restart (from the host), never a
    start beside the PID 1 that still runs. Followed where each says, the container takes the lock
    with one server."""
    need(images.engine)
    name = f"torch-lazylog-exec-{os.getpid()}"
    _container(name, command=["/opt/venv/bin/python", "/scenario/stalls.py", TAG, "baton", "/gate/lock"])
    try:
        (tmp_path / "gate").mkdir()
        (tmp_path / "gate" / "lock").touch()
        assert images.docker("cp", str(tmp_path / "gate"), f"{name}:/gate").returncode == 0
        assert images.docker("start", name).returncode == 0
        _logged(name, "waiting", 1)
        reaches(
            int(images.docker("inspect", "-f", "{{.State.Pid}}", name).stdout),
            "wait",
            "torch/utils/file_baton.py",
        )
        code, report = _diagnosed(name, "1")
        (entry,) = report["processes"]
        assert code == 6 and entry["finding"] == "jit-lock-stale", entry
        assert report["next"] == "rm -- /gate/lock", report  # no start beside the PID 1 that still waits
        assert entry["position"] == "exec", entry
        host = images.docker("inspect", "-f", "{{.Config.Hostname}}", name).stdout.strip()
        steps = [(s["where"], s["run"]) for s in entry["steps"]]
        assert steps == [("here", "rm -- /gate/lock"), ("the host or orchestrator", f"docker restart {host}")]
        for where, run in steps:
            if where == "here":
                assert images.docker("exec", name, "sh", "-c", run).returncode == 0
            else:
                assert subprocess.run(["sh", "-c", run.replace("docker", images.DOCKER, 1)]).returncode == 0
        _logged(name, "acquired", 1)
        assert len(_servers(name)) == 1, _servers(name)
    finally:
        images.docker("rm", "-f", name)


@pytest.mark.image
def test_a_root_holder_an_unprivileged_reader_cannot_read_is_never_called_stale(tmp_path: Path) -> None:
    """The server runs as an unprivileged user and waits on the JIT lock; a root process in the same
    container holds it (FileBaton: created exclusively, kept open). diagnose as that user cannot read
    the holder: not proven stale, no removal; it names what it could not see and the read that can
    prove it, here as root."""
    need(images.engine)
    name = f"torch-lazylog-user-{os.getpid()}"
    _container(name, "--user", "1000:1000", command=["sleep", "3600"])
    try:
        assert images.docker("start", name).returncode == 0
        assert images.docker("exec", "-u", "0", name, "sh", "-c", "mkdir -m 1777 /gate").returncode == 0
        python = ["/opt/venv/bin/python", "/scenario/stalls.py", TAG]
        assert images.docker("exec", "-d", "-u", "0", name, *python, "hold", "/gate/lock").returncode == 0
        end = time.monotonic() + 120
        while images.docker("exec", name, "test", "-e", "/gate/lock").returncode and time.monotonic() < end:
            time.sleep(0.5)
        assert images.docker("exec", "-d", name, *python, "baton", "/gate/lock").returncode == 0
        code, report, waits = 0, {}, []  # type: tuple[int, dict[str, Any], list[dict[str, Any]]]
        while time.monotonic() < end:
            code, report = _diagnosed(name, user="1000:1000")  # its gid too: ptrace rights need both
            waits = [
                e for e in report.get("processes", []) if e["finding"] and e["finding"].startswith("jit-lock")
            ]
            if waits:
                break
            time.sleep(1)
        (entry,) = waits
        lock = entry["evidence"]["lock"]
        assert entry["finding"] == "jit-lock-unseen" and code == 6, entry
        assert lock["all_in_view"] is False and "unreadable" in lock["not_in_view"], lock
        assert "rm " not in json.dumps(entry["steps"]) and report["next"] is None, entry
        ((step, where),) = [(s["run"], s["where"]) for s in entry["steps"]]
        assert step.endswith(f" diagnose {entry['pid']}") and where == "here as root", entry["steps"]
        assert "could not be read" in entry["message"] and "Do not remove" in entry["message"]
        assert images.docker("exec", name, "test", "-e", "/gate/lock").returncode == 0
    finally:
        images.docker("rm", "-f", name)
