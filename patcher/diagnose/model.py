"""The facts diagnose reads about a process, and what it finds: plain values, no I/O."""

from __future__ import annotations

from typing import Literal, NamedTuple

from patcher.core.errors import ExitCode


class Frame(NamedTuple):
    name: str  # the qualified name py-spy reports (`OperatorIssue.operator_str`; bare on Python 3.10)
    filename: str
    line: int

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

    @property
    def container(self) -> bool:
        return bool(self.root)


class TorchFacts(NamedTuple):
    """The loaded torch as verify reads it from its bytes."""

    state: str
    code: ExitCode  # verify's: OK lazy, EAGER, REFUSED unknown, ENVIRONMENT unreadable
    message: str
    version: str | None
    changed: float | None  # graph.py's ctime: when it was last written, renamed or reinstalled
    sha256: str | None = None  # graph.py's, and the release it matched and how, as verify says
    release: str | None = None
    match: str | None = None


Kind = Literal["eager-formatting", "info-formatting", "eager-torch", "stale-import", "lazy", "unknown-torch"]


class Finding(NamedTuple):
    kind: Kind
    code: ExitCode
    samples: int
    in_formatting: int  # samples with operator_str called as this kind says (eager or via logging)
    depth: int  # nested __str__ frames above operator_str, the most seen
    frames: tuple[Frame, ...]  # the formatting's frames, or the innermost ones when it is elsewhere
    restart: bool  # graph.py (or torch) changed after the process started
