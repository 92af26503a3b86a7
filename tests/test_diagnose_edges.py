"""diagnose at its edges, on real processes: a malformed PID, a process even root may not read, a
launcher without torch read as root and as `nobody`, a process that exits while it is sampled or
before its first dump, a dump py-spy fails, and the top-level torch fields of a run over one torch
or several."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.diagnosing import NOBODY, TAG, diagnose_json, diagnose_text, loading, shared_object

ROOT = Path(__file__).resolve().parent.parent


def _sleeper() -> subprocess.Popen[bytes]:
    """A Python without torch, ready when it has printed its line."""
    code = "import time; print(flush=True); time.sleep(120)"
    process = subprocess.Popen([sys.executable, "-c", code, TAG], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"\n"
    return process


@contextmanager
def _running(*processes: subprocess.Popen[bytes]) -> Iterator[None]:
    try:
        yield
    finally:
        for process in processes:
            process.kill()
            process.wait()


@pytest.mark.parametrize("word", ["abc", "0", "-5", "1.5", "\u0661", "+7", " 7"])
def test_a_malformed_pid_is_one_sentence_and_a_usage_error(word: str) -> None:
    """Like every other input diagnose cannot use: one sentence on stderr, exit 2, no usage block."""
    text = diagnose_text("--", word)
    assert text.returncode == 2 and text.stdout == "", text.stderr
    assert (
        text.stderr.startswith("torch-lazylog: error: Expected a process ID") and text.stderr.count("\n") == 1
    )
    assert "Usage:" not in text.stderr and repr(word) in text.stderr
    done = subprocess.run(
        [sys.executable, "-m", "patcher", "diagnose", "--json", "--", word], capture_output=True, text=True
    )
    report = json.loads(done.stdout)
    assert (done.returncode, report["exit_code"], report["processes"]) == (2, 2, [])
    assert report["message"].startswith("Expected a process ID (a whole number from 1 on)")


def _as_root(prefix: list[str], pid: int) -> dict[str, Any]:
    """diagnose run as uid 0 under `prefix` (a user namespace, a capability dropped)."""
    if os.geteuid() != 0:
        pytest.skip("the case is of a reader that is root")
    if shutil.which(prefix[0]) is None:
        pytest.fail(f"{prefix[0]} (util-linux) is not installed")
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "patcher", "diagnose", *([str(pid)] if pid else []), "--json"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_a_process_even_root_may_not_read_names_the_namespace_not_rights() -> None:
    """Root with CAP_SYS_PTRACE, in a user namespace below the process's: the kernel refuses, and
    the sentence says so instead of telling root to run as root."""
    with _running(target := _sleeper()):
        message = _as_root(["unshare", "--user", "--map-root-user"], target.pid)["message"]
    assert "even to root with CAP_SYS_PTRACE" in message and "namespace" in message, message
    assert "security module" in message and "Yama" in message
    assert "Run diagnose as root" not in message and "may not (no ptrace rights" not in message


def test_every_process_unreadable_even_to_root_is_counted_with_its_cause() -> None:
    """diagnose without a PID, from a user namespace: every other process is refused to this root,
    and the sentence counts them and names the cause, not rights."""
    message = _as_root(["unshare", "--user", "--map-root-user"], 0)["message"]
    assert "found none this user may read;" in message and "processes could not be read" in message, message
    assert "even to root with CAP_SYS_PTRACE" in message and "run diagnose as root" not in message


def test_root_without_cap_sys_ptrace_names_the_capability_and_the_namespace() -> None:
    with _running(target := _sleeper()):
        prefix = ["unshare", "--user", "--map-root-user", "setpriv", "--bounding-set=-sys_ptrace"]
        message = _as_root(prefix, target.pid)["message"]
    assert "this root runs without CAP_SYS_PTRACE" in message and "--cap-add SYS_PTRACE" in message, message
    assert "namespace" in message and "Run diagnose as root" not in message


def _launcher(torch_dir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A Python without torch that started one which maps torch_dir's _C*.so (a launcher and its rank)."""
    library = torch_dir / "_C.cpython-3-linux.so"
    shutil.copyfile(shared_object(), library)
    rank = f"import ctypes, time; ctypes.CDLL({str(library)!r}); print(flush=True); time.sleep(120)"
    code = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {rank!r}, {TAG!r}], stdout=subprocess.PIPE)\n"
        "child.stdout.readline(); print(child.pid, flush=True); time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code, TAG], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    return parent, int(parent.stdout.readline())


