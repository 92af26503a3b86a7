"""What diagnose says: one paragraph per process, its JSON entry, and the one report of the run."""

from __future__ import annotations

import shlex
import textwrap
from typing import NamedTuple

from patcher.core.exitcodes import ExitCode
from patcher.core.report import Advice, JsonValue, Report
from patcher.diagnose.findings import Catalog
from patcher.diagnose.model import (
    Finding,
    Frame,
    Hidden,
    Holder,
    Lock,
    Position,
    ProcessFacts,
    TorchFacts,
    Unreadable,
    Workers,
)
from patcher.diagnose.steps import Step, Where


class Words(NamedTuple):
    """What sentences and steps are rendered with: the table, how the user runs this tool (the
    console script, or the single file with its Python), the py-spy diagnose used, and the reader's
    rights (procs.rights: they decide what a refusal to read says)."""

    catalog: Catalog
    program: str
    spy: str
    rights: str


def shown(argv: list[str], limit: int = 80) -> str:
    """A command line for a sentence: on one line, cut between words with an ellipsis when long
    (inside its first word only when that word alone is too long)."""
    text = " ".join(" ".join(argv).split())
    short = textwrap.shorten(text, limit, placeholder=" \u2026")
    return text[: limit - 1] + "\u2026" if short == "\u2026" else short


def no_py_spy(python: str, install: str) -> str:
    return (
        f"Expected py-spy (the stack sampler diagnose reads processes with) beside {python} or on PATH, "
        f"found none. Install it into the tool's environment: {install} (the `diagnose` extra of "
        "torch-lazylog), or diagnose from the host"
    )


def unread(u: Unreadable, catalog: Catalog, rights: str) -> str:
    """Why a process could not be read, in the table's sentence for the reader's rights."""
    said = catalog.unread[u.why].said
    words = u.command.split()
    return said[rights if (u.detail or "any" not in said) and rights in said else "any"].format(
        pid=u.pid, name=shown(words[:1]) or "?", line=shown(words[:3]), detail=u.detail
    )


class Diagnosed(NamedTuple):
    process: ProcessFacts
    torch: TorchFacts
    finding: Finding
    exited: bool  # it ended while sampled: the finding is of the samples taken before


def _chain(frames: tuple[Frame, ...]) -> str:
    return " < ".join(f.where() for f in frames)


def _who(process: ProcessFacts) -> str:
    where = f", in a container: read through {process.root}" if process.container else ""
    return f"PID {process.pid} ({shown([process.command], 120)}{where})"


def _formatting(d: Diagnosed) -> str:
    f = d.finding
    inner = f.frames[0].where() if f.depth else "none"
    called = _chain(f.frames[-3:-1]) if len(f.frames) >= 3 else _chain(f.frames)
    return (
        f"{f.in_formatting} of {f.samples} samples in {called}, under {f.depth} nested __str__ frames "
        f"(innermost: {inner})"
    )


def _where(d: Diagnosed) -> str:
    frames = d.finding.frames
    return f"innermost frames {_chain(frames)}" if frames else "no Python frames"


def _torch(d: Diagnosed) -> str:
    """verify's sentence on the torch it loaded (which names its version and directory)."""
    if d.torch.unread:
        return f"the torch it loaded: expected to read {d.process.torch_seen_at}/_inductor/graph.py, but {d.torch.unread}"
    return f"the torch it loaded: {d.torch.report.message.rstrip('.')}"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {rest} s" if minutes else f"{rest} s"


def _holder(h: Holder) -> str:
    doing = {"R": "running", "S": "sleeping", "D": "in uninterruptible I/O", "T": "stopped"}.get(
        h.state, h.state
    )
    return f"PID {h.pid} ({shown([h.command], 160)}), {doing}" + (f" in {h.wchan}" if h.wchan else "")


def _unread(count: int, path: str) -> str:
    if not count:
        return ""
    return (
        f" (but {count} process{'es' if count > 1 else ''} could not be read, which may hold it: "
        f"`fuser {shlex.quote(path)}` as root says)"
    )


