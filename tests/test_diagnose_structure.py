"""diagnose's structure (issue 53): it reads /proc once a run, never waits on the install's lock, gives
one verdict for one state (a compiling server's short-lived children add nothing), and makes a rank
only from the launcher's variables. Live processes; real torch 2.10.0 where a rank or a compile is the
subject, a real release tree's torch mapped by a sleeping Python elsewhere."""

from __future__ import annotations

import fcntl
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from patcher.diagnose import run
from patcher.install import definitions
from tests.conftest import torch_venv
from tests.diagnosing import diagnose_json, loading, running
from tests.helpers import venv_tool

SCENARIO = Path(__file__).parent / "scenarios" / "stalls.py"
TAG = "diagnose-structure"  # an argument that marks this suite's processes


@contextmanager
def _holding(directory: Path) -> Iterator[None]:
    """Another process holding the torch directory's lock as apply does (flock, exclusive), stopped
    there as a stuck apply would be."""
    code = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX); print(flush=True); time.sleep(300)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(directory), TAG], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"\n"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_diagnose_answers_while_another_process_holds_the_torch_directorys_lock(
    release: Callable[[str], Path],
) -> None:
    """Case 8: a stuck apply holds the lock; diagnose reads graph.py without it (a run that waited on
    it would hit the timeout and fail here) and says the reading may be mid-write."""
    torch_dir = release("2.10.0")
    server = loading(torch_dir)
    try:
        with _holding(torch_dir):
            fd = os.open(torch_dir, os.O_RDONLY | os.O_DIRECTORY)
            try:  # the lock is really held: a reader that took it would wait
                with pytest.raises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            finally:
                os.close(fd)
            done = subprocess.run(
                [sys.executable, "-m", "patcher", "diagnose", str(server.pid), "--samples", "1", "--json"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        import json

        report = json.loads(done.stdout)
        assert done.returncode == 1 and report["state"] == "pristine", report
        assert "the reading may be mid-write" in report["message"], report["message"]
        code, report, _ = diagnose_json(str(server.pid), "--samples", "1")  # the lock released
        assert code == 1 and "mid-write" not in report["message"], report
    finally:
        server.kill()
        server.wait()


def test_proc_is_listed_once_a_run(release: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """One listing of /proc gives every process's facts; what a finding asks for later (holders,
    compile workers, the job's ranks, the CPU time's second look) is read from it."""
    listed: list[str] = []
    for name in ("listdir", "scandir"):
        real = getattr(os, name)

        def counting(path: Any = ".", real: Any = real) -> Any:
            if os.fspath(path).rstrip("/") == "/proc":
                listed.append(os.fspath(path))
            return real(path)

        monkeypatch.setattr(os, name, counting)
    torch_dir = release("2.10.0")
    first, second = loading(torch_dir), loading(torch_dir)
    try:
        options = run.Options((first.pid, second.pid), True, 2, 0.05, "torch-lazylog")
        report, entries = run.diagnose(options, definitions.load())
        assert report.code == 1 and [e["pid"] for e in entries] == [first.pid, second.pid], report
        assert listed == ["/proc"]
        listed.clear()
        run.diagnose(options._replace(pids=()), definitions.load())  # every process with torch
        assert listed == ["/proc"]
    finally:
        for process in (first, second):
            process.kill()
            process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int, count: int, timeout: float = 120) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        if len(found) >= count:
            return found
        time.sleep(0.2)
    pytest.fail(f"process {pid} never started {count} processes")


def _running(pids: list[int], python: Path, timeout: float = 120) -> None:
    """Until each of `pids` runs `python` (has exec'd it: a forked shell, or env, does not yet)."""
    binary, end = os.path.realpath(python), time.monotonic() + timeout
    while time.monotonic() < end:
        with suppress(OSError):
            if all(os.readlink(f"/proc/{pid}/exe") == binary for pid in pids):
                return
        time.sleep(0.2)
    pytest.fail(f"processes {pids} never all ran {binary}")


def _in_rendezvous(pids: list[int], timeout: float = 180) -> None:
    """Until every rank has imported torch and sits in init_process_group's rendezvous."""
    from patcher.diagnose import stacks

    spy, end = stacks.find(), time.monotonic() + timeout
    waiting: set[int] = set()
    while time.monotonic() < end and waiting != set(pids):
        for pid in set(pids) - waiting:
            with suppress(stacks.Failed):
                names = [f.name for s in stacks.dump(spy, pid) for f in s.frames]
                if any(n.endswith("init_process_group") for n in names):
                    waiting.add(pid)
        time.sleep(0.5)
    assert waiting == set(pids), f"ranks {set(pids) - waiting} never reached init_process_group"


@pytest.mark.e2e
@pytest.mark.usefixtures("shared_torch_venvs")
def test_ranks_a_shell_started_are_never_an_unrelated_process_of_the_same_shell(tmp_path: Path) -> None:
    """Case 5: a shell loop starts ranks 0 to 3 of a world of 5 (rank 4 never comes up) and an idle
    torch process (a metrics exporter) without the job's variables. The exporter is no rank: it is
    named in no rank's finding; the ranks' finding says rank 4 is no process on this machine, and as
    the rendezvous is this machine's, nothing here can end the wait: exit 6."""
    python = torch_venv("2.10.0") / "bin" / "python"
    job = f"MASTER_ADDR=127.0.0.1 MASTER_PORT={_free_port()} WORLD_SIZE=5 GLOO_SOCKET_IFNAME=lo"
    rank = f"{shlex.quote(str(python))} {shlex.quote(str(SCENARIO))} {TAG} rank 0"
    exporter = f"{shlex.quote(str(python))} -c 'import torch, time; time.sleep(3600)' {TAG}"
    script = f"for r in 0 1 2 3; do env {job} RANK=$r {rank} $r & done; {exporter} & wait"
    with running(["sh", "-c", script], tmp_path, "ranks") as shell:
        pids = _children(shell.pid, 5)
        _running(pids, python)  # a child read before its exec would be the shell, whose text names "rank"
        ranks = [p for p in pids if "rank" in Path(f"/proc/{p}/cmdline").read_text()]
        (other,) = set(pids) - set(ranks)
        _in_rendezvous(ranks)
        code, report, _ = diagnose_json(str(shell.pid))
    entries = {e["pid"]: e for e in report["processes"]}
    assert set(entries) == set(pids), report
    assert code == 6 and report["exit_code"] == 6, report
    for pid in ranks:
        assert (entries[pid]["finding"], entries[pid]["id"]) == ("rank-absent", "TL-D305"), entries[pid]
        assert "for rank 4 of its job, which no process on this machine is" in entries[pid]["message"]
        assert str(other) not in entries[pid]["message"]
        assert entries[pid]["evidence"]["absent_ranks"] == [4]
    assert entries[other]["finding"] == "eager-torch" and not entries[other]["evidence"], entries[other]


@pytest.mark.e2e
@pytest.mark.usefixtures("shared_torch_venvs")
def test_ten_reads_of_a_compiling_server_with_workers_say_the_same(tmp_path: Path) -> None:
    """Case 6: a server compiling one function after another with Inductor's compile workers (their
    sidecar, its pool, the compilers they start: short-lived children that come and go between two
    reads). Ten reads: one process judged each time, the same exit code and the same `Next:`."""
    venv = torch_venv("2.10.0")
    assert venv_tool(venv, "revert")[0] == 0  # an interrupted run elsewhere may have left it patched
    python = venv / "bin" / "python"
    command = [str(python), str(SCENARIO), TAG, "compile"]
    with running(command, tmp_path, "compile", TORCHINDUCTOR_COMPILE_THREADS="2") as server:
        end = time.monotonic() + 300
        while time.monotonic() < end and (tmp_path / "compile.out").read_text().count("\n") < 2:
            time.sleep(0.5)
        assert len(_children(server.pid, 1)) >= 1  # its compile workers' sidecar
        said = [diagnose_json(str(server.pid)) for _ in range(10)]
    # One answer: read on main, the same server read 0 (moving) or 1 (its eager torch) by timing.
    assert len({code for code, _, _ in said}) == 1, [r["message"] for _, r, _ in said]
    assert len({r["next"] for _, r, _ in said}) == 1, [r["next"] for _, r, _ in said]
    assert said[0][0] == 1 and said[0][1]["next"] == f"torch-lazylog apply --python {python}"
    assert all([e["pid"] for e in r["processes"]] == [server.pid] for _, r, _ in said), said
    assert all(r["problems"] == [] for _, r, _ in said)
    assert any((r["processes"][0]["evidence"] or {}).get("children") for _, r, _ in said)