def test_a_launcher_without_torch_is_passed_over_for_every_user(release: Callable[[str], Path]) -> None:
    """As root the launcher (no torch loaded) is silent and its rank diagnosed; as `nobody`, who may
    read neither, the rank alone is listed, not the launcher too."""
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) is not installed")
    import click
    import libcst

    parent, rank = _launcher(release("2.10.0"))
    try:
        code, report, _ = diagnose_json(str(parent.pid))
        assert code == 1 and [e["pid"] for e in report["processes"]] == [rank], report
        paths = {str(Path(m.__file__).parent.parent) for m in (click, libcst) if m.__file__}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *paths]))
        code, report, _ = diagnose_json(str(parent.pid), user=NOBODY, env=env)
        assert code == 4 and f"read process {rank}'s memory map" in report["message"], report
        assert "no ptrace rights" in report["message"] and str(parent.pid) not in report["message"]
    finally:
        os.kill(rank, signal.SIGKILL)
        parent.kill()
        parent.wait()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2][1:2]
    except OSError:
        return ""


def test_a_process_gone_mid_sampling_is_said_to_have_exited(release: Callable[[str], Path]) -> None:
    """Two processes of one torch; the first is killed while py-spy has it stopped for a dump: it is
    said to have exited, the other is sampled to the end, and the run's torch fields are that torch's."""
    torch_dir = release("2.10.0")
    leaving, staying = loading(torch_dir), loading(torch_dir)
    with _running(leaving, staying):
        run = subprocess.Popen(
            [sys.executable, "-m", "patcher", "diagnose", str(leaving.pid), str(staying.pid), "--json",
             "--samples", "20", "--interval", "0.1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while _state(leaving.pid) != "t":  # stopped by py-spy's dump
            assert run.poll() is None and time.monotonic() < deadline, "no dump was seen"
            time.sleep(0.0005)
        leaving.kill()  # not reaped: a zombie until the end of the test, as a crashed rank's parent leaves it
        out, _ = run.communicate(timeout=120)
    report = json.loads(out)
    entries = {e["pid"]: e for e in report["processes"]}
    assert set(entries) == {leaving.pid, staying.pid}, report
    assert "exited" in entries[leaving.pid]["message"], entries[leaving.pid]
    assert entries[staying.pid]["samples"] == 20 and "exited" not in entries[staying.pid]["message"]
    graph = (torch_dir / "_inductor" / "graph.py").read_bytes()
    assert report["sha256"] == hashlib.sha256(graph).hexdigest()
    assert (report["release"], report["match"]) == ("2.10.0", "exact")


def test_the_top_level_torch_fields_are_null_over_two_torches(release: Callable[[str], Path]) -> None:
    first, second = loading(release("2.10.0")), loading(release("2.9.1"))
    with _running(first, second):
        code, report, _ = diagnose_json(str(first.pid), str(second.pid), "--samples", "1")
    assert code == 1 and len(report["processes"]) == 2, report
    assert (report["sha256"], report["release"], report["match"]) == (None, None, None)
    with _running(only := loading(release("2.9.1"))):
        code, report, _ = diagnose_json(str(only.pid), "--samples", "1")
    assert (report["release"], report["match"]) == ("2.9.1", "exact"), report


def _behind(tmp_path: Path, script: str) -> tuple[list[str], dict[str, str]]:
    """The tool as the single file, run by a Python with no py-spy beside it, so that the py-spy it
    finds is the one on PATH: a script (`script`, shell) before the real one. The command, its
    environment."""
    from patcher import pyz
    from tests.helpers import build_single_file

    single = build_single_file(tmp_path / pyz.NAME)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "py-spy"
    wrapper.write_text(f"#!/bin/sh\n{script}\n")
    wrapper.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    return [str(tmp_path / "venv" / "bin" / "python"), str(single)], env


def test_a_process_gone_before_its_first_dump_is_said_to_have_exited(
    release: Callable[[str], Path], tmp_path: Path
) -> None:
    """The process ends between being found and its first dump: one sentence saying it exited
    before py-spy read its stacks, exit 0 (nothing is stalled; exit 2 means a usage error alone).
    py-spy is the real one behind a script that holds the first dump until the test has killed and
    reaped the process."""
    from patcher.diagnose import stacks

    held, go = tmp_path / "held", tmp_path / "go"
    tool, env = _behind(
        tmp_path, f'touch {held}\nwhile [ ! -e {go} ]; do sleep 0.01; done\nexec {stacks.find()} "$@"'
    )
    leaving = loading(release("2.10.0"))
    with _running(leaving):
        run = subprocess.Popen(
            [*tool, "diagnose", str(leaving.pid)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not held.exists():
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.01)
        leaving.kill()
        leaving.wait()  # reaped: no process of that PID is left to read
        go.touch()
        out, err = run.communicate(timeout=120)
    # Exit 2 is a usage error only: a process that ended while read is a note, and changes no exit code.
    assert run.returncode == 0 and err == "", err
    assert out.startswith(f"Process {leaving.pid} (") and out.count("\n") == 1, out
    assert out.endswith(
        "exited before py-spy read its stacks: nothing of it is judged, and it changes no exit code.\n"
    )


@pytest.mark.parametrize(
    ("fails", "code", "said"),
    [
        pytest.param(1, 1, "", id="once"),
        pytest.param(99, 4, "Failed to get stack traces", id="always"),
        pytest.param(-1, 4, "Expected to read process", id="rights"),
    ],
)  # fmt: skip
def test_a_dump_py_spy_fails_on_a_live_process_is_taken_again(
    release: Callable[[str], Path], tmp_path: Path, fails: int, code: int, said: str
) -> None:
    """py-spy fails now and then on a live process ("Failed to get stack traces") where its next
    read succeeds: one such failure is read again, not reported as py-spy's (exit 4). A py-spy that
    fails each time is reported after ATTEMPTS tries; one refused for rights, at once. py-spy is the
    real one behind a script that fails its first FAILS calls (-1: each, as rights refused)."""
    from patcher.diagnose import stacks

    calls = tmp_path / "calls"
    error = "Permission denied" if fails < 0 else "Error: Failed to get stack traces"
    script = (
        f"echo >>{calls}\n"
        f'if [ {fails} -lt 0 ] || [ "$(wc -l <{calls})" -le {fails} ]; then echo "{error}" >&2; exit 1; fi\n'
        f'exec {stacks.find()} "$@"'
    )
    tool, env = _behind(tmp_path, script)
    process = loading(release("2.10.0"))
    with _running(process):
        done = subprocess.run(
            [*tool, "diagnose", str(process.pid), "--json", "--interval", "0"],
            capture_output=True, text=True, cwd="/", env=env, timeout=120,
        )  # fmt: skip
    report = json.loads(done.stdout)
    assert done.returncode == code == report["exit_code"], report
    tries = calls.read_text().count("\n")
    if code == 1:
        (entry,) = report["processes"]
        assert entry["samples"] == 3 and tries == 1 + 3, report  # the first dump's second try, then two
    else:
        assert said in report["message"], report
        assert tries == (1 if fails < 0 else stacks.ATTEMPTS), tries


def test_a_good_pid_and_a_missing_one_print_the_paragraph_on_stdout_and_one_sentence_on_stderr(
    release: Callable[[str], Path],
) -> None:
    """The process read is answered as if alone (its paragraph and `Next:` on stdout); the PID that
    does not exist is one sentence on stderr; the exit code is the most severe: the eager torch's 1."""
    missing = "4194303"  # above the kernel's largest pid
    with _running(good := loading(release("2.10.0"))):
        text = diagnose_text(str(good.pid), missing, "--samples", "1")
        alone = diagnose_text(str(good.pid), "--samples", "1")
        code, report, _ = diagnose_json(str(good.pid), missing, "--samples", "1")
    assert text.returncode == 1 == alone.returncode, text.stderr
    assert text.stdout.startswith(f"PID {good.pid} (") and text.stdout.count("\n") == 2, text.stdout
    assert text.stdout.splitlines()[1] == alone.stdout.splitlines()[1]  # Next: the same apply
    assert (
        text.stderr
        == f"torch-lazylog: error: Expected a running process {missing}, found none: pass the server's PID.\n"
    )
    assert code == 1 and [p["pid"] for p in report["processes"]] == [good.pid, int(missing)], report
    assert report["problems"] == [text.stderr.removeprefix("torch-lazylog: error: ").strip()]
    assert missing not in report["message"]
