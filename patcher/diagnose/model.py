"""The facts diagnose reads about a process, and what it finds: plain values, no I/O."""

from __future__ import annotations

from typing import Literal, NamedTuple

from patcher.core.errors import ExitCode
from patcher.core.report import Report


class Frame(NamedTuple):
    name: str  # the qualified name py-spy reports (`OperatorIssue.operator_str`; bare on Python 3.10)
    filename: str
    line: int
    locals: tuple[tuple[str, str], ...] = ()  # (name, py-spy's repr), from a dump with --locals

    def where(self) -> str:
        """`name (torch/_inductor/exc.py:33)`: the file from its package directory on."""
        parts = self.filename.split("/")
        short = "/".join(parts[parts.index("torch") :]) if "torch" in parts else parts[-1]
        return f"{self.name} ({short}:{self.line})"


class Stack(NamedTuple):
    thread: str
    frames: tuple[Frame, ...]  # innermost first, as py-spy dumps them


Sample = tuple[Stack, ...]  # one dump: every thread


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
    owns_torch: bool = True  # its interpreter lives beside its torch: `apply --python` reaches it
    parent: int = 0  # its parent's PID: ranks of one server are siblings

    @property
    def container(self) -> bool:
        return bool(self.root)


class TorchFacts(NamedTuple):
    """The loaded torch: verify's one result on its bytes (a refusal or an error as its report: code
    OK lazy, EAGER, REFUSED unknown, ENVIRONMENT unreadable), and when graph.py last changed."""

    report: Report
    changed: float | None  # graph.py's ctime: when it was last written, renamed or reinstalled


Kind = Literal[
    "eager-formatting", "info-formatting", "eager-torch", "stale-import", "lazy", "unknown-torch",
    "jit-lock-stale", "jit-lock-held", "jit-lock-unknown", "jit-lock-unseen", "os-lock-held",
    "compile-workers-gone", "ranks-out-of-step",
    "ranks-waiting-for-progress", "in-collective", "moving",
]  # fmt: skip


class Holder(NamedTuple):
    """A process that holds a file open, and what it is doing as /proc says."""

    pid: int
    command: str
    state: str  # /proc/PID/stat's letter: R running, S sleeping, D in I/O, T stopped
    wchan: str  # the kernel function it sleeps in ('' when running)


class Mount(NamedTuple):
    """The mount a file is on, as /proc/PID/mountinfo gives it (the longest mount point over it)."""

    point: str
    fstype: str  # ext4, overlay, nfs4, fuse.sshfs, ...
    source: str  # /dev/vda, server:/export, overlay, ...


class Lock(NamedTuple):
    path: str  # as the process names it ('' when no frame's locals name it)
    read_at: str  # the same file as this tool reaches it (through /proc/PID/root for a container)
    age: float | None  # seconds since it was created; None when no such file
    holders: tuple[Holder, ...]
    whole: bool = True  # False: py-spy cut the path short, and no one file completes it
    unread: int = 0  # processes whose open files this tool could not read (a holder may hide there)
    waiting: Frame | None = None  # the loop that waits (FileBaton.wait, filelock's poll)
    os: str = ""  # the OS lock's type in /proc/locks (FLOCK, POSIX); '' for a lock file that must vanish
    mount: Mount | None = None
    # Every process that could hold it is in view: this tool reads the host's initial PID namespace, or
    # the lock is on its container's own root; and it is not on a network or cluster filesystem.
    seen: bool = True


class Start(NamedTuple):
    """How a stuck process (or the job of a rank: its launcher) was started, as /proc tells it."""

    pid: int  # the process to stop: the server itself, or the launcher of a rank
    argv: tuple[str, ...]
    cwd: str  # '' when unreadable
    environment: tuple[tuple[str, str], ...]  # the variables that decide what it imports and builds
    container: bool  # it runs in a container: its command is run there, not here


class Workers(NamedTuple):
    """Inductor's compile-worker processes of one parent."""

    sidecar: int | None  # the live sidecar (the parent's child running compile_worker/__main__.py)
    orphans: tuple[int, ...]  # live processes still carrying --parent=PID when the sidecar is gone


class Cpu(NamedTuple):
    """Two looks at the CPU time of a process and of every process below it."""

    seconds: float  # CPU time used between the looks
    wall: float  # seconds between the looks


class Evidence(NamedTuple):
    """What diagnose read besides the stacks, for the findings that ask for it."""

    lock: Lock | None = None
    workers: Workers | None = None
    cpu: Cpu | None = None
    start: Start | None = None  # how to start it again, for a step that stops it


class Rank(NamedTuple):
    """A peer rank as a waiting rank's finding names it."""

    pid: int
    kind: Kind
    where: str


class Peers(NamedTuple):
    collective: str  # the function it waits in (`barrier`)
    waiting: tuple[int, ...]  # the sibling ranks in a collective, itself included
    odd: tuple[Rank, ...]  # the sibling ranks that are not


class Finding(NamedTuple):
    kind: Kind
    code: ExitCode
    samples: int
    in_formatting: int  # samples with operator_str called as this kind says (eager or via logging)
    depth: int  # nested __str__ frames above operator_str, the most seen
    frames: tuple[Frame, ...]  # the formatting's frames, or the innermost ones when it is elsewhere
    restart: bool  # graph.py (or torch) changed after the process started
    id: str = ""  # the finding's ID in patches/diagnose_findings.json (TL-D001, ...)
    waiting: Frame | None = None  # where it waits, for a stall
    evidence: Evidence = Evidence()
    phase: str | None = None  # what a busy process is doing
    peers: Peers | None = None
    awaited_by: tuple[int, ...] = ()  # sibling ranks waiting for this one in a collective
