"""Stack samples of live processes: py-spy's JSON dump (`py-spy dump --json --pid PID`), parsed.

py-spy is the optional extra `diagnose` (`pip install '.[diagnose]'` from a checkout): a static binary installed beside the tool's
interpreter (its scripts directory), or anywhere on PATH. A dump pauses the process for the few
milliseconds it reads its frames; it changes nothing in it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from patcher.diagnose import tracing
from patcher.diagnose.model import Frame, Sample, Stack

TIMEOUT = 10.0  # one dump: py-spy reads a few hundred kB of the process
ATTEMPTS = 3  # tries of one dump that py-spy fails for another reason than rights or TIMEOUT


class Missing(Exception):
    """No py-spy beside this tool's interpreter nor on PATH: the interpreter, and the command that
    installs py-spy into its environment (render says it)."""

    def __init__(self, python: str, install: str) -> None:
        super().__init__(python, install)
        self.python, self.install = python, install


def install_command(python: str) -> str:
    """The command that puts py-spy into the environment of `python`: its own pip, or, in an
    environment made without pip (as the image step makes the tool's), another Python's pip aimed at
    it with --python (pip 22.3 or newer)."""
    has_pip = any((Path(entry) / "pip" / "__init__.py").is_file() for entry in sys.path if entry)
    if has_pip:
        return f"{python} -m pip install 'py-spy>=0.4'"
    return f"python3 -m pip --python {python} install 'py-spy>=0.4'"


def find() -> str:
    places = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))]
    for place in places:
        candidate = place / "py-spy"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("py-spy")
    if found is None:
        raise Missing(sys.executable, install_command(sys.executable))
    return found


def parse(text: str) -> Sample:
    """One dump's JSON: a list of threads, each with its frames innermost first."""
    threads = json.loads(text)
    return tuple(
        Stack(
            str(thread.get("thread_name") or thread.get("thread_id")),
            tuple(
                Frame(str(f["name"]), str(f["filename"]), int(f["line"]), _locals(f.get("locals")))
                for f in thread["frames"]
            ),
        )
        for thread in threads
    )


def _locals(found: object) -> tuple[tuple[str, str], ...]:
    """A frame's locals as `dump --locals` gives them: each name with py-spy's repr (a string's is in
    double quotes, cut with `...` past about 128 characters)."""
    if not isinstance(found, list):
        return ()
    return tuple((str(v["name"]), str(v.get("repr", ""))) for v in found if isinstance(v, dict))


class Failed(Exception):
    """py-spy could not read the process: its last line, whether rights were the reason, and whether
    py-spy gave no answer within TIMEOUT."""

    def __init__(self, reason: str, denied: bool, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.denied = denied
        self.timed_out = timed_out


def dump(spy: str, pid: int, with_locals: bool = False) -> Sample:
    try:
        done = subprocess.run(
            [spy, "dump", "--json", *(["--locals"] if with_locals else []), "--pid", str(pid)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise Failed(f"py-spy did not answer within {TIMEOUT:.0f} s", False, timed_out=True) from exc
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.startswith(("Error", "Permission"))]
        reason = (lines or done.stderr.strip().splitlines() or ["no output"])[0]
        raise Failed(reason.removeprefix("Error: ").rstrip("."), "ermission" in done.stderr)
    try:
        return parse(done.stdout)
    except (ValueError, KeyError, TypeError) as exc:
        raise Failed("py-spy printed something other than its JSON dump", False) from exc


def _dump_again(spy: str, pid: int, with_locals: bool, interval: float) -> Sample:
    """One dump, taken again after `interval` when py-spy fails for another reason than rights or
    its timeout, up to ATTEMPTS times in all: reading a live process, py-spy now and then fails
    ("Failed to get stack traces") where the next read succeeds, and one such failure is no answer
    about the process. A process that has ended fails each time."""
    for _ in range(ATTEMPTS - 1):
        try:
            return dump(spy, pid, with_locals)
        except Failed as failed:
            if failed.timed_out or (failed.denied and not tracing.read_by_spy(pid)):
                raise  # denied while another reader's py-spy holds it: that passes, tried again
        time.sleep(interval)
    return dump(spy, pid, with_locals)


def series(spy: str, pid: int, count: int, interval: float) -> list[Sample] | Failed:
    """`count` dumps `interval` seconds apart, the last with the frames' locals (what names a lock's
    path): the only dumps a run takes. What was taken before the process ended counts."""
    taken: list[Sample] = []
    for index in range(count):
        if index:
            time.sleep(interval)
        try:
            taken.append(_dump_again(spy, pid, index == count - 1, interval))
        except Failed as failed:
            return taken if taken and not failed.denied else failed
    return taken


def sample_all(spy: str, pids: list[int], count: int, interval: float) -> dict[int, list[Sample] | Failed]:
    """Every process at once: a server's ranks are read in the time one takes."""
    if not pids:
        return {}
    from concurrent.futures import ThreadPoolExecutor  # only diagnose reads many ranks; the probe, one

    with ThreadPoolExecutor(max_workers=min(len(pids), 32)) as pool:
        futures = {pid: pool.submit(series, spy, pid, count, interval) for pid in pids}
        return {pid: future.result() for pid, future in futures.items()}
