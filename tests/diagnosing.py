"""diagnose run as a user runs it, and the processes its tests start (marked with TAG): shared by
the diagnose test modules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from patcher.core.exitcodes import ExitCode
from patcher.core.report import Report
from patcher.diagnose import findings, judge, procs, render, stacks
from patcher.diagnose.model import (
    Cpu,
    Evidence,
    Frame,
    Launch,
    Lock,
    ProcessFacts,
    Reach,
    Sample,
    Stack,
    Start,
    TorchFacts,
    Unreadable,
    Workers,
)

TAG = "diagnose-cli"  # an argument that marks this suite's processes
RULES = findings.load()
WORDS = render.Words(
    RULES, "torch-lazylog", "py-spy", "root-ptrace"
)  # the console script, py-spy on PATH, root
NO_LAUNCH = Launch(None, None, None, None, None)  # started by hand: no launcher's variables
NOTHING_READ = Evidence(None, None, None, None, (), None)
# diagnose on the host, as root: the process shares its mounts, or may have them entered
ON_THE_HOST = Reach(
    same_mounts=True, mount_rights=True, pid_one_here=False, own_pid_namespace=False, container=None, pod=None
)


def evidence(
    lock: Lock | None = None,
    workers: Workers | None = None,
    cpu: Cpu | None = None,
    start: Start | None = None,
    reach: Reach | None = None,
) -> Evidence:
    """What diagnose read besides the stacks, naming only what a test gives (a lock's reach: from
    the host, unless given)."""
    return Evidence(lock, workers, cpu, start, (), reach or (ON_THE_HOST if lock else None))


def report(
    found: list[render.Diagnosed], problems: list[Unreadable] | None = None, words: render.Words = WORDS
) -> Report:
    """The run's report as run.diagnose makes it: the verdict decides, render says."""
    first, code = judge.decide([d.finding for d in found], problems or [], RULES)
    return render.report(found, first, code, problems or [], words)


# The loaded torch as verify reads it, for the verdict's pure tests.
EAGER_TORCH = TorchFacts(
    Report(
        "verify", "pristine", False, "graph.py is unpatched, eager", ExitCode.EAGER, torch_version="2.10.0"
    ),
    100.0,
    False,
    "",
)
LAZY_TORCH = TorchFacts(
    Report("verify", "patched", False, "graph.py is patched", ExitCode.OK, torch_version="2.10.0"),
    100.0,
    False,
    "",
)


@contextmanager
def running(command: list[str], tmp: Path, name: str, **variables: str) -> Iterator[subprocess.Popen[str]]:
    """`command` in the background, its output in tmp/NAME.out and a fresh Inductor cache; it and
    every process it started are killed at the end."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp / f"inductor-{name}"), TMPDIR=str(tmp)) | variables
    out = (tmp / f"{name}.out").open("w")
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True, env=env,
                               start_new_session=True)  # fmt: skip
    try:
        yield process
    finally:
        for pid in [*procs.read().below(process.pid), process.pid]:
            with suppress(ProcessLookupError):
                os.kill(pid, 9)
        process.wait(timeout=30)
        out.close()


def argv(pid: int) -> list[str]:
    """A process's command line, as /proc/PID/cmdline holds it ([] once it is gone)."""
    try:
        return [w.decode() for w in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if w]
    except OSError:
        return []


