"""A lock wait recognised by what the code does (patcher/diagnose/waits.py), on the real sources of
torch 2.10.0's FileBaton and its caller (from the release's wheel: no torch install), and on copies of the same shape under other names: pure, no
live process."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patcher.diagnose import locks, procs, waits
from patcher.diagnose.model import Mount, ProcessFacts
from tests import realdata
from tests.conftest import need
from tests.diagnosing import argv


def _torch_source(name: str) -> str:
    source = need(lambda: realdata.release_file("2.10.0", f"torch/utils/{name}"))
    assert isinstance(source, bytes)
    return source.decode()


def _line(source: str, text: str) -> int:
    (found,) = [n for n, line in enumerate(source.splitlines(), 1) if text in line]
    return found


def test_torchs_wait_names_the_lock_its_caller_built_the_baton_with() -> None:
    baton, jit = _torch_source("file_baton.py"), _torch_source("cpp_extension.py")
    sleeping = _line(baton, "time.sleep(self.wait_seconds)")
    caller = (jit, _line(jit, "baton.wait()"), {"build_directory": '"/tmp/run/ext/x"', "name": '"x"'})
    assert waits.polls(baton, sleeping)
    assert waits.waited(baton, sleeping, {"self": "<FileBaton at 0x7f>"}, caller) == waits.Wait(
        waits.Spelling("/tmp/run/ext/x/lock")
    )
    cut = (jit, caller[1], {"build_directory": '"/tmp/run/ext/lo..."'})  # py-spy cut it short
    assert waits.waited(baton, sleeping, {}, cut) == waits.Wait(
        waits.Spelling("/tmp/run/ext/lo", True, "/lock")
    )


COPY = """import os, time


class Baton:
    def __init__(self, where, pause=0.1):
        self.where = where

    def hold_on(self):
        while os.path.isfile(self.where):
            time.sleep(0.1)


def mp_lock(lockPath):
    b = Baton(lockPath)
    b.hold_on()


def poll_forever(p):
    while p.exists():
        time.sleep(1)


def busy(p):
    while True:
        time.sleep(1)


def until_ready(p):
    while not os.path.exists(p):
        time.sleep(1)
