"""What /proc says, read once a run: every process's plain facts from one listing of /proc (its parent,
state, session, start, CPU time, command line, environment, kernel wait and open files by device and
inode), then, for the processes diagnose reads, the torch each loaded and how it was started.

Read only, and only what a reader with ptrace rights over a process may read (its maps, environ,
root and exe links, fds); nothing of a process's own interpreter is run, nothing is written,
signalled or removed. No sentence is built here: what could not be read is a named reason.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from patcher.diagnose import knowledge
from patcher.diagnose.model import Launch, ProcessFacts, Start, Unreadable, Workers

PROC = "/proc"
DELETED = " (deleted)"
CAP_SYS_PTRACE = 19  # its bit in /proc/PID/status's CapEff
CAP_SYS_ADMIN = 21  # its bit: what `nsenter --mount` needs
Identity = tuple[int, int]  # a file's (st_dev, st_ino): the same file whatever its spelling
BOUND = 2.0  # seconds: the longest a read that may wait on a file system (a stat, a readlink) is given
T = TypeVar("T")


class NotReadInTime(TimeoutError):
    """A read that waits on a file system that does not answer (a FUSE daemon stopped, an NFS server
    gone): left to its thread, reported as not read in time (an OSError, as any read that failed)."""


def bounded(read: Callable[[], T]) -> T:
    """`read()`, or NotReadInTime when it has not returned within BOUND seconds: run in a daemon
    thread, which a read that never returns leaves behind without holding up the run or its exit."""
    seconds = BOUND
    done: list[T] = []
    failed: list[BaseException] = []

    def work() -> None:
        try:
            done.append(read())
        except BaseException as exc:  # handed to the caller as it is
            failed.append(exc)

    thread = threading.Thread(target=work, daemon=True, name="bounded-read")
    thread.start()
    thread.join(seconds)
    if failed:
        raise failed[0]
    if not done:
        raise NotReadInTime(f"not read in time ({seconds:g} s)")
    return done[0]


class Seen(NamedTuple):
    """One process as the one listing of /proc found it."""

    pid: int
    parent: int
    state: str  # /proc/PID/stat's letter: R running, S sleeping, D in I/O, T stopped, Z exited
    session: int
    started: float  # epoch seconds
    cpu_ticks: int  # utime, stime and its reaped children's
    argv: tuple[str, ...]
    env: dict[str, str]  # empty when it may not be read
    files: frozenset[Identity] | None  # its open files; None: not read (this user may not, or `alone`)
    wchan: str  # the kernel function it sleeps in ('' when running)

    @property
    def command(self) -> str:
        return " ".join(self.argv)


class ProcTable(NamedTuple):
    """Every process at one moment, by PID, and when it was read (for the CPU time's second look)."""

    processes: dict[int, Seen]
    read_at: float  # time.monotonic()

    def below(self, pid: int) -> list[int]:
        """Every process below `pid` (the ranks a server starts, its compile workers), in pid order."""
        found: set[int] = set()
        frontier = {pid}
        while frontier:
            frontier = {p.pid for p in self.processes.values() if p.parent in frontier} - found
            found |= frontier
        return sorted(found)

    def holding(self, identity: Identity) -> tuple[list[int], int]:
        """The processes with that file open, and how many processes' open files could not be read."""
        seen = self.processes.values()
        return [p.pid for p in seen if p.files and identity in p.files], sum(p.files is None for p in seen)

    def cpu_seconds(self, pid: int) -> float:
        """CPU time of the process and every process below it, the reaped ones included."""
        ticks = sum(self.processes[p].cpu_ticks for p in [pid, *self.below(pid)] if p in self.processes)
        return ticks / os.sysconf("SC_CLK_TCK")


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _stat_fields(data: bytes) -> list[str]:
    """/proc/PID/stat after the command name (which may hold spaces and parentheses)."""
    return data[data.rindex(b")") + 2 :].decode().split()


def _booted() -> float:
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


def _files(pid: int, devices: dict[str, dict[int, int]]) -> frozenset[Identity] | None:
    """Its open files by device and inode, from /proc/PID/fdinfo (`mnt_id:`, `ino:`) and the mount
    IDs of its /proc/PID/mountinfo: nothing here asks a file system (a stat of /proc/PID/fd/N does,
    and never returns on a dead FUSE or NFS mount). `devices`: each mount namespace's table, read once."""
    place = f"{PROC}/{pid}/fdinfo"
    try:
        fds = os.listdir(place)
    except PermissionError:
        return None
    except OSError:
        return frozenset()
    mounts = _devices(pid, devices)
    return frozenset(i for fd in fds if (i := _fd_identity(pid, fd, mounts)) is not None)


def _fd_identity(pid: int, fd: str, mounts: dict[int, int]) -> Identity | None:
    """An fd's file by device and inode: a socket's on sockfs's device (socket_device), so that the
    rendezvous can match it to /proc/net/tcp's inodes; None for a pipe or another anonymous file."""
    try:
        handle = os.open(f"{PROC}/{pid}/fdinfo/{fd}", os.O_RDONLY)
        try:
            data = os.read(handle, 4096)  # pos, flags, mnt_id, ino, then what the file's kind adds
        finally:
            os.close(handle)
    except OSError:
        return None
    fields = dict(line.split(b":", 1) for line in data.split(b"\n", 4)[:4] if b":" in line)
    mount, inode = fields.get(b"mnt_id", b"").strip(), fields.get(b"ino", b"").strip()
    if not (mount.isdigit() and inode.isdigit()):
        return None
    if int(mount) in mounts:
        return mounts[int(mount)], int(inode)
    try:  # the link of an fd of /proc is made from the open file: it asks no file system
        kind = os.readlink(f"{PROC}/{pid}/fd/{fd}")
    except OSError:
        return None
    device = socket_device()
    return (device, int(inode)) if kind.startswith("socket:[") and device is not None else None


@functools.cache
def socket_device() -> int | None:
    """The device number every socket's inode is on (sockfs), from a socket of this process's own."""
    import socket  # only diagnose reads sockets (a rendezvous, a lock's holders); the probe never does

    try:
        with socket.socket() as own:
            return os.fstat(own.fileno()).st_dev
    except OSError:
        return None


def _devices(pid: int, known: dict[str, dict[int, int]]) -> dict[int, int]:
    """Mount ID -> device number, from the process's /proc/PID/mountinfo (`ID PARENT MAJOR:MINOR ...`)."""
    space = _link(pid, "ns/mnt") or f"pid {pid}"
    if space not in known:
        table = {}
        for line in (_read(f"{PROC}/{pid}/mountinfo") or b"").decode(errors="replace").splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[0].isdigit() and ":" in fields[2]:
                major, minor = fields[2].split(":", 1)
                table[int(fields[0])] = os.makedev(int(major), int(minor))
        known[space] = table
    return known[space]


def identity_of(pid: int, fd: str) -> Identity | None:
    """One open file of the process by device and inode, read without asking its file system."""
    return _fd_identity(pid, fd, _devices(pid, {}))


def environ(data: bytes | None) -> dict[str, str]:
    pairs = (item.partition(b"=") for item in (data or b"").split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def _seen(pid: int, booted: float, tick: int, devices: dict[str, dict[int, int]] | None) -> Seen | None:
    stat = _read(f"{PROC}/{pid}/stat")
    if stat is None:
        return None  # gone meanwhile
    fields = _stat_fields(stat)
    argv = tuple(
        w.decode(errors="replace") for w in (_read(f"{PROC}/{pid}/cmdline") or b"").split(b"\0") if w
    )
    wchan = (_read(f"{PROC}/{pid}/wchan") or b"").decode().strip()
    return Seen(
        pid=pid,
        parent=int(fields[1]),
        state=fields[0],
        session=int(fields[3]),
        started=booted + int(fields[19]) / tick,
        cpu_ticks=sum(int(v) for v in fields[11:15]),
        argv=argv,
        env=environ(_read(f"{PROC}/{pid}/environ")),
        files=None if devices is None else _files(pid, devices),
        wchan="" if wchan == "0" else wchan,
    )


def read() -> ProcTable:
    """Every process now: the one listing of /proc a run makes."""
    booted, tick = _booted(), os.sysconf("SC_CLK_TCK")
    listed = [int(name) for name in os.listdir(PROC) if name.isdigit()]
    devices: dict[str, dict[int, int]] = {}
    found = {s.pid: s for s in (_seen(pid, booted, tick, devices) for pid in sorted(listed)) if s is not None}
    return ProcTable(found, time.monotonic())


def again(table: ProcTable, pids: list[int]) -> ProcTable:
    """The second look at the same processes (their CPU time and state), without listing /proc."""
    booted, tick = _booted(), os.sysconf("SC_CLK_TCK")
    devices: dict[str, dict[int, int]] = {}
    found = {p: s for p in pids if (s := _seen(p, booted, tick, devices)) is not None}
    return ProcTable(found, time.monotonic())


def alone(pid: int) -> Seen | None:
    """One process as the probe reads it: its stat, command line and environment, without its open
    files (each fd's fdinfo, the mount table), which only a lock's holders need."""
    return _seen(pid, _booted(), os.sysconf("SC_CLK_TCK"), None)


def gone(pid: int) -> bool:
    """Whether the process has ended: no longer there, or a zombie waiting to be reaped."""
    stat = _read(f"{PROC}/{pid}/stat")
    return stat is None or _stat_fields(stat)[0] == "Z"


def _link(pid: int, name: str) -> str | None:
    try:
        return os.readlink(f"{PROC}/{pid}/{name}")
    except OSError:
        return None


def loaded_files(pid: int) -> list[str]:
    """The files mapped into the process, as it names them (raises PermissionError without rights)."""
    with open(f"{PROC}/{pid}/maps") as maps:
        names = [
            f[5] for line in maps if len(f := line.rstrip("\n").split(maxsplit=5)) == 6 and f[5][:1] == "/"
        ]
    return list(dict.fromkeys(names))


def torch_library(files: list[str]) -> str | None:
    """torch/_C*.so (with ` (deleted)` when it was removed after loading)."""
    for name in files:
        parts = name.removesuffix(DELETED).rsplit("/", 2)
        if parts[-2:-1] == ["torch"] and parts[-1].startswith("_C."):
            return name
    return None


def own_pid(pid: int) -> int:
    """The PID as the process itself sees it (inside its PID namespace: the last of NSpid)."""
    status = (_read(f"{PROC}/{pid}/status") or b"").decode(errors="replace")
    line = next((line.split() for line in status.splitlines() if line.startswith("NSpid:")), [])
    return int(line[-1]) if line[1:] else pid


def root_of(pid: int) -> str:
    """'' when the process sees the files as this tool does; else /proc/PID/root to reach them."""
    if _link(pid, "ns/mnt") == _link(os.getpid(), "ns/mnt") and _link(pid, "root") == "/":
        return ""
    return f"{PROC}/{pid}/root"


def resolved(root: str, path: str) -> str:
    """`path` with its symlinks followed inside `root` (a venv's absolute `bin/python` link names a
    file of the container, which the host's own resolution would look for on the host)."""
    parts, done, hops = path.split("/"), "", 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            done = os.path.dirname(done)
            continue
        try:
            link = bounded(functools.partial(os.readlink, root + done + "/" + part))
        except OSError:
            done += "/" + part
            continue
        hops += 1
        if hops > 40:  # a loop: what is left stays unresolved
            return done + "/" + "/".join([part, *parts])
        done = "" if link.startswith("/") else done
        parts = link.split("/") + parts
    return done or "/"


def interpreter(pid: int, root: str, argv: tuple[str, ...], torch_dir: str) -> tuple[str, bool]:
    """The interpreter as the process names it: a venv's bin/python (its exe link names the base
    interpreter, which does not import the venv's torch), else the exe link itself; and whether it
    is one that lives beside its torch's site directory. When it is not (torch on PYTHONPATH, in a
    user site, an editable install), that interpreter run on its own does not import that torch."""
    from patcher.install.locate import owner_candidates

    exe = (_link(pid, "exe") or "").removesuffix(DELETED)
    named = [argv[0]] if argv and argv[0].startswith("/") else []
    owners = owner_candidates(os.path.dirname(torch_dir))
    for candidate in [*named, *owners]:
        if exe and resolved(root, candidate) == resolved(root, exe):  # a venv's python is its base's file
            return candidate, candidate in owners
    return exe or (argv[0] if argv else "python"), False


def rights() -> str:
    """What this reader may read of other processes: `root-ptrace` (root with CAP_SYS_PTRACE in
    effect: the most a reader has), `root` (without it, a container's default) or `user`."""
    if os.geteuid() != 0:
        return "user"
    return "root-ptrace" if capable(CAP_SYS_PTRACE) else "root"


def capable(bit: int) -> bool:
    """Whether this reader has the capability `bit` in effect (/proc/self/status's CapEff)."""
    status = (_read(f"{PROC}/self/status") or b"").decode()
    mask = next((line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), "0")
    return bool(int(mask, 16) >> bit & 1)


def launch_of(env: dict[str, str]) -> Launch:
    """What a launcher put in a rank's environment (its variables: patches/diagnose_knowledge.json)."""
    for named in knowledge.load().launchers:
        address, port = env.get(named.master_addr), env.get(named.master_port)
        found = Launch(
            run_id=env.get(named.run_id) or None,
            master=f"{address}:{port}" if address and port else None,
            rank=_number(env.get(named.rank)),
            world_size=_number(env.get(named.world_size)),
            local_world_size=_number(env.get(named.local_world_size)),
        )
        if any(v is not None for v in found):
            return found
    return Launch(None, None, None, None, None)


def _number(value: str | None) -> int | None:
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


def read_process(seen: Seen) -> ProcessFacts | Unreadable | None:
    """The process's facts; None for a Python without torch loaded (not ours to judge)."""
    if seen.state == "Z":
        return Unreadable(seen.pid, "zombie", seen.command)
    try:
        files = loaded_files(seen.pid)
    except PermissionError:
        return Unreadable(seen.pid, "rights", seen.command, "memory map")
    except OSError:
        return Unreadable(seen.pid, "exited", seen.command)
    library = torch_library(files)
    if library is None:
        exe = _link(seen.pid, "exe") or ""
        named = [n.rsplit("/", 1)[-1] for n in [exe, *files]]
        return (
            None
            if any(n.startswith(("python", "libpython")) for n in named)
            else Unreadable(seen.pid, "not-python", seen.command)
        )
    root = root_of(seen.pid)
    torch_dir = os.path.dirname(library.removesuffix(DELETED))
    python, owns_torch = interpreter(seen.pid, root, seen.argv, torch_dir)
    prefix = seen.env.get("PYTHONPYCACHEPREFIX")
    return ProcessFacts(
        pid=seen.pid,
        parent=seen.parent,
        command=seen.command,
        interpreter=python,
        owns_torch=owns_torch,
        started=seen.started,
        root=root,
        torch_dir=torch_dir,
        torch_seen_at=root + torch_dir,
        torch_replaced=library.endswith(DELETED),
        torch_logs=seen.env.get("TORCH_LOGS"),
        pycache_prefix=root + prefix if prefix and prefix.startswith("/") else None,
        launch=launch_of(seen.env),
    )


def with_torch(table: ProcTable) -> tuple[list[int], int]:
    """Every process this user may read that has torch loaded, and how many it may not read."""
    found, unread = [], 0
    for pid in (p for p in table.processes if p != os.getpid()):
        try:
            if torch_library(loaded_files(pid)) is not None:
                found.append(pid)
        except PermissionError:
            unread += 1
        except OSError:
            continue
    return found, unread


def job_of(found: list[ProcessFacts], table: ProcTable) -> list[ProcessFacts]:
    """The processes of the jobs of `found` that were not read: those whose launcher's variables name
    the same run ID or rendezvous. Nothing else makes a rank: not a parent, not a session."""
    jobs = {p.launch.job for p in found if p.launch.job}
    read = {p.pid for p in found}
    mates = [s for s in table.processes.values() if s.pid not in read and launch_of(s.env).job in jobs]
    return [m for m in map(read_process, mates) if isinstance(m, ProcessFacts)]


# How multiprocessing starts a pool's processes (spawn, forkserver) and its resource tracker.
_POOL_ENTRIES = (
    "from multiprocessing.spawn import",
    "from multiprocessing.resource_tracker import",
    "from multiprocessing.forkserver import",
)
_POOL_VARIABLE = ("TORCH_WARM_POOL", "0")  # SubprocPool starts its sidecar with it; its children inherit it


def workers_of(process: ProcessFacts, table: ProcTable, helpers: tuple[str, ...]) -> Workers:
    """The compile-worker processes started for `process`: the live sidecar (its child running the
    pool's entry point with `--parent=` its own PID as it sees it); or, with none, what the sidecar
    left behind: processes carrying that `--parent=` (a forked worker), and the sidecar's own
    children, which its death handed to PID 1 or a subreaper (a `multiprocessing` worker or resource
    tracker, in the same session, carrying the variable SubprocPool sets, started after `process`,
    whose parent is no pool's process)."""
    mark = f"--parent={own_pid(process.pid)}"
    me = table.processes.get(process.pid)
    sidecar, left = None, []
    for seen in table.processes.values():
        if seen.state == "Z":
            continue
        helper = mark in seen.argv and any(h in word for word in seen.argv for h in helpers)
        if helper and seen.parent == process.pid:
            sidecar = seen.pid
        elif helper or (me is not None and _left_by_sidecar(seen, me, table, helpers)):
            left.append(seen.pid)
    return Workers(
        sidecar,
        () if sidecar is not None else tuple(left),
        me.env.get("TORCHINDUCTOR_FX_COMPILE_MODE") if me else None,
        me.wchan if me else "",
        start_of(process.pid, table),
    )


def _left_by_sidecar(seen: Seen, process: Seen, table: ProcTable, helpers: tuple[str, ...]) -> bool:
    if seen.pid == process.pid or seen.session != process.session or seen.started < process.started:
        return False
    if not any(e in seen.command for e in _POOL_ENTRIES):
        return False
    parent = table.processes.get(seen.parent)
    pooled = parent is not None and any(e in parent.command for e in (*_POOL_ENTRIES, *helpers))
    return not pooled and seen.env.get(_POOL_VARIABLE[0]) == _POOL_VARIABLE[1]  # a live pool's own: not left


# The variables that decide what a started Python imports, where it builds and which devices it
# sees: given to a start that is to be as the one it replaces (a command found on PATH takes PATH too).
VARIABLES = (
    "TORCH", "PYTORCH", "CUDA_", "HIP_", "ROCM", "HSA_", "PYTHON", "LD_LIBRARY_PATH", "LD_PRELOAD",
    "VIRTUAL_ENV", "TMPDIR", "OMP_", "MKL_", "NCCL_", "GLOO_", "MASTER_", "WORLD_SIZE", "TRITON_",
    "HF_", "VLLM_", "SGLANG_", "AITER_",
)  # fmt: skip


def start_of(pid: int, table: ProcTable) -> Start:
    seen = table.processes.get(pid)
    argv, env = (seen.argv, seen.env) if seen else ((), {})
    on_path = bool(argv) and "/" not in argv[0]
    return Start(
        pid,
        _link(pid, "cwd") or "/",
        argv,
        tuple(sorted((k, v) for k, v in env.items() if k.startswith(VARIABLES) or (on_path and k == "PATH"))),
        own_pid(pid) == 1,
    )
