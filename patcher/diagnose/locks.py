"""A process that waits on a lock: which lock, by which protocol, who holds it, whether every process
that could hold it is in view, how the process was started and what diagnose can do towards it (for
a step that stops and starts it again, and works where diagnose runs).

A file is its (st_dev, st_ino), whatever its spelling: a holder is a process with an open fd whose
`os.stat` is the waited file's (reached through the waiter's /proc/PID/root), never a path's text.

The protocol (patches/diagnose_knowledge.json's `locks`) is recognised from the waiting frames: torch's FileBaton, filelock's
SoftFileLock and FileLock, torch 2.14's FileLock; else by what the code does (patcher/diagnose/waits.py):
a thread that stays in a loop that sleeps between tries waiting for a file to vanish is FileBaton's
protocol when its class keeps a file it created exclusively (a copy of FileBaton), and a marker of
unknown protocol otherwise; a loop trying an OS lock that /proc/locks shows another process holding,
or a thread the kernel blocks on one (`->` in /proc/locks), is the kernel's.

Read only: the frames' source files, /proc/locks, /proc/self/status, /proc/PID/{fd,mountinfo,cwd,
environ,cmdline,cgroup,root}.
"""

from __future__ import annotations

import contextlib
import glob
import os
import platform
import pwd
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from patcher.diagnose import knowledge, procs, waits
from patcher.diagnose.model import (
    Frame,
    Hidden,
    Holder,
    Lock,
    Mount,
    Position,
    ProcessFacts,
    Protocol,
    Reach,
    Sample,
    Stack,
    Start,
)
from patcher.diagnose.procs import ProcTable

PROC = Path("/proc")


# The lock protocols and their waiting frames are data (patches/diagnose_knowledge.json, read by
# patcher/diagnose/knowledge.py), matched in order: filelock's 3.x (_api.py) and 4.x
# (_core/_acquire.py) acquire loops, the class telling its SoftFileLock, StrictSoftFileLock and
# FileLock apart, torch's FileBaton and the copies others ship.
KnownWait = knowledge.KnownWait
# The protocols whose holder keeps the file open while it holds it: with every possible holder in
# view, none holding it open proves it left behind. A kernel lock is never left behind; a marker's
# maker may have closed it and live on.
HELD_OPEN: tuple[Protocol, ...] = ("baton", "soft")


class OsLock(NamedTuple):
    """One row of /proc/locks."""

    type: str  # FLOCK, POSIX, OFDLCK
    pid: int  # the holder (the waiter, for a row marked `->`), as this PID namespace numbers it
    device: tuple[int, int]  # major, minor
    inode: int
    blocked: bool  # `->`: this process waits for the lock
    shared: bool = (
        False  # READ: a shared lock, a reader's (verify's on the torch directory), never a writer's
    )


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
            device, shared = (int(major, 16), int(minor, 16)), words[2] == "READ"
            found.append(OsLock(words[0], int(words[3]), device, int(inode), blocked, shared))
        except (IndexError, ValueError):
            continue
    return found


def _stat(path: str) -> os.stat_result:
    """os.stat, bounded: a file system that does not answer raises procs.NotReadInTime."""
    return procs.bounded(lambda: os.stat(path))


def _identity(path: str) -> tuple[tuple[int, int], int, procs.Identity] | None:
    """The file's device (major, minor) and inode as /proc/locks names them, and its identity."""
    try:
        st = _stat(path)
    except OSError:
        return None
    return (os.major(st.st_dev), os.minor(st.st_dev)), st.st_ino, (st.st_dev, st.st_ino)


def _numbers(device: int) -> tuple[int, int]:
    return os.major(device), os.minor(device)


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
    return not out_of_view(mount, 0, late=False)


def out_of_view(mount: Mount | None, unread: int, late: bool) -> tuple[Hidden, ...]:
    """What keeps the holders of a file on `mount` from being proven absent: every process that could
    hold it must be in this tool's PID namespace and read, by root, and the file itself read. A
    process that root with CAP_SYS_PTRACE in effect cannot read (a sandbox's init that holds more
    capabilities) is named in the sentence, but no reader could do better: it does not block the proof."""
    hidden: list[Hidden] = []
    if late:
        hidden.append("not-read-in-time")
    if mount is None:
        hidden.append("mount")
    elif shared_by_hosts(mount):
        hidden.append("other-hosts")
    elif not (initial_pid_namespace() or (mount.point == "/" and mount.fstype == "overlay")):
        hidden.append("pid-namespace")
    if unread and procs.rights() != "root-ptrace":  # what root with CAP_SYS_PTRACE cannot read, none can
        hidden.append("unreadable")
    if os.geteuid() != 0 and others_hidden():
        hidden.append("not-root")
    return tuple(hidden)