"""


@pytest.mark.parametrize(
    ("line", "own", "caller", "expected"),
    [
        pytest.param(10, {}, (COPY, 15, {"lockPath": '"/jit/build/lock_mha"'}), "/jit/build/lock_mha", id="copy"),
        pytest.param(19, {"p": '"/data/model.lock"'}, None, "/data/model.lock", id="path-object"),
    ],
)  # fmt: skip
def test_a_copy_under_another_name_is_a_wait_on_its_path(
    line: int, own: waits.Locals, caller: tuple[str, int, waits.Locals] | None, expected: str
) -> None:
    assert waits.waited(COPY, line, own, caller) == waits.Wait(waits.Spelling(expected))


@pytest.mark.parametrize(
    ("line", "polling"),
    [
        pytest.param(24, True, id="a-sleep-loop-that-waits-for-no-file"),
        pytest.param(15, False, id="no-loop"),
        pytest.param(29, True, id="a-wait-for-a-file-to-appear"),
    ],
)
def test_a_frame_that_waits_for_no_file_is_no_baton_wait(line: int, polling: bool) -> None:
    assert waits.waited(COPY, line, {}, None) is None
    assert waits.polls(COPY, line) is polling


def test_a_path_py_spy_cut_short_is_completed_only_when_one_file_fits(tmp_path: Path) -> None:
    cut = waits.Spelling(f"{tmp_path}/ext/lo", True, "/lock")
    (tmp_path / "ext" / "long_name").mkdir(parents=True)
    assert locks.whole_path("", cut) is None  # no lock file in it yet
    (tmp_path / "ext" / "long_name" / "lock").touch()
    assert locks.whole_path("", cut) == f"{tmp_path}/ext/long_name/lock"
    (tmp_path / "ext" / "longer" / "lock").mkdir(parents=True)  # two fit: none is chosen
    assert locks.whole_path("", cut) is None


@pytest.mark.parametrize(
    ("fstype", "shared"),
    [
        pytest.param("nfs4", True, id="nfs"),
        pytest.param("fuse.sshfs", True, id="fuse"),
        pytest.param("lustre", True, id="lustre"),
        pytest.param("ext4", False, id="local"),
        pytest.param("overlay", False, id="overlay"),
    ],
)
def test_a_lock_on_a_network_filesystem_is_never_all_in_view(fstype: str, shared: bool) -> None:
    mount = Mount("/data", fstype, "somewhere")
    assert locks.shared_by_hosts(mount) is shared
    assert locks.all_in_view(mount) is (not shared and locks.initial_pid_namespace())


def test_a_containers_own_root_is_all_in_view_and_a_volume_only_from_the_host() -> None:
    assert locks.all_in_view(Mount("/", "overlay", "overlay"))
    assert locks.all_in_view(Mount("/cache", "ext4", "/dev/sdb")) is locks.initial_pid_namespace()


def test_a_files_mount_is_the_longest_mount_point_over_it() -> None:
    found = locks.mount_of(os.getpid(), "/proc/self/status")
    assert found is not None and (found.point, found.fstype) == ("/proc", "proc")
    root = locks.mount_of(os.getpid(), "/")
    assert root is not None and root.point == "/"


def _facts(pid: int, interpreter: str, table: procs.ProcTable) -> ProcessFacts:
    seen = table.processes[pid]
    return ProcessFacts(pid, seen.command, interpreter, 0.0, "", None, None, False,
                        None, None, True, seen.parent, procs.launch_of(seen.env))  # fmt: skip


def test_a_file_in_another_root_is_reached_with_that_roots_own_links(tmp_path: Path) -> None:
    """A container's ~/.cache may be an absolute link (`/scratch/...`): through /proc/PID/root the
    kernel would follow it from this tool's root, so the path is resolved inside the process's."""
    root = tmp_path / "root"
    (root / "scratch" / "x").mkdir(parents=True)
    (root / "cache").symlink_to("/scratch")  # absolute, as the process sees it
    boxed = _facts(os.getpid(), sys.executable, procs.read())._replace(root=str(root))
    assert locks.reached(boxed, "/cache/x/lock") == f"{root}/scratch/x/lock"
    assert locks.reached(boxed._replace(root=""), "/cache/x/lock") == "/cache/x/lock"  # its own mounts


@pytest.mark.parametrize("rank", [pytest.param(None, id="a-server"), pytest.param("1", id="a-rank")])
def test_a_process_is_started_again_as_it_was_and_a_rank_as_its_job(rank: str | None, tmp_path: Path) -> None:
    """A real process: its own command line (a bare `python` named as its interpreter), directory and
    the variables that matter; a rank (its launcher's variables set) is started again as its job."""
    env = {"PATH": os.environ["PATH"], "TORCH_EXTENSIONS_DIR": str(tmp_path), "UNRELATED": "x"}
    code = "import time; print(flush=True); time.sleep(60)"
    child = subprocess.Popen(["python3", "-c", code], executable=sys.executable, cwd=tmp_path,  # argv[0] bare
                             stdout=subprocess.PIPE, env=env | ({"RANK": rank, "WORLD_SIZE": "2"} if rank else {}))  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == b"\n"
        table = procs.read()
        start = locks.restart_of(_facts(child.pid, sys.executable, table), table)
        if rank:
            assert (start.pid, start.argv) == (os.getpid(), tuple(argv(os.getpid())))
        else:
            assert (start.pid, start.cwd) == (child.pid, str(tmp_path))
            assert start.argv == (sys.executable, "-c", code)  # found on PATH: its PATH goes along
            assert dict(start.variables) == {"PATH": env["PATH"], "TORCH_EXTENSIONS_DIR": str(tmp_path)}
            assert not start.init
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        pytest.param('d + "/lock"', waits.Spelling("/run/ext/lock"), id="concatenated"),
        pytest.param('f"{d}/lock"', waits.Spelling("/run/ext/lock"), id="f-string"),
        pytest.param('Path(d) / "lock"', waits.Spelling("/run/ext/lock"), id="path-object"),
        pytest.param('os.path.join(cut, "x", "lock")', waits.Spelling("/run/lo", True, "/x/lock"), id="cut-then-whole"),
        pytest.param('cut + "/lock"', None, id="cut-then-concatenated"),
        pytest.param('os.path.join(cut, cut)', None, id="cut-twice"),
        pytest.param("locate(d)", None, id="a-call-of-its-own"),
        pytest.param("n", None, id="not-a-string"),
        pytest.param("missing", None, id="not-a-local"),
    ],
)  # fmt: skip
def test_a_path_expression_is_evaluated_from_string_locals_only(
    expression: str, expected: waits.Spelling | None
) -> None:
    found = {"d": '"/run/ext"', "cut": '"/run/lo..."', "n": "3"}
    assert waits.evaluate(ast.parse(expression, mode="eval").body, found) == expected


KEYWORD = COPY.replace("b = Baton(lockPath)", "b = Baton(where=lockPath)")


def test_a_wait_whose_path_cannot_be_told_is_still_a_wait() -> None:
    assert waits.waited(KEYWORD, 10, {}, (KEYWORD, 15, {"lockPath": '"/l"'})) == waits.Wait(
        waits.Spelling("/l")
    )
    assert waits.waited(COPY, 10, {}, (COPY, 15, {})) == waits.Wait(None)  # its caller names no string
    assert waits.waited(COPY, 10, {}, ("def broken(:\n", 1, {})) == waits.Wait(None)
    assert waits.waited(
        "while os.path.exists(self.p):\n    time.sleep(1)\n", 2, {}, (COPY, 15, {})
    ) == waits.Wait(None)
    assert waits.waited("def broken(:\n", 1, {}, None) is None


# /proc/locks in the kernel's format (the first row as read here with filelock's flock held by 10494):
# a blocked flock waiting for it (`->`), a POSIX lock on a device whose numbers are hex, a row cut short.
PROC_LOCKS = """1: FLOCK  ADVISORY  WRITE 10494 fe:00:2277503 0 EOF
1: -> FLOCK  ADVISORY  WRITE 10506 fe:00:2277503 0 EOF
2: POSIX  ADVISORY  WRITE 8987 103:0a:1183 0 EOF
3: FLOCK  ADVISORY
"""


def test_proc_locks_rows_give_the_holder_the_waiter_and_the_file() -> None:
    assert locks.parse_locks(PROC_LOCKS) == [
        locks.OsLock("FLOCK", 10494, (254, 0), 2277503, False),
        locks.OsLock("FLOCK", 10506, (254, 0), 2277503, True),
        locks.OsLock("POSIX", 8987, (259, 10), 1183, False),
    ]
