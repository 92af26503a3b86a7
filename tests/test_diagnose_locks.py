"""diagnose judges a waited lock by its file's identity and its protocol, on live processes of real
torch (tests/scenarios/stalls.py): a lock reached by another spelling, a marker a live process made,
filelock's SoftFileLock, lock paths built by methods and attributes, an OS lock held from outside
the reader's PID namespace. Each printed step is followed as printed."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from patcher.diagnose import stacks
from tests import images, realdata
from tests.conftest import need, need_image, torch_venv
from tests.diagnosing import running
from tests.stalling import ANSWER, SCENARIO, TAG, children, diagnosed_at, in_torch, inside, printed, reaches

pytestmark = [pytest.mark.e2e]


def test_a_lock_held_by_its_real_path_while_waited_on_through_a_symlink_names_its_builder(
    tmp_path: Path,
) -> None:
    """The cache dir reached through a symlink (a quota-limited home's ~/.cache): the builder holds
    real/x/lock, the waiter waits on link/x/lock. Same file, so a live holder: no removal."""
    (tmp_path / "real" / "x").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with in_torch(tmp_path, "hold", "hold", str(tmp_path / "real" / "x" / "lock")) as builder:
        printed(tmp_path, "hold", "held")
        with in_torch(
            tmp_path, "lock", "lock", str(ANSWER), TORCH_EXTENSIONS_DIR=str(tmp_path / "link")
        ) as waiter:
            code, report, entry = diagnosed_at(waiter.pid, "wait", "torch/utils/file_baton.py")
            assert code == 6 and entry["finding"] == "jit-lock-held", report
            assert entry["evidence"]["lock"]["path"] == str(tmp_path / "link" / "x" / "lock")
            assert [h["pid"] for h in entry["evidence"]["lock"]["holders"]] == [builder.pid]
            assert report["next"] is None and entry["next"] is None and "rm " not in entry["message"]
            assert (tmp_path / "real" / "x" / "lock").exists() and builder.poll() is None


def test_a_marker_a_live_process_made_and_closed_is_named_and_never_removed(tmp_path: Path) -> None:
    """A loop that waits for a file to vanish, whose maker created it and closed it: nobody holding
    it open proves nothing, so the wait is named and no step removes it."""
    marker = tmp_path / "warm.marker"
    with in_torch(tmp_path, "mark", "mark", str(marker)) as maker:
        printed(tmp_path, "mark", "marked")
        with in_torch(tmp_path, "marker", "marker", str(marker)) as waiter:
            printed(tmp_path, "marker", "waiting")
            code, report, entry = diagnosed_at(waiter.pid, "marker", "stalls.py")
            assert code == 6 and (entry["finding"], entry["id"]) == ("marker-wait", "TL-D106"), entry
            said = entry["message"]
            assert f"for the file {marker} to vanish" in said and "owned by root" in said, said
            assert "cannot tell whether its maker lives" in said and "no process holds it open" in said
            assert entry["evidence"]["lock"]["protocol"] == "marker"
            assert report["next"] is None and entry["next"] is None and "rm " not in said
            assert marker.exists() and maker.poll() is None and waiter.poll() is None


def test_a_soft_file_lock_held_names_its_holder(tmp_path: Path) -> None:
    lock = tmp_path / "model.lock"
    with in_torch(tmp_path, "holder", "soft", str(lock)) as holder:
        printed(tmp_path, "holder", "acquired")
        with in_torch(tmp_path, "waiter", "soft", str(lock)) as waiter:
            printed(tmp_path, "waiter", "waiting")
            code, report, entry = diagnosed_at(
                waiter.pid, "_poll_until_acquired", "filelock/_core/_acquire.py"
            )
            assert code == 6 and entry["finding"] == "jit-lock-held", report
            assert entry["evidence"]["lock"]["protocol"] == "soft"
            assert f"filelock's SoftFileLock {lock}," in entry["message"], entry["message"]
            assert [h["pid"] for h in entry["evidence"]["lock"]["holders"]] == [holder.pid]
            assert report["next"] is None and waiter.poll() is None


def test_a_soft_file_lock_left_behind_is_removed_by_the_step_as_printed(tmp_path: Path) -> None:
    """An empty marker (as a filelock before 3.22 leaves it, and as it is while its holder writes its
    record) that no process holds open: filelock never takes it over; the printed step frees the
    waiter, which then takes the lock."""
    lock = tmp_path / "model.lock"
    lock.touch()
    with in_torch(tmp_path, "waiter", "soft", str(lock)) as waiter:
        printed(tmp_path, "waiter", "waiting")
        code, report, entry = diagnosed_at(waiter.pid, "_poll_until_acquired", "filelock/_core/_acquire.py")
        assert code == 6 and (entry["finding"], entry["id"]) == ("soft-lock-stale", "TL-D107"), report
        assert entry["next"] == f"rm -- {shlex.quote(str(lock))}", entry
        subprocess.run(["bash", "-c", entry["next"]], check=True)
        printed(tmp_path, "waiter", "acquired")
        assert waiter.poll() is None


@pytest.mark.parametrize("how", ["derived", "method", "late"])
def test_a_lock_path_built_by_a_method_or_an_attribute_is_named_and_the_step_works(
    tmp_path: Path, how: str
) -> None:
    """A copy of FileBaton's protocol whose path comes from the constructor's argument through an
    expression, from a method, or from an attribute set outside __init__."""
    lock = tmp_path / f"{how}.lock"
    lock.touch()
    with in_torch(tmp_path, "gate", "gate", how, str(tmp_path)) as waiter:
        printed(tmp_path, "gate", "waiting")
        code, report, entry = diagnosed_at(waiter.pid, f"wait_{how}", "stalls.py")
        assert code == 6 and entry["finding"] == "jit-lock-stale", report
        assert entry["evidence"]["lock"]["path"] == str(lock)
        assert entry["next"].startswith(f"kill {waiter.pid} && rm -- {shlex.quote(str(lock))} && cd ")
        with running(["bash", "-c", entry["next"]], tmp_path, "again"):
            printed(tmp_path, "again", "acquired")
            assert waiter.poll() is not None


@pytest.mark.parametrize(
    ("version", "how", "waits_in"),
    [
        pytest.param("2.10.0", "flocked", ("_poll_until_acquired", "filelock/_core/_acquire.py"), id="filelock"),
        pytest.param("2.10.0", "flock-blocked", ("flock_blocked", "stalls.py"), id="fcntl.flock"),
        pytest.param("2.14.1", "lock", ("_poll_until_acquired", "filelock/_core/_acquire.py"), id="torch-2.14"),
    ],
)  # fmt: skip
def test_an_os_lock_held_outside_the_readers_pid_namespace_is_named(
    tmp_path: Path, version: str, how: str, waits_in: tuple[str, str]
) -> None:
    """The waiter and diagnose in a PID namespace of their own, the holder outside: /proc/locks there
    lacks the holder's row (and the waiter's), but the waiter's frames, or the flock call it blocks
    in, name the wait. On 2.10.0, filelock's FileLock and a bare fcntl.flock; on 2.14.1, torch's own
    JIT build lock (torch/utils/_filelock.py), held by a build outside."""
    python = torch_venv(version) / "bin" / "python"
    if version == "2.10.0":
        lock, args, variables = tmp_path / "cache.lock", [how, str(tmp_path / "cache.lock")], {}
    else:
        (tmp_path / "ext" / "x").mkdir(parents=True)
        lock, args = tmp_path / "ext" / "x" / "lock", ["lock", str(ANSWER)]
        variables = {"TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    with in_torch(tmp_path, "flock", "flock", str(lock)) as holder:
        printed(tmp_path, "flock", "held")
        unshared = ["unshare", "--pid", "--fork", "--mount-proc", str(python), str(SCENARIO), TAG, *args]
        with running(unshared, tmp_path, "waiter", **variables) as shell:
            (waiter,) = children(shell.pid, 1)
            printed(tmp_path, "waiter", "waiting" if version == "2.10.0" else "loading")
            reaches(waiter, *waits_in)
            code, report = inside(waiter, "1")
            (entry,) = report["processes"]
            assert code == 6 and (entry["finding"], entry["id"]) == ("os-lock-unseen", "TL-D108"), report
            said = entry["message"]
            assert f"lock on {lock} " in said and "not in view" in said, said
            assert "/proc/locks leaves out the locks of processes outside it" in said
            assert entry["evidence"]["lock"]["protocol"] == "kernel"
            assert report["next"] is None and "rm " not in said
            assert holder.poll() is None and shell.poll() is None and os.path.exists(lock)


def _debugging(target: str, checkout: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """`command` in a debug container that shares only the target's PID namespace (`docker run
    --pid=container:X --cap-add SYS_PTRACE`, as `kubectl debug --target` makes one): its own mounts,
    Docker's default capabilities (no CAP_SYS_ADMIN), this checkout's diagnose on the image's Python
    with the tool's dependencies and py-spy mounted in."""
    minor = images.rocm_python_minor()
    deps = realdata.deps_venv(images.interpreter(minor)) / "lib" / f"python{minor}" / "site-packages"
    return images.docker(
        "run", "--rm", f"--pid=container:{target}", "--cap-add", "SYS_PTRACE",
        "-v", f"{checkout}:/src:ro", "-v", f"{deps}:/deps:ro", "-v", f"{stacks.find()}:/usr/local/bin/py-spy:ro",
        "-e", "PYTHONPATH=/src:/deps", "-w", "/src", need_image(images.rocm_base), *command, timeout=300,
    )  # fmt: skip


def _logged(name: str, text: str, count: int, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if images.docker("logs", name, timeout=60).stdout.count(text) >= count:
            return
        time.sleep(0.5)
    pytest.fail(
        f"container {name} never printed {text!r} {count} times: {images.docker('logs', name).stdout}"
    )


@pytest.mark.image
def test_a_stale_lock_read_from_a_debug_container_gets_a_step_that_runs_there(tmp_path: Path) -> None:
    """The server is its container's PID 1, waiting in torch's FileBaton.wait on a lock a killed
    build left in the container's own root; diagnose runs in a debug container that shares only its
    PID namespace. `nsenter --mount` would fail there (no CAP_SYS_ADMIN) and `kill -KILL 1` is dropped:
    the step removes the lock through /proc/1/root, and the next step, in --json too, is the restart
    to run from the host (`docker restart ID`, the ID its hostname says). Both, run where they say,
    get it to take the lock."""
    need(images.engine)
    image = need_image(images.rocm_base)
    checkout = Path(__file__).resolve().parent.parent
    name = f"torch-lazylog-locks-{os.getpid()}"
    created = images.docker(
        "create", "--name", name, "-v", f"{SCENARIO.parent}:/scenario:ro", image,
        "/opt/venv/bin/python", "/scenario/stalls.py", TAG, "baton", "/gate/lock",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    try:
        (tmp_path / "gate").mkdir()
        (tmp_path / "gate" / "lock").touch()  # a build killed midway left it
        assert images.docker("cp", str(tmp_path / "gate"), f"{name}:/gate").returncode == 0
        assert images.docker("start", name).returncode == 0
        _logged(name, "waiting", 1)
        pid = int(images.docker("inspect", "-f", "{{.State.Pid}}", name).stdout)
        reaches(pid, "wait", "torch/utils/file_baton.py")
        done = _debugging(name, checkout, "/opt/venv/bin/python", "-m", "patcher", "diagnose", "1", "--json")
        report: dict[str, Any] = json.loads(done.stdout)
        (entry,) = report["processes"]
        assert done.returncode == 6 and entry["finding"] == "jit-lock-stale", (done.stderr, entry)
        assert entry["next"] == "rm -- /proc/1/root/gate/lock", entry
        host = images.docker("inspect", "-f", "{{.Config.Hostname}}", name).stdout.strip()
        said = entry["message"]
        assert f"from the host, restart its container with `docker restart {host}`" in said, said
        assert "kill" not in entry["next"] and "nsenter" not in said
        steps = [(s["where"], s["run"]) for s in entry["steps"]]  # every step, the host's too, as data
        assert steps == [("here", entry["next"]), ("the host or orchestrator", f"docker restart {host}")]
        assert entry["position"] == "debug-container", entry
        for where, run in steps:  # each run where it says
            ran = (
                _debugging(name, checkout, "sh", "-c", run)
                if where == "here"
                else images.docker(*run.split()[1:])
            )
            assert ran.returncode == 0, ran.stderr
        _logged(name, "acquired", 1)
    finally:
        images.docker("rm", "-f", name)