def others_hidden() -> bool:
    """Whether /proc hides other users' processes from this reader (mounted with `hidepid`). Without
    it a reader that is not root lists every process of its PID namespace, and those of other users
    it cannot read are counted as unreadable (`unread`): being another user hides nothing more."""
    return hides_others(_read(f"{PROC}/self/mountinfo"))


def hides_others(mountinfo: str) -> bool:
    """From a mountinfo: whether its /proc is mounted with a `hidepid` that hides processes; True
    when it has no /proc (nothing then shows that every process is listed)."""
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/proc" and " - proc " in line:
            options = line.split(" - ", 1)[1].split()[-1].split(",")
            return any(o.startswith("hidepid=") and o not in ("hidepid=0", "hidepid=off") for o in options)
    return True


def _source(root: str, filename: str) -> str | None:
    """A frame's source file (bounded: a venv in a home on NFS may not answer)."""
    try:
        return procs.bounded(lambda: Path(root + filename).read_text(encoding="utf-8", errors="replace"))
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
    blocked = _blocked(process, samples, seen, table) or _in_lock_call(process, samples, seen, table)
    if blocked is not None:
        return blocked
    threads = polling(process, samples)
    for stack in (s for s in (samples[-1] if samples else ()) if s.frames):
        if stack.thread in threads:
            found = (
                _known(process, stack, seen, table)
                or _vanishing(process, stack, seen, None)
                or _os_lock(process, stack, seen, table)
            )
        else:
            loop = _within_a_try(samples, stack)
            found = _known(process, loop, seen, table) if loop is not None else None
        if found is not None:
            return found
    return None


def _within_a_try(samples: list[Sample], stack: Stack) -> Stack | None:
    """The thread's stack from a known lock's loop on, when the last dump caught it inside one try
    (filelock's loop calls a dozen functions a round, each a frame above the loop's): the loop's
    frame in every sample, and innermost, where the thread sleeps, in one at least. None for a
    thread that never sleeps in it (stuck inside a try, on a mount that does not answer)."""
    known = protocol_of(stack)
    if known is None:
        return None
    frame = known[1]
    mine = [[s for s in sample if s.thread == stack.thread and s.frames] for sample in samples]
    inside = all(any(frame[:2] in (f[:2] for f in s.frames) for s in own) for own in mine)
    sleeps = any(s.frames[0][:2] == frame[:2] for own in mine for s in own)
    return Stack(stack.thread, stack.frames[stack.frames.index(frame) :]) if inside and sleeps else None


def _holders(pids: list[int], seen: ProcTable) -> tuple[Holder, ...]:
    found = [seen.processes[p] for p in pids if p in seen.processes]
    return tuple(Holder(s.pid, s.command, s.state, s.wchan) for s in found)


def _caller(process: ProcessFacts, stack: Stack) -> tuple[str, int, waits.Locals] | None:
    if len(stack.frames) < 2:
        return None
    frame = stack.frames[1]
    source = _source(process.root, frame.filename)
    return (source, frame.line, dict(frame.locals)) if source is not None else None


def _class_of(frame: Frame) -> str:
    """The class of the frame's `self`, as py-spy shows it (`<SoftFileLock at 0x7f...>`)."""
    shown = dict(frame.locals).get("self", "")
    return shown[1:].split(" ", 1)[0] if shown.startswith("<") else ""


def protocol_of(stack: Stack) -> tuple[KnownWait, Frame] | None:
    """The first row of the known locks one of the thread's frames is (its file, function and class)."""
    for known in knowledge.load().locks:
        for frame in stack.frames:
            named = frame.name.rsplit(".", 1)[-1] in known.functions
            ours = not known.classes or _class_of(frame) in known.classes
            if named and ours and frame.filename.endswith("/" + known.file):
                return known, frame
    return None


def _known(process: ProcessFacts, stack: Stack, seen: ProcTable, table: list[OsLock]) -> Lock | None:
    """A wait whose frames name its protocol: a FileBaton's (its path as the loop's test names it),
    or filelock's (the path a string local of its acquire loop holds)."""
    found = protocol_of(stack)
    if found is None:
        return None
    known, frame = found
    if known.protocol == "baton":
        return _vanishing(process, stack, seen, "baton")
    path = next(_strings((frame,)), None)
    if path is None:
        return Lock(known.protocol, "", "", None, (), stack.frames[0], whole=False)
    if known.protocol == "kernel":
        return _held(process, path, seen, table, stack.frames[0], needs_row=False)
    return _file(process, path, known.protocol, stack.frames[0], seen)


