"""diagnose on what others ship or do to a server, live on real torch 2.10.0 (tests/scenarios/
elsewhere.py): filelock's StrictSoftFileLock, a stopped and a traced server, a verify's shared lock
on the torch directory (issue 60)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from patcher.diagnose import findings, render
from patcher.diagnose.model import Unreadable
from tests.conftest import torch_venv
from tests.diagnosing import diagnose_json, running
from tests.stalling import TAG, diagnosed_at, printed

SCENARIO = Path(__file__).parent / "scenarios" / "elsewhere.py"


def _in_torch(tmp: Path, name: str, *args: str) -> AbstractContextManager[subprocess.Popen[str]]:
    python = torch_venv("2.10.0") / "bin" / "python"
    return running([str(python), str(SCENARIO), TAG, *args], tmp, name)


@pytest.mark.e2e
def test_a_strict_soft_file_lock_is_named_and_never_ok_when_its_holder_is_gone(tmp_path: Path) -> None:
    """StrictSoftFileLock's waiter: held by a live holder, it names it; once the holder is killed,
    its claim stays (never broken by age, only by force_break()), and the wait is a stall."""
    lock = tmp_path / "model.lock"
    with _in_torch(tmp_path, "holder", "strict", str(lock)) as holder:
        printed(tmp_path, "holder", "acquired")
        with _in_torch(tmp_path, "waiter", "strict", str(lock)) as waiter:
            printed(tmp_path, "waiter", "waiting")
            code, report, entry = diagnosed_at(
                waiter.pid, "_poll_until_acquired", "filelock/_core/_acquire.py"
            )
            assert (code, entry["finding"]) == (6, "strict-lock-held"), report
            assert f"PID {holder.pid}" in entry["message"] and "StrictSoftFileLock" in entry["message"]
            holder.kill()
            holder.wait(timeout=30)
            code, report, _ = diagnose_json(str(waiter.pid))
            (entry,) = report["processes"]
            assert (code, entry["finding"]) == (6, "strict-lock-orphaned"), report
            assert "force_break()" in entry["message"] and str(holder.pid) in entry["message"]
            assert report["next"] is None and waiter.poll() is None


def _status(pid: int, field: str) -> str:
    line = next(w for w in Path(f"/proc/{pid}/status").read_text().splitlines() if w.startswith(field + ":"))
    return line.split(":", 1)[1].strip()


@contextmanager
def _traced(pid: int) -> Iterator[subprocess.Popen[bytes]]:
    tracer = subprocess.Popen(["strace", "-q", "-o", "/dev/null", "-p", str(pid)])
    try:
        end = time.monotonic() + 30
        while _status(pid, "TracerPid") == "0" and time.monotonic() < end:
            time.sleep(0.1)
        yield tracer
    finally:
        tracer.terminate()
        tracer.wait(timeout=30)


@pytest.mark.e2e
def test_a_stopped_and_a_traced_server_are_named_so(tmp_path: Path) -> None:
    """SIGSTOP: named stopped, with the step that resumes it; under strace: named traced, with the
    tracer's PID, before py-spy is tried (py-spy fails on both: 'Failed to get stack traces')."""
    assert shutil.which("strace"), "strace is a system package .ci/run installs"
    with _in_torch(tmp_path, "idle", "idle") as server:
        printed(tmp_path, "idle", "idle")
        os.kill(server.pid, signal.SIGSTOP)
        try:
            code, report, _ = diagnose_json(str(server.pid))
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert code == 6 and "is stopped" in report["message"], report
        assert f"kill -CONT {server.pid}" in report["message"], report
        with _traced(server.pid) as tracer:
            code, report, _ = diagnose_json(str(server.pid))
            assert code != 0 and f"traced by PID {tracer.pid} (strace" in report["message"], report
            assert "Failed to get stack traces" not in report["message"]


@pytest.mark.e2e
def test_a_verifys_shared_lock_on_the_torch_directory_is_no_writer(tmp_path: Path) -> None:
    """verify takes the torch directory's flock shared (/proc/locks: READ): diagnose meanwhile says
    nothing of a reading taken mid-write."""
    torch_dir = next((torch_venv("2.10.0") / "lib").glob("python3*/site-packages/torch"))
    with (
        _in_torch(tmp_path, "idle", "idle") as server,
        _in_torch(tmp_path, "verify", "shared", str(torch_dir)),
    ):
        printed(tmp_path, "idle", "idle")
        printed(tmp_path, "verify", "held")
        assert any(" READ " in row for row in Path("/proc/locks").read_text().splitlines())
        code, report, _ = diagnose_json(str(server.pid))
        (entry,) = report["processes"]
        assert code in (0, 1) and "mid-write" not in entry["message"], report


def test_rights_advice_fits_the_reader() -> None:
    """Root without CAP_SYS_PTRACE is told to add it; another user never is (it changes nothing for
    a non-root reader): run as root or as the process's user."""
    rules = findings.load()
    unread = Unreadable(7, "rights", "python server.py", "stacks")
    assert "--cap-add SYS_PTRACE" in render.unread(unread, rules, "root")
    said = render.unread(unread, rules, "user")
    assert "--cap-add" not in said and "run diagnose as root, or as the process's user" in said, said