def _pids(pids: tuple[int, ...]) -> str:
    return " ".join(map(str, pids)) if pids else "none"


def _rank(pid: int, rank: int | None) -> str:
    return f"PID {pid}" + (f" (rank {rank})" if rank is not None else "")


def _ranks(ranks: tuple[int, ...]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def _absent(ranks: tuple[int, ...]) -> str:
    return f"; {_ranks(ranks)} of its WORLD_SIZE no process on this machine is" if ranks else ""


def _here(process: ProcessFacts) -> str:
    launch = process.launch
    if launch.local_world_size is not None and launch.local_world_size == launch.world_size:
        return f"LOCAL_WORLD_SIZE is its WORLD_SIZE, {launch.world_size}"
    return f"its rendezvous, {launch.master or launch.store}, is this machine's loopback address"


def _subprocess_mode(workers: Workers) -> bool:
    return "subprocess" in (workers.fx_mode or "")


def _pool(workers: Workers | None) -> str:
    if workers is not None and _subprocess_mode(workers):
        return (
            f"TORCHINDUCTOR_FX_COMPILE_MODE={workers.fx_mode}: each graph is compiled in the sidecar, "
            "whatever TORCHINDUCTOR_COMPILE_THREADS says"
        )
    return "the async-compile pool Inductor starts when TORCHINDUCTOR_COMPILE_THREADS is above 1"


def _without_pool(process: ProcessFacts, workers: Workers) -> str:
    """Stop it and what the sidecar left, then start it again as it was started (its directory, its
    command line, its TORCH* variables) with no sidecar to lose: graphs compiled in the process
    (FX compile mode normal) and no worker pool (one compile thread)."""
    start = workers.start
    variables = dict(start.variables) | {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    if _subprocess_mode(workers):
        variables["TORCHINDUCTOR_FX_COMPILE_MODE"] = "normal"
    stop = " ".join(map(str, (process.pid, *workers.orphans)))
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(variables.items()))
    return f"kill {stop}; cd {shlex.quote(start.cwd)} && env {env} {shlex.join(start.argv)}"


def _fields(d: Diagnosed, words: Words) -> dict[str, str]:
    """Every value a finding's sentence or step may name, as text."""
    f, e = d.finding, d.finding.evidence
    workers, peers = e.workers, f.peers
    orphans = workers.orphans if workers else ()
    return {
        "spy": shlex.quote(words.spy),
        "absent_ranks": _ranks(peers.absent) if peers and peers.absent else "?",
        "here": _here(d.process),
        "awaited": _pids(peers.waiting) if peers else "none",
        "odd_pid": str(peers.odd[0].pid) if peers and peers.odd else "?",
        "job": _pids(peers.waiting[1:]) if peers else "none",
        "absent": _absent(peers.absent) if peers else "",
        "formatting": _formatting(d) if f.in_formatting else "",
        "where": _where(d),
        "logs": d.process.torch_logs or "unset",
        "waiting": f.waiting.where() if f.waiting else "?",
        **_lock_fields(d),
        "own_pid": str(d.process.pid),
        "orphans": _pids(orphans),
        "pool": _pool(workers),
        "restart": _without_pool(d.process, workers) if workers else "?",
        "wchan": (workers.wchan if workers else "") or "none",
        "collective": peers.collective if peers else f.waiting.name.rsplit(".", 1)[-1] if f.waiting else "?",
        "odd": "; ".join(f"{_rank(r.pid, r.rank)}, {r.kind}, in {r.where}" for r in peers.odd)
        if peers
        else "?",
        "phase": f.phase or "?",
        "cpu": f"{e.cpu.seconds:.2f} s of CPU in {e.cpu.wall:.2f} s" if e.cpu else "?",
    }


def _lock_fields(d: Diagnosed) -> dict[str, str]:
    """The lock's values: its path, who holds it, where a holder out of view may be, and the parts
    of a restart (stop, start: the process's own command line, directory and variables)."""
    lock, start = d.finding.evidence.lock, d.finding.evidence.start
    job = start is not None and start.pid != d.process.pid
    holders = ", ".join(map(_holder, lock.holders)) if lock else "?"
    return {
        "lock": (lock.path or "(no path)") if lock else "?",
        "what": "filelock's SoftFileLock" if lock and lock.protocol == "soft" else "the JIT build lock",
        "age": _age(lock.age if lock else None),
        "owner": (lock.owner or "?") if lock else "?",
        "unread": _unread(lock.unread, lock.read_at) if lock else "",
        "holders": holders,
        "claims": f"PIDs {_pids(lock.claims)}" if lock and lock.claims else "no claim it could read",
        "lock_class": (lock.lock_class or "class unknown") if lock else "?",
        "open_by": f"is held open by {holders}" if lock and lock.holders else "no process holds it open",
        "os_lock": lock.os if lock and lock.os else "?",
        "os_hidden": _os_hidden(d),
        "unseen": _unseen(d),
        "check": _check(d),
        "os_check": _os_check(d),
        "stop_and_remove": _stop_and_remove(d),
        "remove": _remove(d),
        "where_step": _where_step(d),
        "start": _start(d),
        "again": _again(d, job),
    }


def _remove(d: Diagnosed) -> str:
    """`rm -- LOCK`, where diagnose runs: in the process's mount namespace when it shares it or may
    enter it (CAP_SYS_ADMIN); else through /proc/PID/root, which needs only the rights to read it."""
    lock, reach = d.finding.evidence.lock, d.finding.evidence.reach
    if lock is None:
        return "?"
    if reach is None or reach.same_mounts:
        return f"rm -- {shlex.quote(lock.read_at)}"
    if reach.mount_rights:
        return f"nsenter --target={d.process.pid} --mount -- rm -- {shlex.quote(lock.path)}"
    return f"rm -- {shlex.quote(lock.read_at)}"


def _restart_by_runtime(d: Diagnosed) -> str | None:
    """A container's main process (its PID namespace's PID 1) is restarted by its runtime or its
    orchestrator, from where they run: named when its cgroup or hostname says which it is."""
    reach = d.finding.evidence.reach
    if reach is None:
        return None
    if reach.container:
        return f"docker restart {reach.container}"
    if reach.pod:
        return f"kubectl delete pod {reach.pod}" + (f" -n {reach.namespace}" if reach.namespace else "")
    return None


def _stop_and_remove(d: Diagnosed) -> str:
    """`kill PID && rm -- LOCK`; for a process in another mount namespace, the lock removed first
    (its root is gone from /proc once it has ended), then the process stopped. A PID namespace's PID
    1 drops a SIGTERM it has no handler for: from outside its namespace it is stopped with SIGKILL,
    or restarted by its runtime when diagnose knows which; from inside, a signal to it is dropped
    and the restart is the runtime's, named in the sentence (`_where_step`)."""
    lock, start, reach = d.finding.evidence.lock, d.finding.evidence.start, d.finding.evidence.reach
    pid = start.pid if start else d.process.pid
    init = start is not None and start.init
    runtime = _restart_by_runtime(d) if init else None
    here = reach is not None and reach.pid_one_here and init
    kill = (runtime or f"kill -KILL {pid}") if init else f"kill {pid}"
    if lock is None:
        return "" if here else kill
    if here:
        return _remove(d)
    if d.process.container:
        return f"{_remove(d)} && {kill}"
    return f"{kill} && {_remove(d)}"


def _where_step(d: Diagnosed) -> str:
    """For a process that is diagnose's own PID namespace's PID 1 (diagnose in a debug container
    that shares only its PID namespace): where its restart runs."""
    reach, start = d.finding.evidence.reach, d.finding.evidence.start
    if reach is None or not reach.pid_one_here or start is None or not start.init:
        return ""
    runtime = _restart_by_runtime(d)
    said = (
        f"`{runtime}`"
        if runtime
        else "its runtime's or orchestrator's restart (`docker restart`, or deleting its pod); its cgroup "
        "and hostname do not say which container it is"
    )
    return (
        f". It is PID 1 of the PID namespace diagnose runs in (a container's main process): a signal from "
        f"here is dropped, so after the step, from the host, restart its container with {said}"
    )


def _again(d: Diagnosed, job: bool) -> str:
    start = d.finding.evidence.start
    said = f" (for a rank, its job: the launcher, PID {start.pid})" if job and start else ""
    if _where_step(d):
        return said + _where_step(d)
    if d.process.container:
        said += " (its container: start the container again once it has stopped)"
    return said


def _os_check(d: Diagnosed) -> str:
    lock = d.finding.evidence.lock
    path = shlex.quote(lock.path) if lock else "FILE"
    return (
        f"`lslocks` or `fuser -v {path}` names it on the host, or in the container or on the machine "
        "that shares the file"
    )


def _os_hidden(d: Diagnosed) -> str:
    reach = d.finding.evidence.reach
    if reach is not None and not reach.own_pid_namespace:
        return "no row of /proc/locks names a holder now (it may be about to take it)"
    return (
        "diagnose runs in a PID namespace of its own (a container, `unshare`, `kubectl exec`), and "
        "/proc/locks leaves out the locks of processes outside it"
    )


def _mount(lock: Lock | None) -> str:
    mount = lock.mount if lock else None
    return (
        f"{mount.fstype} {mount.source} mounted at {mount.point}" if mount else "a mount diagnose cannot read"
    )


def _unseen(d: Diagnosed) -> str:
    """What diagnose could not see, each reason of the lock's `not_in_view` in words."""
    lock = d.finding.evidence.lock
    if lock is None:
        return "?"
    count = lock.unread
    said = {
        "not-read-in-time": f"{lock.read_at} was not read in time (its file system does not answer)",
        "mount": "the mount it is on could not be read",
        "other-hosts": f"it is on {_mount(lock)}, which other hosts may mount",
        "pid-namespace": "diagnose runs in a PID namespace of its own (a container, `unshare`, `kubectl "
        f"exec`), and the lock is on {_mount(lock)}, which other containers or the host may share",
        "unreadable": f"{count} process{'es' if count != 1 else ''} could not be read (another user's, "
        "or without ptrace rights), which may hold it",
        "not-root": "diagnose does not run as root, so another user's process may hold it unseen",
    }
    return "; ".join(said[h] for h in _hidden(lock))


def _hidden(lock: Lock) -> tuple[Hidden, ...]:
    """What kept the lock's holders out of view (a lock made without its reasons: its mount's)."""
    if lock.not_in_view or lock.seen:
        return lock.not_in_view
    return ("other-hosts",) if lock.mount is not None and lock.mount.network else ("pid-namespace",)


def _check(d: Diagnosed) -> str:
    lock = d.finding.evidence.lock
    path = shlex.quote(lock.path) if lock else "FILE"
    source = lock.mount.source if lock and lock.mount else "it"
    if lock is not None and lock.mount is not None and lock.mount.network:
        return (
            f"on each host that mounts {source}, `fuser -v {path}` (or `lsof {path}`) names a holder; "
            "diagnose the build there. Only when none holds it anywhere is it left behind"
        )
    return (
        "diagnose this process from the host (its first PID namespace sees every local process), or "
        f"run `fuser -v {path}` in each container that mounts {source}. Only when none holds it is it "
        "left behind"
    )


def _start(d: Diagnosed) -> str:
    """` && cd DIR && env VAR=... COMMAND`: the start, as it was; '' when it cannot be run from here
    (a process in a container is started again by whoever runs the container)."""
    start = d.finding.evidence.start
    if start is None or d.process.container or not start.argv or _where_step(d):
        return ""  # a PID 1 here still runs until its runtime restarts it: no second server beside it
    variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in start.variables)
    return f" && cd {shlex.quote(start.cwd)} && {'env ' + variables + ' ' if variables else ''}{shlex.join(start.argv)}"


