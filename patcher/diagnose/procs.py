"""What /proc says about a process: the torch it loaded, its interpreter, its start, its descendants;
and what the findings ask for besides the stacks: its tree's CPU time, a lock file and the processes
that hold it open, Inductor's compile-worker processes.

Read only, and only what a reader with ptrace rights over the process may read (its maps, environ,
root and exe links, fds); nothing of the process's own interpreter is run, nothing is written,
signalled or removed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import NamedTuple

from patcher.core.exitcodes import ExitCode
from patcher.diagnose.findings import Rules
from patcher.diagnose.model import Holder, Launch, ProcessFacts, Start, Workers

PROC = Path("/proc")
_DELETED = " (deleted)"


class Unreadable(NamedTuple):
    """A process diagnose could not read, and why: a finished sentence and its exit code."""

    pid: int
    code: ExitCode
    message: str


def exists(pid: int) -> bool:
    return (PROC / str(pid) / "stat").exists()


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (which may hold spaces and parentheses)."""
    text = (PROC / str(pid) / "stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def started(pid: int) -> float:
    """Epoch seconds: its start in clock ticks after boot, against the boot clock."""
    ticks = int(stat_fields(pid)[19])
    booted = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return booted + ticks / os.sysconf("SC_CLK_TCK")


def pids() -> list[int]:
    """Every process now."""
    return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]


def parent_of(pid: int) -> int:
    try:
        return int(stat_fields(pid)[1])
    except (OSError, ValueError, IndexError):
        return 0


def own_pid(pid: int) -> int:
    """The PID as the process itself sees it (inside its PID namespace: the last of NSpid)."""
    try:
        status = (PROC / str(pid) / "status").read_text()
    except OSError:
        return pid
    line = next((line for line in status.splitlines() if line.startswith("NSpid:")), "")
    return int(line.split()[-1]) if line.split()[1:] else pid


def parents() -> dict[int, int]:
    """pid -> parent pid of every process now."""
    found = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int(stat_fields(int(entry.name))[1])
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    return found


def descendants(pid: int, tree: dict[int, int]) -> list[int]:
    """Every process below `pid` (the ranks a server starts), in pid order."""
    below: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in tree.items() if parent in frontier} - below
        below |= frontier
    return sorted(below)


def loaded_files(pid: int) -> list[str]:
    """The files mapped into the process, as it names them (raises PermissionError without rights)."""
    names = []
    for line in (PROC / str(pid) / "maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/"):
            names.append(fields[5])
    return list(dict.fromkeys(names))


def torch_library(files: list[str]) -> str | None:
    """torch/_C*.so (with ` (deleted)` when it was removed after loading)."""
    for name in files:
        path = name.removesuffix(_DELETED)
        if path.rsplit("/", 2)[-2:-1] == ["torch"] and path.rsplit("/", 1)[-1].startswith("_C."):
            return name
    return None


def is_python(pid: int, files: list[str]) -> bool:
    """A CPython: its executable is a python, or it maps libpython (an embedding server)."""
    exe = _link(pid, "exe") or ""
    names = [exe, *files]
    return any(n.rsplit("/", 1)[-1].startswith(("python", "libpython")) for n in names)


def _link(pid: int, name: str) -> str | None:
    try:
        return os.readlink(PROC / str(pid) / name)
    except OSError:
        return None


def root_of(pid: int) -> str:
    """'' when the process sees the files as this tool does; else /proc/PID/root to reach them."""
    own = _link(os.getpid(), "ns/mnt")
    if _link(pid, "ns/mnt") == own and _link(pid, "root") == "/":
        return ""
    return str(PROC / str(pid) / "root")


def environ(pid: int) -> dict[str, str]:
    try:
        data = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in data.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def shown(argv: list[str], limit: int = 80) -> str:
    """A command line for a sentence: on one line, cut between words with an ellipsis when long
    (inside its first word only when that word alone is too long)."""
    import textwrap

    text = " ".join(" ".join(argv).split())
    short = textwrap.shorten(text, limit, placeholder=" \u2026")
    return text[: limit - 1] + "\u2026" if short == "\u2026" else short


