"""A process that waits on a lock: which lock, who holds it, whether every process that could hold it
is in view, and how the process was started (for a step that stops and starts it again).

Recognised by what the code does (patcher/diagnose/waits.py), not by whose file it is: a thread
that stays in a loop that sleeps between tries, waiting for a file to vanish (torch's FileBaton and
its copies), or trying an OS lock (flock or fcntl, as `filelock` does) that /proc/locks shows another
process holding; or a thread the kernel blocks on an OS lock (`->` in /proc/locks).

Read only: the frames' source files, /proc/locks, /proc/PID/{fd,mountinfo,cwd,environ,cmdline}.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from patcher.diagnose import procs, waits
from patcher.diagnose.model import Frame, Holder, Lock, Mount, ProcessFacts, Sample, Stack, Start
from patcher.diagnose.procs import ProcTable

PROC = Path("/proc")


class OsLock(NamedTuple):
    """One row of /proc/locks."""

    type: str  # FLOCK, POSIX, OFDLCK
    pid: int  # the holder (the waiter, for a row marked `->`), as this PID namespace numbers it
    device: tuple[int, int]  # major, minor
    inode: int
    blocked: bool  # `->`: this process waits for the lock


def os_locks() -> list[OsLock]:
    try:
        return parse_locks((PROC / "locks").read_text())
    except OSError:
        return []


def parse_locks(text: str) -> list[OsLock]:
    """/proc/locks' rows: `1: FLOCK  ADVISORY  WRITE 10494 fe:00:2277503 0 EOF`, a waiter's
    `1: -> FLOCK ...` (the device's major and minor in hex)."""
    found = []
    for line in text.splitlines():
        words = line.split()[1:]
        blocked = bool(words) and words[0] == "->"
        words = words[1:] if blocked else words
        try:
            major, minor, inode = words[4].split(":")
            found.append(
                OsLock(words[0], int(words[3]), (int(major, 16), int(minor, 16)), int(inode), blocked)
            )
        except (IndexError, ValueError):
            continue
    return found


def _identity(path: str) -> tuple[tuple[int, int], int, procs.Identity] | None:
    """The file's device (major, minor) and inode as /proc/locks names them, and its identity."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.major(st.st_dev), os.minor(st.st_dev)), st.st_ino, (st.st_dev, st.st_ino)


def initial_pid_namespace() -> bool:
    """Whether this tool reads the host's first PID namespace (there, PID 2 is kthreadd): every
    local process is then in view."""
    try:
        return (PROC / "2" / "comm").read_text().strip() == "kthreadd"
    except OSError:
        return False


def _unescaped(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_of(pid: int, path: str) -> Mount | None:
    """The mount `path` (as process `pid` names it, its links followed) is on: the longest mount
    point over it in the process's /proc/PID/mountinfo."""
    try:
        lines = (PROC / str(pid) / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    best: Mount | None = None
    for line in lines:
        mine, _, theirs = line.partition(" - ")
        fields, after = mine.split(), theirs.split()
        if len(fields) < 5 or len(after) < 2:
            continue
        point = _unescaped(fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.point)):
            best = Mount(point, after[0], _unescaped(after[1]))
    return best


def shared_by_hosts(mount: Mount | None) -> bool:
    return mount is not None and mount.network


def all_in_view(mount: Mount | None) -> bool:
    """Whether every process that could hold a file on `mount` is in this tool's view."""
    if mount is None or shared_by_hosts(mount):
        return False
    return initial_pid_namespace() or (mount.point == "/" and mount.fstype == "overlay")


def _source(root: str, filename: str) -> str | None:
    try:
        return Path(root + filename).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _stays(samples: list[Sample], stack: Stack) -> bool:
    """Whether the thread's innermost frame is the same function in every sample."""
    top = stack.frames[0]
    return all(
        any(s.thread == stack.thread and s.frames and s.frames[0][:2] == top[:2] for s in sample)
        for sample in samples
    )


def polling(process: ProcessFacts, samples: list[Sample]) -> list[str]:
    """The threads that stay in a loop that sleeps between tries."""
    found = []
    for stack in samples[-1] if samples else ():
        if stack.frames and _stays(samples, stack):
            source = _source(process.root, stack.frames[0].filename)
            if source is not None and waits.polls(source, stack.frames[0].line):
                found.append(stack.thread)
    return found


def waited(process: ProcessFacts, samples: list[Sample], seen: ProcTable, table: list[OsLock]) -> Lock | None:
    """The lock the process waits on, or None when it waits on none (it sleeps in a poll, or the
    kernel blocks it on an OS lock). The last sample is the one dumped with the frames' locals."""
    blocked = _blocked(process, samples, seen, table)
    if blocked is not None:
        return blocked
    threads = polling(process, samples)
    for stack in (s for s in (samples[-1] if threads else ()) if s.thread in threads and s.frames):
        found = _baton(process, stack, seen) or _os_lock(process, stack, seen, table)
        if found is not None:
            return found
    return None


def _holders(pids: list[int], seen: ProcTable) -> tuple[Holder, ...]:
    found = [seen.processes[p] for p in pids if p in seen.processes]
    return tuple(Holder(s.pid, s.command, s.state, s.wchan) for s in found)


def _caller(process: ProcessFacts, stack: Stack) -> tuple[str, int, waits.Locals] | None:
    if len(stack.frames) < 2:
        return None
    frame = stack.frames[1]
    source = _source(process.root, frame.filename)
    return (source, frame.line, dict(frame.locals)) if source is not None else None


def _baton(process: ProcessFacts, stack: Stack, seen: ProcTable) -> Lock | None:
    """A wait for a lock file to vanish (FileBaton and its copies)."""
    top = stack.frames[0]
    source = _source(process.root, top.filename)
    wait = waits.waited(source, top.line, dict(top.locals), _caller(process, stack)) if source else None
    if wait is None:
        return None
    path = whole_path(process.root, wait.path) if wait.path is not None else None
    if path is None:
        shown = wait.path.head + waits.CUT if wait.path is not None else ""
        return Lock(shown, process.root + shown if shown else "", None, (), top, whole=False)
    read_at = process.root + path
    identity = _identity(read_at)
    pids, unread = seen.holding(identity[2]) if identity else ([], 0)
    mount = mount_of(process.pid, procs.resolved(process.root, path))
    return Lock(
        path,
        read_at,
        _age(read_at),
        _holders(pids, seen),
        top,
        unread=unread,
        mount=mount,
        seen=all_in_view(mount),
    )


def whole_path(root: str, path: waits.Path) -> str | None:
    """The path; for one py-spy cut short, the one file that completes it (None: none, or several)."""
    if not path.cut:
        return path.head
    found = glob.glob(glob.escape(root + path.head) + "*" + glob.escape(path.tail))
    return found[0].removeprefix(root) if len(found) == 1 else None


def _age(read_at: str) -> float | None:
    try:
        return max(0.0, time.time() - os.stat(read_at).st_mtime)
    except OSError:
        return None


def _strings(stack: Stack) -> Iterator[str]:
    for frame in stack.frames:
        for _, shown in frame.locals:
            text = waits.string(shown)
            if text is not None and not text.cut and text.head.startswith("/"):
                yield text.head


def _os_lock(process: ProcessFacts, stack: Stack, seen: ProcTable, table: list[OsLock]) -> Lock | None:
    """A poll that tries an OS lock: a string local names a file another process holds locked."""
    for path in dict.fromkeys(_strings(stack)):
        lock = _held(process, path, seen, table, stack.frames[0])
        if lock is not None:
            return lock
    return None


def _held(
    process: ProcessFacts, path: str, seen: ProcTable, table: list[OsLock], waiting: Frame | None
) -> Lock | None:
    read_at = process.root + path
    identity = _identity(read_at)
    rows = [r for r in table if identity and (r.device, r.inode) == identity[:2] and not r.blocked]
    rows = [r for r in rows if r.pid != process.pid]
    if identity is None or not rows:
        return None
    holders = _holders(list(dict.fromkeys(r.pid for r in rows)), seen)
    mount = mount_of(process.pid, procs.resolved(process.root, path))
    return Lock(
        path, read_at, _age(read_at), holders, waiting, os=rows[0].type, mount=mount, seen=all_in_view(mount)
    )


def _blocked(
    process: ProcessFacts, samples: list[Sample], seen: ProcTable, table: list[OsLock]
) -> Lock | None:
    """A thread the kernel blocks on an OS lock (flock or fcntl without a non-blocking flag): the
    file is one of its open files."""
    wanted = {(r.device, r.inode) for r in table if r.blocked and r.pid == process.pid}
    fds = PROC / str(process.pid) / "fd"
    try:
        open_fds = os.listdir(fds) if wanted else []
    except OSError:
        return None
    innermost = next((s.frames[0] for s in (samples[-1] if samples else ()) if s.frames), None)
    for fd in open_fds:
        identity = _identity(str(fds / fd))
        if identity is not None and identity[:2] in wanted:
            with contextlib.suppress(OSError):
                lock = _held(process, os.readlink(fds / fd), seen, table, innermost)
                if lock is not None:
                    return lock
    return None


def start_of(process: ProcessFacts, seen: ProcTable) -> Start:
    """How to start it again: its own command line (a bare `python` named as the interpreter it
    runs), working directory and the variables that matter; for a rank, its launcher's (the job)."""
    ranked = process.launch.rank is not None or process.launch.job is not None
    if ranked and process.parent > 1:
        return procs.start_of(process.parent, seen)
    start = procs.start_of(process.pid, seen)
    argv = start.argv
    if argv and not argv[0].startswith("/") and "python" in argv[0]:
        return start._replace(argv=(process.interpreter, *argv[1:]))
    return start