def _first_step(d: Diagnosed, words: Words) -> str | None:
    """The finding's own step; for the torch's findings, apply when its torch on disk is eager."""
    step = words.catalog.by_kind(d.finding.kind).next
    if step is not None:
        return step.format(**_fields(d, words))
    if d.finding.code != ExitCode.EAGER:
        return None
    return _apply(d, words)


def steps_of(d: Diagnosed, words: Words) -> tuple[Step, ...]:
    """Every step the finding needs, in order, each with where it runs: its own step here; for a
    stale lock under a PID 1 that diagnose's own PID namespace holds, the restart by its runtime
    from the host (a signal from here is dropped, and no second server may start beside it); for a
    lock not proven stale, the read that can prove it, never a removal."""
    first = _first_step(d, words)
    lock = d.finding.evidence.lock
    if first is None:
        return _proof(d, words) if lock is not None and d.finding.kind == "jit-lock-unseen" else ()
    if d.finding.kind == "jit-lock-stale" and _where_step(d):
        runtime = _restart_by_runtime(d) or "restart its container with its runtime or orchestrator"
        return Step(first), Step(runtime, Where.HOST)
    return (Step(first),)


def _proof(d: Diagnosed, words: Words) -> tuple[Step, ...]:
    """The read that can prove a lock left behind, from where every process that could hold it is
    in view: here as root when only rights were missing; else as root on the node (the host's PID
    of a container's PID 1 named by its runtime when diagnose knows the container)."""
    lock, reach, start = d.finding.evidence.lock, d.finding.evidence.reach, d.finding.evidence.start
    hidden = set(_hidden(lock)) if lock else set()
    diagnose = f"{words.program} diagnose"
    if hidden <= {"unreadable", "not-root"} and (reach is None or reach.position is not Position.OTHER):
        return (Step(f"{diagnose} {d.process.pid}", Where.HERE_AS_ROOT),)
    if "other-hosts" in hidden and lock is not None:
        return (Step(f"fuser -v {shlex.quote(lock.path)}", Where.NODE_ROOT),)
    if reach is not None and reach.position is Position.HOST:
        return (Step(f"{diagnose} {d.process.pid}", Where.NODE_ROOT),)
    if start is not None and start.init and reach is not None and reach.container:  # its PID there, by name
        pid = f"$(docker inspect -f '{{{{.State.Pid}}}}' {reach.container})"
        return (Step(f"{diagnose} {pid}", Where.NODE_ROOT),)
    return (Step(diagnose, Where.NODE_ROOT),)  # its PID there is not known here: every process with torch


