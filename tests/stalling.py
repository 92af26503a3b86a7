"""The processes of tests/scenarios/stalls.py on real torch, and how a test waits for them: shared by
the diagnose test modules that start stalls (tests/test_diagnose_stalls.py, test_diagnose_locks.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import Any

import pytest

from patcher.diagnose import procs, stacks
from tests.conftest import torch_venv
from tests.diagnosing import diagnose_json, running

CHECKOUT = Path(__file__).resolve().parent.parent  # the tool a test runs: this checkout's
SCENARIO = Path(__file__).parent / "scenarios" / "stalls.py"
TAG = "diagnose-stalls"  # an argument that marks these suites' processes


def in_torch(
    tmp: Path, name: str, *args: str, **variables: str
) -> AbstractContextManager[subprocess.Popen[str]]:
    """tests/scenarios/stalls.py's scenario `args[0]` on real torch 2.10.0."""
    python = torch_venv("2.10.0") / "bin" / "python"
    return running([str(python), str(SCENARIO), TAG, *args], tmp, name, **variables)


def printed(tmp: Path, name: str, text: str, timeout: float = 180) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if text in (shown := (tmp / f"{name}.out").read_text()):
            return shown
        time.sleep(0.2)
    pytest.fail(f"{name} never printed {text!r} in {timeout:.0f} s: {shown[-2000:]}")


def reaches(pid: int, function: str, file: str, timeout: float = 180) -> None:
    """Until a py-spy dump shows `function` of `file` in one of the process's threads."""
    spy, end = stacks.find(), time.monotonic() + timeout
    while time.monotonic() < end:
        with suppress(stacks.Failed):
            frames = [f for s in stacks.dump(spy, pid) for f in s.frames]
            if any(f.name.rsplit(".", 1)[-1] == function and f.filename.endswith(file) for f in frames):
                return
        time.sleep(0.5)
    pytest.fail(f"process {pid} never reached {function} ({file}) in {timeout:.0f} s")


def diagnosed_at(pid: int, function: str, file: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """Once the process reaches `function` of `file`, `diagnose PID --json`: its exit code, its
    report and the report's one process entry."""
    reaches(pid, function, file)
    code, report, _ = diagnose_json(str(pid))
    (entry,) = report["processes"]
    return code, report, entry


ANSWER = Path(__file__).parent / "scenarios" / "answer.cpp"  # a real extension: x.answer() is 42
READY = "ready: x.answer() = 42"


def inside(namespace_of: int, *args: str) -> tuple[int, dict[str, Any]]:
    """diagnose --json run inside the PID and mount namespaces of a process (as in its container)."""
    done = subprocess.run(
        ["nsenter", f"--target={namespace_of}", "--pid", "--mount", f"--wd={CHECKOUT}", "--", sys.executable, "-m",
         "patcher", "diagnose", *args, "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.stdout and "Traceback" not in done.stderr, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def children(pid: int, count: int, timeout: float = 60) -> list[int]:
    end = time.monotonic() + timeout
    while len(found := procs.read().below(pid)) < count and time.monotonic() < end:
        time.sleep(0.2)
    assert len(found) >= count, found
    return found