def zombie(pid: int) -> bool:
    """Whether the process has exited and waits for its parent to reap it (state Z in its stat)."""
    try:
        stat = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] == b"Z"


def command_line(pid: int) -> list[str]:
    try:
        data = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [word.decode(errors="replace") for word in data.split(b"\0") if word]


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
            link = os.readlink(root + done + "/" + part)
        except OSError:
            done += "/" + part
            continue
        hops += 1
        if hops > 40:  # a loop: what is left stays unresolved
            return done + "/" + "/".join([part, *parts])
        done = "" if link.startswith("/") else done
        parts = link.split("/") + parts
    return done or "/"


def _same_file(root: str, a: str, b: str) -> bool:
    return resolved(root, a) == resolved(root, b)


def interpreter(pid: int, root: str, argv: list[str], torch_dir: str | None) -> tuple[str, bool]:
    """The interpreter as the process names it: a venv's bin/python (its exe link names the base
    interpreter, which does not import the venv's torch), else the exe link itself; and whether it
    is one that lives beside its torch's site directory. When it is not (torch on PYTHONPATH, in a
    user site, an editable install), that interpreter run on its own does not import that torch."""
    from patcher.install.locate import owner_candidates

    exe = (_link(pid, "exe") or "").removesuffix(_DELETED)
    named = [argv[0]] if argv and argv[0].startswith("/") else []
    owners = owner_candidates(os.path.dirname(torch_dir) if torch_dir else "")
    for candidate in [*named, *owners]:
        if exe and _same_file(root, candidate, exe):  # a venv's python is its base's file: the name decides
            return candidate, candidate in owners
    return exe or (argv[0] if argv else "python"), False


CAP_SYS_PTRACE = 19  # its bit in /proc/PID/status's CapEff


def may_trace_as_root() -> bool:
    """Whether this process is root with CAP_SYS_PTRACE in effect: the most rights a reader has."""
    if os.geteuid() != 0:
        return False
    try:
        status = (PROC / "self" / "status").read_text()
    except OSError:  # pragma: no cover - /proc/self is always readable to its own process
        return False
    mask = next((line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), "0")
    return bool(int(mask, 16) >> CAP_SYS_PTRACE & 1)


def why_not(pid: int, what: str) -> str:
    """Why the kernel refused to let this process read another's `what`, for the rights it has."""
    if may_trace_as_root():
        return (
            f"Expected to read process {pid}'s {what}, but the kernel refuses it even to root with "
            "CAP_SYS_PTRACE, so rights are not what is missing: the process lives in a user or PID "
            "namespace above this one (diagnose it from the host, or from inside its own namespace), "
            "or a security module forbids it (Yama's ptrace_scope 3, or an LSM such as AppArmor or "
            "SELinux)"
        )
    if os.geteuid() == 0:
        return (
            f"Expected to read process {pid}'s {what}, but this root runs without CAP_SYS_PTRACE (a "
            "container's default), or the process lives in a user or PID namespace above this one: in "
            "Docker start the container with `--cap-add SYS_PTRACE` or diagnose from the host; in "
            "Kubernetes add `securityContext.capabilities.add: [SYS_PTRACE]`"
        )
    return (
        f"Expected to read process {pid}'s {what}, but this user may not (no ptrace rights over it). "
        "Run diagnose as root or as the process's user; in Docker start the container with "
        "`--cap-add SYS_PTRACE` or diagnose from the host; in Kubernetes add "
        "`securityContext.capabilities.add: [SYS_PTRACE]`"
    )


def no_rights(pid: int, what: str = "memory map") -> Unreadable:
    return Unreadable(pid, ExitCode.ENVIRONMENT, why_not(pid, what))


def gone(pid: int) -> bool:
    """Whether the process has ended: no longer listed, or a zombie waiting to be reaped."""
    return not exists(pid) or zombie(pid)