def diagnose_json(
    *args: str, user: list[str] | None = None, env: dict[str, str] | None = None, python: Path | None = None
) -> tuple[int, dict[str, Any], str]:
    runner = str(python) if python else readable_python() if user else sys.executable
    done = subprocess.run(
        [*(user or []), runner, "-m", "patcher", "diagnose", *args, "--json"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.stdout, done.stderr
    assert "Traceback" not in done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report, done.stderr


def diagnose_text(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patcher", "diagnose", *args], capture_output=True, text=True, timeout=120
    )


def probe_text(pid: int) -> subprocess.CompletedProcess[str]:
    """`torch-lazylog probe PID`, as a startup probe runs it (the docs' command, this checkout's tool)."""
    return subprocess.run(
        [sys.executable, "-m", "patcher", "probe", str(pid)], capture_output=True, text=True, timeout=120
    )


def readable_python() -> str:
    """An interpreter of the runner's version that `nobody` may run (the runner's may sit in /root)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for place in [
        os.path.dirname(os.path.realpath(sys.executable)),
        *os.environ.get("PATH", "").split(":"),
        "/usr/bin",
        "/usr/local/bin",
    ]:
        candidate = os.path.join(place, version)
        if os.path.isfile(candidate) and nobody_runs(candidate):
            return candidate
    pytest.skip(f"no {version} on this machine that the user nobody may run")


def nobody_runs(python: str) -> bool:
    return subprocess.run([*NOBODY, python, "-c", "pass"], capture_output=True).returncode == 0


NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def shared_object() -> str:
    """A real shared object of the runner's standard library, to map as a torch/_C*.so."""
    import importlib

    for name in ("_ctypes", "_json", "_decimal", "zlib", "_ssl"):
        path = getattr(importlib.import_module(name), "__file__", None) or ""
        if path.endswith(".so"):
            return path
    pytest.skip("this Python has no standard-library extension module in a shared object")


def loading(torch_dir: Path) -> subprocess.Popen[bytes]:
    """A Python that maps torch_dir's _C*.so (as `import torch` would) and sleeps."""
    library = torch_dir / "_C.cpython-3-linux.so"
    shutil.copyfile(shared_object(), library)
    code = f"import ctypes, time; ctypes.CDLL({str(library)!r}); print(flush=True); time.sleep(120)"
    process = subprocess.Popen([sys.executable, "-c", code, TAG], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"\n"
    return process


# Recorded py-spy dumps of real torch 2.10.0 processes (tests/data/diagnose), and the facts, findings
# and locks the pure tests judge them with.
DUMPS = Path(__file__).parent / "data" / "diagnose"
LOCK = "/tmp/run/ext/x/lock"  # as the recorded process named it: build_directory + /lock


def process_facts(pid: int = 4242, parent: int = 1, **changes: Any) -> ProcessFacts:
    base = ProcessFacts(pid, "python stalls.py", "/venv/bin/python", 200.0, "", "/venv/torch", "/venv/torch",
                        False, None, None, True, parent, NO_LAUNCH)  # fmt: skip
    return base._replace(**changes)


def recorded(name: str) -> Sample:
    if name == "importing-torch":  # `import torch` under way: torch's own modules run, at import
        return importing()
    return stacks.parse((DUMPS / f"{name}.json").read_text())


def importing() -> Sample:
    site = "/venv/lib/python3/site-packages/torch"
    frames = [
        Frame("<module>", f"{site}/_dynamo/variables/builtin.py", 80, ()),
        Frame("_call_with_frames_removed", "<frozen importlib._bootstrap>", 241, ()),
        Frame("_find_and_load", "<frozen importlib._bootstrap>", 1176, ()),
        Frame("<module>", f"{site}/__init__.py", 2100, ()),
        Frame("<module>", "<string>", 1, ()),
    ]
    return (Stack("MainThread", tuple(frames)),)


def judged(
    name: str, read: Evidence = NOTHING_READ, torch: TorchFacts = EAGER_TORCH, **process: Any
) -> render.Diagnosed:
    samples = [recorded(name)] * 3
    found = judge.finding_of(process_facts(**process), samples, torch, read, RULES)
    return render.Diagnosed(process_facts(**process), torch, found, False)


def waiting_lock(*fields: Any, protocol: str = "baton", **changes: Any) -> Lock:
    """A lock the recorded waiter waits on, in its FileBaton.wait (as locks reads it)."""
    waiting = recorded("jit-lock-wait")[0].frames[0]
    return Lock(protocol, *fields, **({"waiting": waiting} | changes))  # type: ignore[arg-type]
