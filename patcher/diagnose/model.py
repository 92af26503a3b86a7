"""The facts diagnose reads about a process, and what it finds: plain values, no I/O."""

from __future__ import annotations

from enum import Enum
from typing import Literal, NamedTuple

from patcher.core.exitcodes import ExitCode
from patcher.core.report import Report


class Frame(NamedTuple):
    name: str  # the qualified name py-spy reports (`OperatorIssue.operator_str`; bare on Python 3.10)
    filename: str
    line: int
    locals: tuple[tuple[str, str], ...]  # (name, py-spy's repr), from a dump with --locals; else empty

    def where(self) -> str:
        """`name (torch/_inductor/exc.py:33)`: the file from its package directory on."""
        parts = self.filename.split("/")
        short = "/".join(parts[parts.index("torch") :]) if "torch" in parts else parts[-1]
        return f"{self.name} ({short}:{self.line})"


class Stack(NamedTuple):
    thread: str
    frames: tuple[Frame, ...]  # innermost first, as py-spy dumps them


Sample = tuple[Stack, ...]  # one dump: every thread


class Launch(NamedTuple):
    """The launcher's variables in a rank's environment (torchrun sets them all; a hand-made launcher
    often MASTER_ADDR/MASTER_PORT and RANK/WORLD_SIZE): what ties the ranks of one job together."""

    run_id: str | None  # TORCHELASTIC_RUN_ID
    master: str | None  # MASTER_ADDR:MASTER_PORT, the rendezvous every rank of a job names
    rank: int | None  # RANK
    world_size: int | None  # WORLD_SIZE
    local_world_size: int | None  # LOCAL_WORLD_SIZE: the ranks torchrun started on this machine
    # The TCP store it is connected to (`host:port`), when no launcher's variables say: ranks a script
    # started with init_method="tcp://...", rank= and world_size= (patcher/diagnose/rendezvous.py)
    store: str | None = None

    @property
    def job(self) -> str | None:
        """What every rank of one job shares: the run ID, else the rendezvous address, else its store."""
        return self.run_id or self.master or self.store


class ProcessFacts(NamedTuple):
    pid: int
    command: str  # its command line, for the reader to recognise it
    interpreter: str  # as the process names it (inside its container, if any): for `apply --python`
    started: float  # epoch seconds
    root: str  # '' when it sees files as this tool does; else /proc/PID/root (a container)
    torch_dir: str | None  # the torch it loaded, as the process sees it
    torch_seen_at: str | None  # the same directory as this tool reads it
    torch_replaced: bool  # its torch/_C*.so was deleted after loading (torch reinstalled under it)
    torch_logs: str | None  # TORCH_LOGS in its environment
    pycache_prefix: str | None  # PYTHONPYCACHEPREFIX in its environment, as this tool reads it
    owns_torch: bool  # its interpreter lives beside its torch: `apply --python` reaches it
    parent: int  # its parent's PID
    launch: Launch  # what a launcher (torchrun, a script that sets the variables) put in its environment

    @property
    def container(self) -> bool:
        return bool(self.root)

    def same_job(self, other: ProcessFacts) -> bool:
        """Ranks of one job: the same launcher's run ID or rendezvous. A process without them is no
        rank, whoever started it."""
        return self.launch.job is not None and self.launch.job == other.launch.job


class TorchFacts(NamedTuple):
    """The loaded torch: verify's one result on its bytes (a refusal or an error as its report: code
    OK lazy, EAGER, REFUSED unknown, ENVIRONMENT unreadable), and when graph.py last changed."""

    report: Report
    changed: float | None  # graph.py's ctime: when it was last written, renamed or reinstalled
    mid_write: bool  # an apply or revert held the torch directory's lock while it was read
    unread: str  # why its files could not be read (the OS's reason); '' when they were


FindingKind = Literal[
    "eager-formatting", "info-formatting", "eager-torch", "stale-import", "lazy", "unknown-torch",
    "jit-lock-stale", "jit-lock-held", "jit-lock-unknown", "jit-lock-unseen", "marker-wait", "soft-lock-stale",
    "os-lock-held", "os-lock-unseen", "strict-lock-held", "strict-lock-orphaned", "lock-unknown",
    "compile-workers-gone", "compile-workers-gone-writing", "ranks-out-of-step",
    "ranks-waiting-for-progress", "in-collective", "rank-absent", "rank-awaited", "moving",
]  # fmt: skip