def read_process(pid: int) -> ProcessFacts | Unreadable | None:
    """The process's facts; None for a Python without torch loaded (not ours to judge)."""
    if not exists(pid):
        return Unreadable(
            pid, ExitCode.USAGE, f"Expected a running process {pid}, found none: pass the server's PID"
        )
    if zombie(pid):
        return Unreadable(
            pid,
            ExitCode.USAGE,
            f"Expected a running process {pid}, found one that has exited (a zombie its parent has not "
            "reaped yet): pass the PID of a live server",
        )
    try:
        files = loaded_files(pid)
        start = started(pid)
    except PermissionError:
        return no_rights(pid)
    except (OSError, ValueError, IndexError):
        return Unreadable(pid, ExitCode.USAGE, f"Expected a running process {pid}, but it ended while read")
    library = torch_library(files)
    if library is None:
        return None if is_python(pid, files) else not_python(pid)
    return _facts(pid, files, start, library)


def not_python(pid: int) -> Unreadable:
    name = shown(command_line(pid)[:1]) or "?"
    return Unreadable(
        pid,
        ExitCode.USAGE,
        f"Expected a Python process at PID {pid}, found {name}, which is not Python and started no "
        "Python with torch: pass the PID of the server (or of its ranks)",
    )


def _facts(pid: int, files: list[str], start: float, library: str) -> ProcessFacts:
    root = root_of(pid)
    torch_dir = os.path.dirname(library.removesuffix(_DELETED))
    argv = command_line(pid)
    env = environ(pid)
    python, owns_torch = interpreter(pid, root, argv, torch_dir)
    return ProcessFacts(
        pid=pid,
        parent=parent_of(pid),
        command=" ".join(argv),
        interpreter=python,
        owns_torch=owns_torch,
        started=start,
        root=root,
        torch_dir=torch_dir,
        torch_seen_at=root + torch_dir,
        torch_replaced=library.endswith(_DELETED),
        torch_logs=env.get("TORCH_LOGS"),
        pycache_prefix=_prefix(env.get("PYTHONPYCACHEPREFIX"), root),
        launch=launch_of(env),
    )


def launch_of(env: dict[str, str]) -> Launch:
    address, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    return Launch(
        run_id=env.get("TORCHELASTIC_RUN_ID") or None,
        master=f"{address}:{port}" if address and port else None,
        rank=_number(env.get("RANK")),
        world_size=_number(env.get("WORLD_SIZE")),
    )


def _number(value: str | None) -> int | None:
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


def job_of(found: list[ProcessFacts], tree: dict[int, int]) -> list[ProcessFacts]:
    """The processes of the jobs of `found` that were not read: with torch loaded, and its siblings
    (the same parent: mp.spawn, torchrun) or carrying its launcher's run ID or rendezvous. Siblings
    under PID 1 count only with the launcher's variables (there, every daemon is a sibling)."""
    read = {p.pid for p in found}
    parents = {p.parent for p in found if p.parent > 1 or p.launch.job}
    jobs = {p.launch.job for p in found if p.launch.job}
    candidates = {pid for pid, parent in tree.items() if parent in parents} - read
    if jobs:
        candidates |= {pid for pid in tree if pid not in read and launch_of(environ(pid)).job in jobs}
    mates = [r for r in map(read_process, sorted(candidates)) if isinstance(r, ProcessFacts)]
    return [m for m in mates if any(m.same_job(p) for p in found)]


def _prefix(value: str | None, root: str) -> str | None:
    return root + value if value and value.startswith("/") else None


def with_torch() -> tuple[list[int], int]:
    """Every process this user may read that has torch loaded, and how many it may not read."""
    found, unreadable = [], 0
    for entry in sorted(PROC.iterdir(), key=lambda p: (len(p.name), p.name)):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            files = loaded_files(int(entry.name))
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue
        if torch_library(files) is not None:
            found.append(int(entry.name))
    return found, unreadable


# What the findings ask for besides the stacks (patcher/diagnose/findings.py): read only when asked.


