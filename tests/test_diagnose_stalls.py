"""diagnose names the other silent stalls of a start, on live processes of real torch 2.10.0 on the
CPU (tests/scenarios/stalls.py): a JIT build lock left behind or held, ranks out of step at a
collective, Inductor's compile workers gone, and a busy compile that is progress. Every process a
test starts is killed in a finally, the orphaned compile workers too (they outlive their parent)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import pytest

from patcher.diagnose import locks, procs, stacks
from tests.conftest import torch_venv
from tests.diagnosing import argv, diagnose_json, diagnose_text, probe_text, running
from tests.stalling import (
    ANSWER,
    READY,
    SCENARIO,
    TAG,
    children,
    diagnosed_at,
    in_torch,
    inside,
    printed,
    reaches,
)

pytestmark = [pytest.mark.e2e]


def _stale_lock(tmp: Path) -> Path:
    """TORCH_EXTENSIONS_DIR with x/lock in it already: a build killed midway."""
    (tmp / "ext" / "x").mkdir(parents=True)
    (tmp / "ext" / "x" / "lock").touch()
    return tmp / "ext"


def test_a_stale_jit_lock_step_followed_as_printed_gets_the_server_ready(tmp_path: Path) -> None:
    extensions = _stale_lock(tmp_path)
    lock = extensions / "x" / "lock"
    with in_torch(tmp_path, "lock", "lock", str(ANSWER), TORCH_EXTENSIONS_DIR=str(extensions)) as waiter:
        code, report, entry = diagnosed_at(waiter.pid, "wait", "torch/utils/file_baton.py")
        assert code == 6 and entry["finding"] == "jit-lock-stale" and entry["id"] == "TL-D101", report
        assert (
            f"JIT build lock {lock}" in entry["message"] and "which no process holds open" in entry["message"]
        )
        assert entry["evidence"]["lock"]["holders"] == [] and entry["evidence"]["lock"]["all_in_view"]
        stop_remove = f"kill {waiter.pid} && rm -- {shlex.quote(str(lock))} && cd "
        assert entry["next"].startswith(stop_remove), entry["next"]
        assert f"TORCH_EXTENSIONS_DIR={shlex.quote(str(extensions))}" in entry["next"]
        text = diagnose_text(str(waiter.pid))
        assert text.returncode == 6 and text.stdout.splitlines()[-1] == f"Next: {entry['next']}", text.stdout
        probed = probe_text(waiter.pid)  # the probe: stuck, naming the lock; it removes nothing either
        first = probed.stdout.splitlines()[0]
        assert probed.returncode == 6 and first.startswith(f"stuck: PID {waiter.pid}: TL-D101"), probed
        assert str(lock) in first, first
        assert lock.exists() and waiter.poll() is None  # read, nothing removed: still waiting
        step = text.stdout.splitlines()[-1].removeprefix("Next: ")
        with running(["bash", "-c", step], tmp_path, "again"):
            shown = printed(tmp_path, "again", READY)
            assert waiter.poll() is not None and "Error" not in shown, shown
            assert (extensions / "x" / "x.so").is_file() and not lock.exists()


def test_removing_a_stale_jit_lock_alone_ends_the_wait_in_an_import_error(tmp_path: Path) -> None:
    """Why the step stops and starts the server: torch < 2.14's waiter imports after the wait, it
    does not build (what TL-D101's sentence says)."""
    extensions = _stale_lock(tmp_path)
    with in_torch(tmp_path, "lock", "lock", str(ANSWER), TORCH_EXTENSIONS_DIR=str(extensions)) as waiter:
        reaches(waiter.pid, "wait", "torch/utils/file_baton.py")
        (extensions / "x" / "lock").unlink()
        assert waiter.wait(timeout=60) != 0
        assert (
            "ImportError" in (tmp_path / "lock.out").read_text() and not (extensions / "x" / "x.so").exists()
        )


def test_a_jit_lock_a_live_process_holds_names_the_holder_and_advises_no_removal(tmp_path: Path) -> None:
    extensions = _stale_lock(tmp_path)
    lock = extensions / "x" / "lock"
    lock.unlink()
    with in_torch(tmp_path, "hold", "hold", str(lock)) as holder:
        printed(tmp_path, "hold", "held")
        with in_torch(tmp_path, "lock", "lock", str(ANSWER), TORCH_EXTENSIONS_DIR=str(extensions)) as waiter:
            code, report, entry = diagnosed_at(waiter.pid, "wait", "torch/utils/file_baton.py")
            assert code == 6 and entry["finding"] == "jit-lock-held" and entry["id"] == "TL-D102", report
            assert f"held open by PID {holder.pid} (" in entry["message"], entry["message"]
            assert [h["pid"] for h in entry["evidence"]["lock"]["holders"]] == [holder.pid]
            assert report["next"] is None and "rm " not in entry["message"]
            assert "Do not remove the lock" in entry["message"]
            probed = probe_text(waiter.pid)  # a wait on a live holder ends on its own: the probe passes
            assert probed.returncode == 0, probed
            assert probed.stdout.startswith(
                (f"ok: PID {waiter.pid}: TL-D102", f"warning: PID {waiter.pid}: TL-D102")
            )
            assert lock.exists() and waiter.poll() is None


def test_a_holder_in_another_pid_namespace_is_never_called_stale(tmp_path: Path) -> None:
    """The waiter and diagnose in a PID namespace of their own (a container, `kubectl exec`); the
    holder outside it, on the same directory: no removal, and where the holder may be. From the host
    (its first PID namespace), the holder is named."""
    extensions = _stale_lock(tmp_path)
    lock = extensions / "x" / "lock"
    lock.unlink()
    python = torch_venv("2.10.0") / "bin" / "python"
    with in_torch(tmp_path, "hold", "hold", str(lock)) as holder:
        printed(tmp_path, "hold", "held")
        unshared = ["unshare", "--pid", "--fork", "--mount-proc", str(python), str(SCENARIO), TAG, "lock"]
        with running(
            [*unshared, str(ANSWER)], tmp_path, "lock", TORCH_EXTENSIONS_DIR=str(extensions)
        ) as shell:
            (waiter,) = children(shell.pid, 1)
            reaches(waiter, "wait", "torch/utils/file_baton.py")
            code, report = inside(waiter, str(procs.own_pid(waiter)))
            (entry,) = report["processes"]
            assert code == 6 and entry["finding"] == "jit-lock-unseen" and entry["id"] == "TL-D104", report
            mount = locks.mount_of(waiter, str(lock))
            assert mount is not None and entry["evidence"]["lock"]["mount"] == mount._asdict()
            said = entry["message"]
            assert f"lock is on {mount.fstype} {mount.source} mounted at {mount.point}" in said, said
            assert "Do not remove the lock" in said and "diagnose this process from the host" in said
            assert report["next"] is None and entry["next"] is None and "rm " not in said
            code, report, _ = diagnose_json(str(waiter))
            (entry,) = report["processes"]
            assert code == 6 and entry["finding"] == "jit-lock-held", report
            assert [h["pid"] for h in entry["evidence"]["lock"]["holders"]] == [holder.pid]
            assert lock.exists() and shell.poll() is None


def test_a_stale_lock_in_a_containers_namespaces_read_from_the_host_is_removed_inside(tmp_path: Path) -> None:
    """From the host every process is in view; the waiter's root is reached through /proc/PID/root,
    which is gone once it ends: the printed step removes the lock in its mount namespace, then stops
    it (the container is started again by whoever runs it)."""
    extensions = _stale_lock(tmp_path)
    lock = extensions / "x" / "lock"
    python = torch_venv("2.10.0") / "bin" / "python"
    unshared = ["unshare", "--pid", "--fork", "--mount-proc", str(python), str(SCENARIO), TAG, "lock"]
    with running([*unshared, str(ANSWER)], tmp_path, "lock", TORCH_EXTENSIONS_DIR=str(extensions)) as shell:
        (waiter,) = children(shell.pid, 1)
        code, report, entry = diagnosed_at(waiter, "wait", "torch/utils/file_baton.py")
        assert code == 6 and entry["finding"] == "jit-lock-stale" and entry["container"], report
        # its namespace's PID 1, which drops a SIGTERM it has no handler for
        step = f"nsenter --target={waiter} --mount -- rm -- {shlex.quote(str(lock))} && kill -KILL {waiter}"
        assert entry["next"] == step and "start the container again" in entry["message"]
        subprocess.run(["bash", "-c", entry["next"]], check=False)
        assert shell.wait(timeout=60) is not None and not lock.exists()


def _vendored(tmp: Path) -> Path:
    """A package of another name that carries its own copy of torch's FileBaton (as aiter does),
    and builds under it."""
    package = tmp / "vendor" / "batonkit"
    package.mkdir(parents=True)
    (package / "__init__.py").touch()
    torch_dir = torch_venv("2.10.0").glob("lib/python*/site-packages/torch")
    shutil.copyfile(next(torch_dir) / "utils" / "file_baton.py", package / "utils.py")
    (package / "jit.py").write_text(
        "import os\n\nfrom batonkit.utils import FileBaton\n\n\n"
        "def mp_lock(lock_path):\n    baton = FileBaton(lock_path)\n"
        "    if baton.try_acquire():\n        baton.release()\n    else:\n        baton.wait()\n\n\n"
        "def build(where):\n    mp_lock(os.path.join(where, 'build.lock'))\n"
    )
    return tmp / "vendor"


def test_a_file_baton_copy_in_a_package_of_another_name_is_named_with_its_lock(tmp_path: Path) -> None:
    (tmp_path / "jit").mkdir()
    lock = tmp_path / "jit" / "build.lock"
    lock.touch()
    with in_torch(
        tmp_path, "vendored", "vendored", str(_vendored(tmp_path)), str(tmp_path / "jit")
    ) as waiter:
        code, report, entry = diagnosed_at(waiter.pid, "wait", "batonkit/utils.py")
        assert code == 6 and entry["finding"] == "jit-lock-stale", report
        assert entry["evidence"]["lock"]["path"] == str(lock) and f"lock {lock}," in entry["message"]
        assert "FileBaton.wait (utils.py:" in entry["message"] or "wait (utils.py:" in entry["message"]


@pytest.mark.parametrize(
    ("how", "waits_in"),
    [
        pytest.param("flocked", ("acquire", "filelock/_core/_lock.py"), id="filelock-polls"),
        pytest.param("flock-blocked", ("flock_blocked", "stalls.py"), id="kernel-blocks"),
    ],
)
def test_an_flock_held_by_another_process_is_named_with_its_holder(
    tmp_path: Path, how: str, waits_in: tuple[str, str]
) -> None:
    lock = tmp_path / "cache.lock"
    with in_torch(tmp_path, "flock", "flock", str(lock)) as holder:
        printed(tmp_path, "flock", "held")
        with in_torch(tmp_path, how, how, str(lock)) as waiter:
            printed(tmp_path, how, "waiting")
            code, report, entry = diagnosed_at(waiter.pid, *waits_in)
            assert code == 6 and (entry["finding"], entry["id"]) == ("os-lock-held", "TL-D105"), report
            assert [h["pid"] for h in entry["evidence"]["lock"]["holders"]] == [holder.pid]
            assert (
                f"FLOCK lock on {lock} " in entry["message"]
                and f"held by PID {holder.pid} (" in entry["message"]
            )
            assert report["next"] is None and waiter.poll() is None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_a_rank_read_alone_reads_its_job_and_the_stall_comes_before_the_eager_torch(tmp_path: Path) -> None:
    """Two ranks started as torchrun starts them: rank 0 in barrier(), rank 1 in the user's own code.
    Rank 0 alone names rank 1 and the collective; rank 1 alone is the rank its job waits for; the
    launcher's run exits 6 with the ranks' step first, and, on the shared venv's torch as it is
    (unpatched, unless a suite holding the venvs' lock patched it meanwhile), the eager torch second."""
    python = torch_venv("2.10.0") / "bin" / "python"
    with in_torch(tmp_path, "ranks", "ranks", str(_free_port())) as launcher:
        ranks = children(launcher.pid, 2)
        by_rank = {argv(pid)[-1]: pid for pid in ranks}
        waiting, odd = by_rank["0"], by_rank["1"]
        reaches(waiting, "barrier", "torch/distributed/distributed_c10d.py")
        reaches(odd, "hold_back", "stalls.py")
        spy, apply = shlex.quote(stacks.find()), f"torch-lazylog apply --python {python}"

        code, report, _ = diagnose_json(str(waiting))
        (first,) = report["processes"]  # rank 1 is read as its job, and named in rank 0's paragraph
        assert (code, first["finding"], first["id"]) == (6, "ranks-out-of-step", "TL-D301"), report
        assert "waits in the collective barrier for ranks of its job on this machine" in first["message"]
        assert re.search(
            rf"PID {odd} \(rank 1\), (eager-torch|lazy), in hold_back \(stalls.py:\d+\)", first["message"]
        )
        assert first["evidence"]["collective"] == "barrier" and [
            r["pid"] for r in first["evidence"]["odd"]
        ] == [odd]
        assert report["next"] == first["next"] == f"{spy} dump --locals --pid {odd}"
        eager = "formats the implicit-fallback log eagerly" in first["message"]
        second = {"finding": "eager-torch", "id": "TL-D501", "exit_code": 1, "next": apply}
        assert first["second"] == (second if eager else None), first

        code, report, _ = diagnose_json(str(odd))
        (alone,) = report["processes"]
        assert (code, alone["finding"], alone["id"]) == (6, "rank-awaited", "TL-D304"), report
        assert (
            f"is the rank its job waits for: PIDs {waiting} wait in the collective barrier"
            in alone["message"]
        )
        assert (
            alone["evidence"]["awaited_by"] == [waiting]
            and report["next"] == f"{spy} dump --locals --pid {odd}"
        )

        text = diagnose_text(str(launcher.pid))
        lines = text.stdout.splitlines()
        assert text.returncode == 6 and [line.split()[1] for line in lines[:2]] == [str(waiting), str(odd)], (
            text
        )
        assert lines[-1] == f"Next: {spy} dump --locals --pid {odd}" and (f"`{apply}`" in lines[1]) == eager
        followed = subprocess.run(
            ["bash", "-c", lines[-1].removeprefix("Next: ")], capture_output=True, text=True
        )
        assert followed.returncode == 0 and "hold_back (stalls.py:" in followed.stdout, followed.stderr


def _carrying(parent: int) -> list[int]:
    """Live processes whose command line carries --parent=PARENT (the sidecar and its workers)."""
    return [p for p in procs.read().processes if f"--parent={parent}" in argv(p) and not procs.gone(p)]


def test_a_compile_worker_sidecar_gone_under_a_waiting_pool_is_named(tmp_path: Path) -> None:
    with in_torch(tmp_path, "workers", "workers") as parent:
        try:
            shown = printed(tmp_path, "workers", "sidecar ")
            sidecar = int(shown.split("sidecar ", 1)[1].split()[0])
            end = time.monotonic() + 120
            while len(_carrying(parent.pid)) < 2 and time.monotonic() < end:  # a worker runs the job
                time.sleep(0.2)
            reaches(parent.pid, "_recv_msg", "compile_worker/subproc_pool.py")
            code, report, _ = diagnose_json(str(parent.pid))
            (entry,) = report["processes"]  # the sidecar and its workers are read as the parent's
            assert entry["finding"] != "compile-workers-gone", report  # alive: waiting is normal
            os.kill(sidecar, 9)
            while not procs.gone(sidecar):
                time.sleep(0.1)
            orphans = sorted(_carrying(parent.pid))
            assert orphans and sidecar not in orphans
            code, report, _ = diagnose_json(str(parent.pid))
            (entry,) = report["processes"]
            assert code == 6 and entry["finding"] == "compile-workers-gone" and entry["id"] == "TL-D201", (
                report
            )
            assert entry["evidence"]["orphans"] == orphans and entry["evidence"]["sidecar"] is None
            assert " ".join(map(str, orphans)) in entry["message"]
            assert "TORCHINDUCTOR_COMPILE_THREADS=1" in report["next"] and parent.poll() is None
            assert (
                "TORCHINDUCTOR_FX_COMPILE_MODE" not in report["next"]
            )  # the async-compile pool: threads=1 suffices
        finally:
            for pid in _carrying(parent.pid):
                with suppress(ProcessLookupError):
                    os.kill(pid, 9)


def test_a_loop_compiling_new_functions_is_moving_with_its_torchs_code(tmp_path: Path) -> None:
    """Progress, never a stall; its exit code and step are its torch's (issue 53: one verdict for one
    state, whether a read catches it busy or between two compiles): 1 and apply on an eager torch."""
    apply = f"torch-lazylog apply --python {torch_venv('2.10.0') / 'bin' / 'python'}"
    with in_torch(tmp_path, "compile", "compile") as process:
        printed(tmp_path, "compile", "\n2\n", timeout=300)  # warm: past the first compiles
        seen = []  # a read on a loaded machine may find it below the busy share, or between compiles
        for _ in range(10):
            code, report, _ = diagnose_json(str(process.pid), "--samples", "5", "--interval", "0.2")
            (entry,) = report["processes"]
            eager = report["state"] == "pristine"
            assert code == int(eager) and report["next"] == (apply if eager else None), report
            for word in ("rm ", "kill", "remove"):
                assert word not in entry["message"]
            seen.append(entry["finding"])
            if entry["finding"] == "moving":
                break
        assert entry["finding"] == "moving" and entry["id"] == "TL-D401", (seen, report)
        assert entry["evidence"]["cpu_s"] > 0 and entry["evidence"]["phase"], entry
        assert "is busy and moving" in entry["message"]


@pytest.mark.parametrize(
    ("ops", "finding", "wait", "done"),
    [
        pytest.param(
            5, "compile-workers-gone", ("result", "concurrent/futures/_base.py"), "compiled", id="a-future"
        ),
        # about 110 kB pickled, more than the pipe holds; its compile in the process takes minutes here,
        # so the start is followed until it has compiled its first function without a sidecar
        pytest.param(
            40,
            "compile-workers-gone-writing",
            ("_send_msg", "subproc_pool.py"),
            "no sidecar",
            id="a-pipe-write",
        ),
    ],
)
def test_a_sidecar_killed_in_subprocess_mode_is_named_and_the_step_starts_without_a_pool(
    tmp_path: Path, ops: int, finding: str, wait: tuple[str, str], done: str
) -> None:
    """TORCHINDUCTOR_FX_COMPILE_MODE=subprocess: the sidecar compiles each graph. Killed, the next
    graph waits on its future (a small one) or blocks writing to the sidecar's pipe (a large one).
    What it left (its spawned worker and resource tracker, which torch's watchdog ends within 60 s)
    is listed while it lives; the printed step, run as it is, starts the scenario again, and that
    start compiles with no sidecar."""
    go = tmp_path / "go"
    left: list[int] = []
    with in_torch(
        tmp_path, "fx", "fx", str(go), str(ops), TORCHINDUCTOR_FX_COMPILE_MODE="subprocess"
    ) as main:
        try:
            sidecar = int(printed(tmp_path, "fx", "sidecar ").split("sidecar ", 1)[1].split()[0])
            left = procs.read().below(sidecar)  # its spawned worker and resource tracker
            assert left and all("--parent=" not in argv(p) for p in left)
            os.kill(sidecar, 9)
            go.touch()
            reaches(main.pid, *wait)
            code, report, _ = diagnose_json(str(main.pid))
            alive = [p for p in left if not procs.gone(p)]
            (entry,) = report["processes"]
            assert code == 6 and entry["finding"] == finding and entry["evidence"]["sidecar"] is None, report
            assert set(alive) <= set(entry["evidence"]["orphans"]) <= set(left), (left, alive, entry)
            assert "TORCHINDUCTOR_FX_COMPILE_MODE=subprocess" in entry["message"]
            step = report["next"]
            assert step == entry["next"] and step.startswith(
                f"kill {' '.join(map(str, [main.pid, *entry['evidence']['orphans']]))}; "
            )
            assert (
                "TORCHINDUCTOR_FX_COMPILE_MODE=normal" in step and "TORCHINDUCTOR_COMPILE_THREADS=1" in step
            )
            with running(["bash", "-c", step], tmp_path, "again") as again:
                shown = printed(tmp_path, "again", done, timeout=600)
                assert "no sidecar" in shown and main.wait(timeout=30) == -15, shown
                assert not [p for p in procs.read().below(again.pid) if "compile_worker" in " ".join(argv(p))]
        finally:
            for pid in left:
                with suppress(ProcessLookupError):
                    os.kill(pid, 9)