# Why a process was not read: each has its sentence and exit code in the findings' table.
Problem = Literal[
    "missing", "zombie", "exited", "not-python", "no-torch", "rights", "py-spy", "none", "stopped", "traced"
]


class Unreadable(NamedTuple):
    """A process diagnose could not read, and why (the sentence is render's, from the table)."""

    pid: int
    why: Problem
    command: str  # its command line, as far as it was read
    detail: str = ""  # rights: what could not be read (`memory map`, `stacks`); py-spy: its reason


class Holder(NamedTuple):
    """A process that holds a file open, and what it is doing as /proc says."""

    pid: int
    command: str
    state: str  # /proc/PID/stat's letter: R running, S sleeping, D in I/O, T stopped
    wchan: str  # the kernel function it sleeps in ('' when running)


# Filesystems whose files other hosts may open: a holder there is out of any local view.
NETWORK = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "fuse")


class Mount(NamedTuple):
    """The mount a file is on, as /proc/PID/mountinfo gives it (the longest mount point over it)."""

    point: str
    fstype: str  # ext4, overlay, nfs4, fuse.sshfs, ...
    source: str  # /dev/vda, server:/export, overlay, ...

    @property
    def network(self) -> bool:
        """Other hosts may mount it."""
        return self.fstype.split(".")[0] in NETWORK


# How a waited file is locked, which decides what proves its holder alive (patcher/diagnose/locks.py):
# baton: torch's FileBaton and its copies, created exclusively and kept open until removed;
# soft: filelock's SoftFileLock, the same; kernel: an flock or fcntl lock (filelock's FileLock, torch
# 2.14's), released by the kernel when its holder ends; marker: a loop waiting for a file to vanish,
# whose maker may have closed it (no protocol known: nobody holding it open proves nothing); strict:
# filelock's StrictSoftFileLock, whose claims (PID and host) stay until their owner or force_break()
# clears them; unknown: a lock wait in frames that wait on locks, of a class no row knows.
Protocol = Literal["baton", "soft", "kernel", "marker", "strict", "unknown"]


class Lock(NamedTuple):
    protocol: Protocol
    path: str  # as the process names it ('' when no frame's locals name it)
    read_at: str  # the same file as this tool reaches it (through /proc/PID/root for a container)
    age: float | None  # seconds since it was created; None when no such file
    holders: tuple[Holder, ...]
    waiting: Frame | None  # the loop that waits (FileBaton.wait, filelock's poll; None: none read)
    whole: bool = True  # False: py-spy cut the path short, and no one file completes it
    unread: int = 0  # processes whose open files this tool could not read (a holder may hide there)
    os: str = ""  # the OS lock's type in /proc/locks (FLOCK, POSIX); '' for none there (or no OS lock)
    owner: str = ""  # the file's owner (user name, else uid), for a marker
    mount: Mount | None = None
    # Every process that could hold it is in view and was read: this tool reads the host's initial PID
    # namespace, or the lock is on its container's own root; it is not on a network or cluster
    # filesystem; every process's open files were read, by root. Else `not_in_view` names what was not.
    seen: bool = True
    not_in_view: tuple[Hidden, ...] = ()
    claims: tuple[int, ...] = ()  # strict: the PIDs of its claims that no live process is
    lock_class: str = ""  # the class of the object that waits (`StrictSoftFileLock`), when frames name it


# What keeps a lock's holders from being proven absent (Lock.not_in_view): processes whose open files
# could not be read; a reader that is not root (another user's process may hide from it); processes
# outside this tool's PID namespace; other hosts (a network filesystem); a mount that could not be
# read; the lock file itself not read in time (its file system does not answer).
Hidden = Literal["unreadable", "not-root", "pid-namespace", "other-hosts", "mount", "not-read-in-time"]


class Position(Enum):
    """Where diagnose stands towards a process, from its own and the process's namespaces."""

    HOST = "host"  # the node's first PID namespace: every local process in view
    EXEC = "exec"  # shares the process's PID and mount namespaces (docker exec, kubectl exec)
    DEBUG = "debug-container"  # shares only its PID namespace (docker run --pid container:ID)
    OTHER = "other"  # nested, or a namespace of its own that the process is not in