def cpu_seconds(pid: int, tree: dict[int, int]) -> float:
    """CPU time of the process and every process below it, the reaped ones included (seconds)."""
    ticks = 0
    for each in [pid, *descendants(pid, tree)]:
        try:
            fields = stat_fields(each)
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile: its time is in its parent's reaped children's
        ticks += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def holder(pid: int) -> Holder:
    try:
        state = stat_fields(pid)[0]
    except (OSError, IndexError):
        state = "?"
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        wchan = ""
    return Holder(pid, shown(command_line(pid), 160), state, "" if wchan == "0" else wchan)


def workers_of(process: ProcessFacts, rules: Rules) -> Workers:
    """The compile-worker processes started for `process`: the live sidecar (its child running the
    pool's entry point with `--parent=` its own PID as it sees it); or, with none, what the sidecar
    left behind: processes carrying that `--parent=` (a forked worker), and the sidecar's own
    children, which its death handed to PID 1 or a subreaper (a `multiprocessing` worker or resource
    tracker, in the same session, carrying the variable SubprocPool sets, started after `process`,
    whose parent is no pool's process)."""
    mark = f"--parent={own_pid(process.pid)}"
    tree = parents()
    sidecar, left = None, []
    for pid in sorted(tree):
        argv = command_line(pid)
        helper = any(h in word for word in argv for h in rules.helpers)
        if helper and mark in argv and tree[pid] == process.pid and not gone(pid):
            sidecar = pid
        elif not gone(pid) and ((helper and mark in argv) or _left_by_sidecar(pid, process, tree, rules)):
            left.append(pid)
    env = environ(process.pid)
    return Workers(
        sidecar,
        () if sidecar is not None else tuple(left),
        env.get("TORCHINDUCTOR_FX_COMPILE_MODE"),
        _wchan(process.pid),
        start_of(process.pid, env),
    )


# How multiprocessing starts a pool's processes (spawn, forkserver) and its resource tracker.
_POOL_ENTRIES = (
    "from multiprocessing.spawn import",
    "from multiprocessing.resource_tracker import",
    "from multiprocessing.forkserver import",
)
_POOL_VARIABLE = ("TORCH_WARM_POOL", "0")  # SubprocPool starts its sidecar with it; its children inherit it


def _pool_process(pid: int, rules: Rules) -> bool:
    line = " ".join(command_line(pid))
    return any(e in line for e in (*_POOL_ENTRIES, *rules.helpers))


def _left_by_sidecar(pid: int, process: ProcessFacts, tree: dict[int, int], rules: Rules) -> bool:
    if pid == process.pid or not any(e in " ".join(command_line(pid)) for e in _POOL_ENTRIES):
        return False
    try:
        session, mine = stat_fields(pid)[3], stat_fields(process.pid)[3]
    except (OSError, ValueError, IndexError):
        return False
    if session != mine or _pool_process(tree.get(pid, 0), rules):  # a live pool's own
        return False
    return environ(pid).get(_POOL_VARIABLE[0]) == _POOL_VARIABLE[1] and started(pid) >= process.started


def _wchan(pid: int) -> str:
    try:
        wchan = (PROC / str(pid) / "wchan").read_text().strip()
    except OSError:
        return ""
    return "" if wchan == "0" else wchan


# The variables that decide what a started Python imports, where it builds and which devices it
# sees: given to a start that is to be as the one it replaces (a command found on PATH takes PATH too).
VARIABLES = (
    "TORCH", "PYTORCH", "CUDA_", "HIP_", "ROCM", "HSA_", "PYTHON", "LD_LIBRARY_PATH", "LD_PRELOAD",
    "VIRTUAL_ENV", "TMPDIR", "OMP_", "MKL_", "NCCL_", "GLOO_", "MASTER_", "WORLD_SIZE", "TRITON_",
    "HF_", "VLLM_", "SGLANG_", "AITER_",
)  # fmt: skip


def start_of(pid: int, env: dict[str, str]) -> Start:
    argv = tuple(command_line(pid))
    on_path = bool(argv) and "/" not in argv[0]
    return Start(
        pid,
        _link(pid, "cwd") or "/",
        argv,
        tuple(sorted((k, v) for k, v in env.items() if k.startswith(VARIABLES) or (on_path and k == "PATH"))),
        own_pid(pid) == 1,
    )