def next_step(d: Diagnosed, words: Words) -> str | None:
    """The first step, when it runs where diagnose ran (the one `next` of the report and its JSON)."""
    found = steps_of(d, words)
    return found[0].run if found and found[0].where is Where.HERE else None


def step_lines(d: Diagnosed, words: Words) -> tuple[str, ...]:
    """The `Next:` lines after the report's own (`next`), each saying where it runs."""
    found = steps_of(d, words)
    rest = found[1:] if next_step(d, words) is not None else found
    return tuple(s.line(first=False) for s in rest)


def then_step(d: Diagnosed, words: Words) -> str | None:
    """The second finding's step: a stalled process (its finding and step first) whose torch on disk
    is also eager is patched before it starts again."""
    return _apply(d, words) if d.finding.code == ExitCode.STALLED else None


def _apply(d: Diagnosed, words: Words) -> str | None:
    """apply for the process's own interpreter, when its torch on disk is eager; for the torch
    directory it loaded when that interpreter alone does not import it (PYTHONPATH, a user site, an
    editable install)."""
    if d.torch.report.code != ExitCode.EAGER:
        return None
    if not d.process.owns_torch and d.process.torch_dir is not None:
        return f"{words.program} apply --torch-dir {shlex.quote(d.process.torch_dir)}"
    return f"{words.program} apply --python {shlex.quote(d.process.interpreter)}"


