"""What diagnose reads besides the stacks, for the findings that ask for it: a lock file and the
processes that hold it open, Inductor's compile-worker processes, the CPU time of a process tree.

Read only, from /proc and the file system: nothing is written, signalled or removed.
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

from patcher.diagnose import procs
from patcher.diagnose.findings import Rules
from patcher.diagnose.model import Holder, Lock, ProcessFacts, Sample, Workers

CUT = "..."  # how py-spy ends a repr it cut short


def cpu_seconds(pid: int, tree: dict[int, int]) -> float:
    """CPU time of the process and every process below it, the reaped ones included (seconds)."""
    ticks = 0
    for each in [pid, *procs.descendants(pid, tree)]:
        try:
            fields = procs.stat_fields(each)
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile: its time is in its parent's reaped children's
        ticks += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _value(found: str) -> tuple[str, bool]:
    """A string local as py-spy shows it: its text, and whether py-spy cut it short."""
    text = found[1:-1] if len(found) >= 2 and found[0] == found[-1] and found[0] in "\"'" else found
    return (text[: -len(CUT)], True) if text.endswith(CUT) else (text, False)


def lock_named(sample: Sample, rules: Rules) -> tuple[str, bool, str] | None:
    """The lock a frame's locals name (the process's view): the local's text, whether py-spy cut it
    short, and the name joined to it (`lock` for torch's build directory)."""
    for source in rules.locks:
        for stack in sample:
            for frame in stack.frames:
                found = dict(frame.locals).get(source.local) if source.frame.matches(frame) else None
                if found is not None:
                    return (*_value(found), source.join)
    return None


def _completed(root: str, prefix: str, join: str) -> str | None:
    """The one file a cut path can be: the prefix completed within its last name."""
    pattern = glob.escape(root + prefix) + "*" + (f"/{join}" if join else "")
    found = glob.glob(pattern)
    return found[0].removeprefix(root) if len(found) == 1 else None


def lock_of(process: ProcessFacts, sample: Sample, rules: Rules) -> Lock:
    named = lock_named(sample, rules)
    if named is None:
        return Lock("", "", None, (), whole=False)
    text, cut, join = named
    path = _completed(process.root, text, join) if cut else f"{text}/{join}" if join else text
    if path is None:
        return Lock(text + CUT, process.root + text, None, (), whole=False)
    read_at = process.root + path
    try:
        age: float | None = max(0.0, time.time() - os.stat(read_at).st_mtime)
    except OSError:
        age = None
    holders, unread = holding(path, read_at)
    return Lock(path, read_at, age, holders, unread=unread)


def holding(path: str, read_at: str) -> tuple[tuple[Holder, ...], int]:
    """The processes with the file open (its name in /proc/PID/fd, as they or this tool name it), and
    how many processes' open files could not be read."""
    names, found, unread = {path, read_at}, [], 0
    for pid in procs.pids():
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except PermissionError:
            unread += 1
            continue
        except OSError:
            continue  # ended meanwhile, or an fd closed while read
        if names & set(links):
            found.append(holder(pid))
    return tuple(found), unread


def holder(pid: int) -> Holder:
    try:
        state = procs.stat_fields(pid)[0]
    except (OSError, IndexError):
        state = "?"
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        wchan = ""
    return Holder(pid, procs.shown(procs.command_line(pid), 160), state, "" if wchan == "0" else wchan)


def workers_of(process: ProcessFacts, rules: Rules) -> Workers:
    """The compile-worker processes started for `process` (`--parent=` its own PID as it sees it):
    the live sidecar, its child; or, with none, the workers left behind."""
    mark = f"--parent={procs.own_pid(process.pid)}"
    sidecar, others = None, []
    for pid in procs.pids():
        argv = procs.command_line(pid)
        if mark not in argv or not any(h in word for word in argv for h in rules.helpers) or procs.gone(pid):
            continue
        if procs.parent_of(pid) == process.pid:
            sidecar = pid
        else:
            others.append(pid)
    return Workers(sidecar, () if sidecar is not None else tuple(sorted(others)))