class Reach(NamedTuple):
    """What diagnose can do where it runs, towards a process: for a step that works there."""

    same_mounts: bool  # it shares the process's mount namespace: the process's paths are its own
    mount_rights: bool  # CAP_SYS_ADMIN in effect: `nsenter --mount` may enter the process's
    pid_one_here: bool  # the process is PID 1 of diagnose's own PID namespace (a signal to it is dropped)
    own_pid_namespace: bool  # diagnose runs in a PID namespace of its own: processes outside are not in view
    container: str | None  # `docker restart NAME` names it (a Docker container's ID, from its cgroup)
    pod: str | None  # `kubectl delete pod NAME` (a Kubernetes pod, from its cgroup and hostname)
    namespace: str | None = None  # the pod's Kubernetes namespace (its service account's, when mounted)
    position: Position = Position.HOST
    root: bool = True  # the reader's effective uid is 0


class Start(NamedTuple):
    """How a process was started, as /proc says: enough to stop it and start it again by hand."""

    pid: int  # the process to stop: the server itself, or a rank's launcher (the job)
    cwd: str  # its working directory, as it names it
    argv: tuple[str, ...]
    variables: tuple[tuple[str, str], ...]  # those that decide what it imports and builds (procs.VARIABLES)
    init: bool  # PID 1 of its PID namespace (a container's main process): the kernel drops a SIGTERM it has no handler for


class Workers(NamedTuple):
    """Inductor's compile-worker processes of one parent, and how the pool was made."""

    sidecar: int | None  # the live sidecar (the parent's child running compile_worker/__main__.py)
    orphans: tuple[
        int, ...
    ]  # when the sidecar is gone: what it left behind, found by ancestry or entry point
    fx_mode: str | None  # TORCHINDUCTOR_FX_COMPILE_MODE: "subprocess" sends whole graphs to the sidecar
    wchan: str  # the kernel function the process sleeps in ('' when running): anon_pipe_write, a full pipe
    start: Start


class Cpu(NamedTuple):
    """Two looks at the CPU time of a process and of every process below it."""

    seconds: float  # CPU time used between the looks
    wall: float  # seconds between the looks


class Evidence(NamedTuple):
    """What diagnose read besides the stacks, for the findings that ask for it."""

    lock: Lock | None
    workers: Workers | None
    cpu: Cpu | None
    start: Start | None  # how the process waiting on a lock was started, for a step that restarts it
    children: tuple[int, ...]  # processes it started that are read as part of it, not on their own
    reach: Reach | None  # what diagnose can do towards the process waiting on a lock


class Peer(NamedTuple):
    """Another rank of the job as a waiting rank's finding names it."""

    pid: int
    rank: int | None  # its RANK, when its launcher set one
    kind: FindingKind
    where: str


class Peers(NamedTuple):
    """A rank's job as read on this machine: the processes with its launcher's run ID or rendezvous,
    each read whether given or not."""

    collective: str  # the function the waiting ranks wait in (`barrier`)
    waiting: tuple[int, ...]  # the job's ranks in a collective (itself included when it is one)
    odd: tuple[Peer, ...]  # the job's ranks that are not
    absent: tuple[int, ...]  # the ranks of WORLD_SIZE no process on this machine is
    here: (
        bool  # the whole job runs on this machine (a loopback rendezvous, or LOCAL_WORLD_SIZE == WORLD_SIZE)
    )


class Finding(NamedTuple):
    kind: FindingKind
    code: ExitCode
    samples: int
    in_formatting: int  # samples with operator_str called as this kind says (eager or via logging)
    depth: int  # nested __str__ frames above operator_str, the most seen
    frames: tuple[Frame, ...]  # the formatting's frames, or the innermost ones when it is elsewhere
    restart: bool  # graph.py (or torch) changed after the process started
    evidence: Evidence  # what was read besides the stacks
    id: str = ""  # the finding's ID in patches/diagnose_findings.json (TL-D001, ...)
    waiting: Frame | None = None  # where it waits, for a stall
    phase: str | None = None  # what a busy process is doing
    peers: Peers | None = None
    awaited_by: tuple[int, ...] = ()  # ranks of its job waiting for this one in a collective