def _vanishing(
    process: ProcessFacts, stack: Stack, seen: ProcTable, protocol: Protocol | None
) -> Lock | None:
    """A wait for a file to vanish: FileBaton's protocol (named, or its code's shape: a class that
    keeps a file it created exclusively), else a marker of unknown protocol."""
    top = stack.frames[0]
    source = _source(process.root, top.filename)
    wait = waits.waited(source, top.line, dict(top.locals), _caller(process, stack)) if source else None
    if wait is None or source is None:
        return None
    protocol = protocol or ("baton" if waits.keeps_open(source, top.line) else "marker")
    path = whole_path(process.root, wait.path) if wait.path is not None else None
    if path is None:
        shown = wait.path.head + waits.CUT if wait.path is not None else ""
        return Lock(protocol, shown, process.root + shown if shown else "", None, (), top, whole=False)
    return _file(process, path, protocol, top, seen)


def _file(process: ProcessFacts, path: str, protocol: Protocol, waiting: Frame, seen: ProcTable) -> Lock:
    """A lock file and the processes that hold it open: an fd whose `os.stat` is the file's device
    and inode, by whatever path they opened it (never the path's text)."""
    read_at = reached(process, path)
    try:
        late, st = False, _stat(read_at)
    except procs.NotReadInTime:
        late, st = True, None
    except OSError:
        late, st = False, None
    identity = (st.st_dev, st.st_ino) if st else None
    pids, unread = seen.holding(identity) if identity else ([], 0)
    holders = _holders(pids, seen)
    mount = mount_of(process.pid, procs.resolved(process.root, path))
    hidden = out_of_view(mount, unread, late)
    age = max(0.0, time.time() - st.st_mtime) if st else None
    return Lock(
        protocol, path, read_at, age, holders, waiting, unread=unread, mount=mount,
        seen=not hidden, not_in_view=hidden, owner=_owner(read_at) if st else "",
    )  # fmt: skip


def reached(process: ProcessFacts, path: str) -> str:
    """The file as this tool reaches it: the path itself, or, in another mount namespace, through
    /proc/PID/root with the process's own links followed inside its root (the kernel would follow an
    absolute link there from this tool's root)."""
    return process.root + procs.resolved(process.root, path) if process.root else path


def _owner(read_at: str) -> str:
    try:
        uid = _stat(read_at).st_uid
    except OSError:
        return ""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def whole_path(root: str, path: waits.Spelling) -> str | None:
    """The path; for one py-spy cut short, the one file that completes it (None: none, or several)."""
    if not path.cut:
        return path.head
    found = glob.glob(glob.escape(root + path.head) + "*" + glob.escape(path.tail))
    return found[0].removeprefix(root) if len(found) == 1 else None


def _age(read_at: str) -> float | None:
    try:
        return max(0.0, time.time() - _stat(read_at).st_mtime)
    except OSError:
        return None


def _strings(frames: tuple[Frame, ...]) -> Iterator[str]:
    for frame in frames:
        for _, shown in frame.locals:
            text = waits.string(shown)
            if text is not None and not text.cut and text.head.startswith("/"):
                yield text.head


def _os_lock(process: ProcessFacts, stack: Stack, seen: ProcTable, table: list[OsLock]) -> Lock | None:
    """A poll that tries an OS lock: a string local names a file another process holds locked."""
    for path in dict.fromkeys(_strings(stack.frames)):
        lock = _held(process, path, seen, table, stack.frames[0], needs_row=True)
        if lock is not None:
            return lock
    return None


def _held(
    process: ProcessFacts,
    path: str,
    seen: ProcTable,
    table: list[OsLock],
    waiting: Frame | None,
    needs_row: bool,
) -> Lock | None:
    """An OS lock on `path` and its holders in /proc/locks (which leaves out the holders outside this
    PID namespace: none there proves nothing)."""
    read_at = reached(process, path)
    identity = _identity(read_at)
    rows = [r for r in table if identity and (r.device, r.inode) == identity[:2] and not r.blocked]
    rows = [r for r in rows if r.pid != process.pid]
    if needs_row and (identity is None or not rows):
        return None
    holders = _holders(list(dict.fromkeys(r.pid for r in rows)), seen)
    mount = mount_of(process.pid, procs.resolved(process.root, path))
    return Lock(
        "kernel", path, read_at, _age(read_at), holders, waiting, os=rows[0].type if rows else "",
        mount=mount, seen=all_in_view(mount), owner=_owner(read_at),
    )  # fmt: skip


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
        identity = procs.identity_of(process.pid, fd)  # never a stat: its file system may not answer
        if identity is not None and (_numbers(identity[0]), identity[1]) in wanted:
            with contextlib.suppress(OSError):
                lock = _held(process, os.readlink(fds / fd), seen, table, innermost, needs_row=True)
                if lock is not None:
                    return lock
    return None