def _second(d: Diagnosed, words: Words) -> str:
    then = then_step(d, words)
    if then is None:
        return ""
    eager = words.catalog.by_kind("eager-torch")
    return (
        f" Second finding, {eager.id} {eager.kind}: the torch it loaded formats the text eagerly, so a "
        f"deep graph can hang its next start; patch it before it starts again: `{then}`."
    )


def _advice(d: Diagnosed, words: Words) -> str:
    if next_step(d, words) is None or d.finding.code != ExitCode.EAGER:
        return ""
    inside = " inside its container (docker exec, or the image's build step)" if d.process.container else ""
    torch = (
        f"the torch of {d.process.interpreter}"
        if d.process.owns_torch
        else f"the torch it loaded, {d.process.torch_dir}, which {d.process.interpreter} alone does not import"
    )
    return (
        f" Patch {torch}{inside}, then restart the process: a running process keeps the graph.py it imported."
    )


def _notes(d: Diagnosed) -> str:
    """What else the paragraph says of the process, each when its fact holds."""
    f, below = d.finding, d.finding.evidence.children
    many = "es" if len(below) > 1 else ""
    said = [
        d.torch.mid_write
        and "An apply or revert held the torch directory's lock while diagnose read it (diagnose never "
        "waits for it): the reading may be mid-write; diagnose again once it has ended.",
        f.awaited_by
        and f.kind != "rank-awaited"  # its own sentence says so
        and f"Ranks of its job wait for it in a collective: PIDs {_pids(f.awaited_by)}.",
        d.exited and f"It exited while it was sampled, after {f.samples} sample(s).",
        below
        and "Read as part of it, not judged on their own (Inductor's compile workers and compilers come "
        f"and go): the process{many} it started, PID{'s' if many else ''} {_pids(below)}.",
        f.restart
        and "torch's graph.py changed after this process started: it may still run what it imported "
        "before, so restart it.",
    ]
    return "".join(f" {note}" for note in said if note)


def paragraph(d: Diagnosed, words: Words) -> str:
    said = words.catalog.by_kind(d.finding.kind).said.format(**_fields(d, words))
    return f"{_who(d.process)} {said}; {_torch(d)}.{_notes(d)}{_advice(d, words)}{_second(d, words)}"


def _frames(frames: tuple[Frame, ...]) -> JsonValue:
    return [{"name": f.name, "filename": f.filename, "line": f.line} for f in frames]


ENTRY_FIELDS = (
    "pid", "exit_code", "finding", "id", "message", "next", "steps", "position", "command_line", "interpreter", "container",
    "torch_dir", "torch_dir_read_at", "torch_version", "state", "samples", "in_formatting", "str_depth",
    "frames", "restart", "evidence", "second",
)  # fmt: skip


def _lock(lock: Lock) -> JsonValue:
    mount = lock.mount
    return {"protocol": lock.protocol, "path": lock.path, "owner": lock.owner or None, "read_at": lock.read_at, "age_s": lock.age, "whole": lock.whole,
            "unread": lock.unread, "os": lock.os or None, "all_in_view": lock.seen,
            "not_in_view": list(lock.not_in_view),
            "mount": {"point": mount.point, "fstype": mount.fstype, "source": mount.source} if mount else None,
            "holders": [{"pid": h.pid, "command_line": h.command, "state": h.state, "wchan": h.wchan}
                        for h in lock.holders]}  # fmt: skip


def _evidence(f: Finding, catalog: Catalog) -> JsonValue:
    """What the finding read besides the stacks; null for the torch's own findings."""
    lock, workers, peers, cpu = f.evidence.lock, f.evidence.workers, f.peers, f.evidence.cpu
    found: dict[str, JsonValue] = {}
    if f.waiting is not None:
        found["waiting_in"] = _frames((f.waiting,))
    declared = catalog.by_kind(f.kind)
    if lock is not None and declared.evidence == "lock":
        found["lock"] = _lock(lock)
    if workers is not None and declared.evidence == "workers":
        found["sidecar"], found["orphans"] = workers.sidecar, list(workers.orphans)
        found["fx_compile_mode"], found["wchan"] = workers.fx_mode, workers.wchan
    if peers is not None:
        found["collective"] = peers.collective
    if peers is not None and not f.awaited_by:  # a waiting rank: the job's ranks waiting, and the others
        found["waiting"] = list(peers.waiting)
        found["odd"] = [
            {"pid": r.pid, "rank": r.rank, "finding": r.kind, "where": r.where} for r in peers.odd
        ]
    if peers is not None and peers.absent:
        found["absent_ranks"] = list(peers.absent)
    if f.awaited_by:
        found["awaited_by"] = list(f.awaited_by)
    if f.evidence.children:
        found["children"] = list(f.evidence.children)
    if declared.judged == "progress" and cpu is not None:
        found |= {"phase": f.phase, "cpu_s": round(cpu.seconds, 3), "wall_s": round(cpu.wall, 3)}
    return found or None