# The system calls a thread blocks in on an OS lock, by machine (asm/unistd.h): flock, and fcntl,
# with F_SETLKW (7) or F_OFD_SETLKW (38) as its command.
LOCK_CALLS = {"x86_64": (73, 72), "aarch64": (32, 25)}
WAITING_FCNTL = (7, 38)


def _in_lock_call(
    process: ProcessFacts, samples: list[Sample], seen: ProcTable, table: list[OsLock]
) -> Lock | None:
    """A thread in a blocking flock or fcntl call (its /proc/PID/task/TID/syscall), the file named by
    the call's descriptor: the wait is named even when /proc/locks leaves out its holder (a process
    outside this PID namespace) and with it the waiter's own row."""
    calls = LOCK_CALLS.get(platform.machine())
    try:
        tasks = os.listdir(PROC / str(process.pid) / "task") if calls else []
    except OSError:
        return None
    innermost = next((s.frames[0] for s in (samples[-1] if samples else ()) if s.frames), None)
    for task in tasks:
        words = _read(f"{PROC}/{process.pid}/task/{task}/syscall").split()
        if len(words) < 3 or not words[0].isdigit() or calls is None:
            continue
        number, fd, command = int(words[0]), int(words[1], 16), int(words[2], 16)
        if number == calls[0] or (number == calls[1] and command in WAITING_FCNTL):
            with contextlib.suppress(OSError):
                path = os.readlink(PROC / str(process.pid) / "fd" / str(fd))
                return _held(process, path, seen, table, innermost, needs_row=False)
    return None


def reach_of(process: ProcessFacts, seen: ProcTable) -> Reach:
    """What diagnose can do where it runs towards the process: whether it shares its mounts, may
    enter them, sees it as its own PID namespace's PID 1; and the container or pod it is, when its
    cgroup or its runtime's files say."""
    env = seen.processes[process.pid].env if process.pid in seen.processes else {}
    hostname = _read(process.root + "/etc/hostname").strip() or env.get("HOSTNAME", "")
    runtimes = knowledge.load().runtimes
    docker, pods = runtimes["docker"], runtimes["kubernetes"]
    named = docker.cgroup.search(_read(f"/proc/{process.pid}/cgroup")) if docker.cgroup else None
    container = named[1][: docker.id_length] if named else None
    if (
        container is None
        and docker.file is not None
        and os.path.exists(process.root + docker.file)
        and docker.hostname is not None
        and docker.hostname.fullmatch(hostname)
    ):
        container = hostname  # Docker names a container's host after its ID unless told otherwise
    pod = hostname if pods.variable in env and hostname else None
    account = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    namespace = _read(process.root + account).strip() or None if pod else None
    return Reach(
        not process.container,
        procs.capable(procs.CAP_SYS_ADMIN),
        process.pid == 1,
        not initial_pid_namespace(),
        container,
        pod,
        namespace,
        position_of(process.pid),
        os.geteuid() == 0,
    )


def _namespace(pid: int | str, kind: str) -> str | None:
    """The namespace's link (`pid:[4026531836]`), read bounded: None when it could not be read."""
    try:
        return procs.bounded(lambda: os.readlink(f"{PROC}/{pid}/ns/{kind}"))
    except OSError:
        return None


def position_of(pid: int) -> Position:
    """Where this tool stands towards the process: the host (the first PID namespace), exec'd into
    its container (its PID and mount namespaces), a debug container (only its PID namespace), or
    elsewhere (nested, or namespaces it could not read)."""
    if initial_pid_namespace():
        return Position.HOST
    own = {k: _namespace("self", k) for k in ("pid", "mnt")}
    theirs = {k: _namespace(pid, k) for k in ("pid", "mnt")}
    if own["pid"] is None or own["pid"] != theirs["pid"]:
        return Position.OTHER
    return Position.EXEC if own["mnt"] is not None and own["mnt"] == theirs["mnt"] else Position.DEBUG


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def restart_of(process: ProcessFacts, seen: ProcTable) -> Start:
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