def _second_entry(d: Diagnosed, words: Words) -> JsonValue:
    """The second finding (an eager torch on disk under a stall): its ID, kind and step."""
    then = then_step(d, words)
    if then is None:
        return None
    eager = words.catalog.by_kind("eager-torch")
    return {"finding": eager.kind, "id": eager.id, "exit_code": int(ExitCode.EAGER), "next": then}


def entry(d: Diagnosed, words: Words) -> dict[str, JsonValue]:
    p, f = d.process, d.finding
    return {
        "pid": p.pid,
        "exit_code": int(f.code),
        "finding": f.kind,
        "id": f.id,
        "message": paragraph(d, words),
        "next": next_step(d, words),
        "steps": [s.json() for s in steps_of(d, words)],
        "position": f.evidence.reach.position.value if f.evidence.reach else None,
        "command_line": p.command,
        "interpreter": p.interpreter,
        "container": p.container,
        "torch_dir": p.torch_dir,
        "torch_dir_read_at": p.torch_seen_at,
        "torch_version": d.torch.report.torch_version,
        "state": d.torch.report.state,
        "samples": f.samples,
        "in_formatting": f.in_formatting,
        "str_depth": f.depth,
        "frames": _frames(f.frames),
        "restart": f.restart,
        "evidence": _evidence(f, words.catalog),
        "second": _second_entry(d, words),
    }


def unreadable_entry(u: Unreadable, words: Words) -> dict[str, JsonValue]:
    """The same fields, null where nothing was read (the frames an empty list)."""
    fields: dict[str, JsonValue] = dict.fromkeys(ENTRY_FIELDS)
    code = int(words.catalog.unread[u.why].code)
    return fields | {
        "pid": u.pid,
        "exit_code": code,
        "message": unread(u, words.catalog, words.rights),
        "steps": [],
        "frames": [],
    }


def report(
    found: list[Diagnosed], first: int | None, code: ExitCode, problems: list[Unreadable], words: Words
) -> Report:
    """The run's one report: every process's paragraph and the notes (processes that ended before
    they were read); the code judge decided; the step and the torch of the process that
    decides it (`first`), and the sentences of the PIDs that could not be read as its problems."""
    notes = [u for u in problems if words.catalog.unread[u.why].code == ExitCode.OK]
    missing = tuple(
        unread(u, words.catalog, words.rights).rstrip(".") + "." for u in problems if u not in notes
    )
    text = "\n".join(
        [
            *(paragraph(d, words) for d in found),
            *(unread(u, words.catalog, words.rights) + "." for u in notes),
        ]
    )
    if first is None:
        return Report("diagnose", "unknown", False, text if not missing else "\n".join(missing), code)
    decides = found[first]
    shared = decides.torch.report if len({d.process.torch_seen_at for d in found}) == 1 else None
    step = next_step(decides, words) if code == decides.finding.code else None
    return Report(
        "diagnose",
        decides.torch.report.state,
        False,
        text,
        code,
        next=Advice(step) if step else None,
        then=step_lines(decides, words) if code == decides.finding.code else (),
        torch_version=decides.torch.report.torch_version,
        torch_dir=decides.process.torch_dir,
        graph_py=f"{decides.process.torch_dir}/_inductor/graph.py",
        sha256=shared.sha256 if shared else None,
        release=shared.release if shared else None,
        match=shared.match if shared else None,
        problems=missing,
    )
