"""From a process's samples and its torch's state to one finding. Pure: tested on recorded dumps.

Eager: `OperatorIssue.operator_str` (torch/_inductor/exc.py) called directly from
`GraphLowering.call_function` (torch/_inductor/graph.py): the text torch < 2.13 builds for a log line
that is filtered out. Through logging (`LazyString.__str__`): a lazy torch building the text because
INFO is on for torch._inductor, which the patch does not make free.

Otherwise the findings of the table (patches/diagnose_findings.json) are walked in order: the first
whose frames every sample shows and whose evidence (read before, passed in) says so wins; then busy
and moving (CPU time rising between two looks, the stack in a compile phase); then the torch's own
state. Ranks in a collective are judged again against the other ranks of their job (`with_peers`).
The run's exit code is the most severe finding's, by the table's order (`decide`).
"""

from __future__ import annotations

from typing import Literal

from patcher.core.exitcodes import ExitCode
from patcher.diagnose import findings
from patcher.diagnose.findings import Catalog, Declaration
from patcher.diagnose.model import (
    Cpu,
    Evidence,
    Finding,
    FindingKind,
    Frame,
    Peer,
    Peers,
    ProcessFacts,
    Sample,
    Stack,
    TorchFacts,
    Unreadable,
)

Formatting = Literal["eager", "logging", "other"]
INNERMOST = 5  # frames shown when the process is not formatting
# A start is known to a clock tick (10 ms, rounded down): a change within this of it may predate it.
# Nothing is lost: a process imports graph.py seconds after it starts (torch's import alone takes that).
START_RESOLUTION = 0.05
# Busy: CPU seconds per second between the two looks, the process and all below it (its compile
# workers, their compilers). A sleeping process uses none; one compiling, about one or more.
BUSY_SHARE = 0.2
PROGRESS: tuple[FindingKind, ...] = ("moving", "info-formatting")  # a rank its peers may wait for


def _named(frame: Frame, name: str, file: str) -> bool:
    last = frame.name.rsplit(".", 1)[-1]
    return last == name and frame.filename.replace("\\", "/").endswith(file)


def _is_str(frame: Frame) -> bool:
    return frame.name.rsplit(".", 1)[-1] == "__str__"


def formatting(stack: Stack) -> tuple[Formatting, int, int] | None:
    """How operator_str was reached in this stack, the __str__ depth above it, and its index."""
    frames = stack.frames
    for index, frame in enumerate(frames):
        if not _named(frame, "operator_str", "torch/_inductor/exc.py"):
            continue
        depth = sum(1 for inner in frames[:index] if _is_str(inner))
        caller = frames[index + 1] if index + 1 < len(frames) else None
        if caller is not None and _named(caller, "call_function", "torch/_inductor/graph.py"):
            return "eager", depth, index
        if caller is not None and _named(caller, "__str__", "torch/_logging/_internal.py"):
            return "logging", depth, index
        return "other", depth, index
    return None


def _shown(stack: Stack, index: int) -> tuple[Frame, ...]:
    """The innermost frame, operator_str and the two frames that called it."""
    frames = stack.frames
    return (frames[0], *frames[index : index + 3]) if index > 0 else frames[index : index + 3]


def _innermost(samples: list[Sample], depth: int | None = INNERMOST) -> tuple[Frame, ...]:
    for sample in reversed(samples):
        stacks = sorted((s for s in sample if s.frames), key=lambda s: s.thread != "MainThread")
        if stacks:
            return stacks[0].frames[:depth]
    return ()


def _tally(samples: list[Sample], how: Formatting) -> tuple[int, int, tuple[Frame, ...]]:
    """Samples in which some thread formats the text `how`, the deepest chain, and its frames."""
    count, depth = 0, 0
    shown: tuple[Frame, ...] = ()
    for sample in samples:
        found = [(f, s) for s in sample if (f := formatting(s)) is not None and f[0] == how]
        count += bool(found)
        for (_, chain, index), stack in found:
            if chain >= depth:
                depth, shown = chain, _shown(stack, index)
    return count, depth, shown


def formats(samples: list[Sample]) -> bool:
    """Whether some sample shows operator_str being called (the formatting is the finding then)."""
    return any(formatting(s) is not None for sample in samples for s in sample)


def restart_needed(process: ProcessFacts, torch: TorchFacts | None) -> bool:
    changed = torch.changed if torch is not None else None
    return process.torch_replaced or (changed is not None and changed > process.started + START_RESOLUTION)


def _kind(eager: int, logging: int, torch: TorchFacts | None, restart: bool) -> FindingKind:
    code = torch.report.code if torch is not None else None
    if eager:
        return "eager-formatting"
    if code == ExitCode.EAGER:
        return "eager-torch"
    if logging:  # the process runs the lazy call: what it imported before a change is gone
        return "info-formatting"
    if restart and code == ExitCode.OK:
        return "stale-import"
    return "lazy" if code == ExitCode.OK else "unknown-torch"


def finding_of(
    process: ProcessFacts, samples: list[Sample], torch: TorchFacts | None, evidence: Evidence, rules: Catalog
) -> Finding:
    eager, eager_depth, eager_frames = _tally(samples, "eager")
    logging, logging_depth, logging_frames = _tally(samples, "logging")
    restart = restart_needed(process, torch)
    kind = _kind(eager, logging, torch, restart)
    declared = rules.by_kind(kind).code  # the table's; TORCH there: the loaded torch's own (verify's)
    code = declared if declared is not None else torch.report.code if torch else ExitCode.ENVIRONMENT
    if kind == "eager-formatting":
        count, depth, frames = eager, eager_depth, eager_frames
    elif kind == "info-formatting":
        count, depth, frames = logging, logging_depth, logging_frames
    else:
        count, depth, frames = 0, 0, _innermost(samples)
    found = Finding(kind, code, len(samples), count, depth, frames, restart, evidence=evidence)
    if kind not in ("eager-formatting", "info-formatting"):
        found = _stalled(found, samples, rules) or _moving(found, samples, rules) or found
    return found._replace(id=rules.by_kind(found.kind).id)


def _every(samples: list[Sample], rule: Declaration) -> bool:
    return bool(samples) and all(findings.sample_matches(s, rule) for s in samples)


def _stalled(found: Finding, samples: list[Sample], rules: Catalog) -> Finding | None:
    """The first finding of the table whose frames every sample shows and whose evidence says so."""
    lock = found.evidence.lock
    for rule in rules.findings:
        if _waits(samples, rule, found) and holds(rule, found._replace(peers=None)):
            code = rule.code if rule.code is not None else found.code
            at = lock.waiting if rule.waits_on_lock and lock else findings.waiting_frame(samples[-1], rule)
            return found._replace(kind=rule.kind, code=code, waiting=at)
    return None


def _waits(samples: list[Sample], rule: Declaration, found: Finding) -> bool:
    """A lock's findings hold for an idle process that waits on one, whoever's code waits (locks read
    it from what the code does); the others, when every sample shows their frames."""
    if rule.waits_on_lock:
        return found.evidence.lock is not None and not busy(found.evidence.cpu) and not formats(samples)
    return bool(rule.threads) and _every(samples, rule)


def holds(rule: Declaration, found: Finding) -> bool:
    """Whether what the finding read is what the rule's `when` asks for."""
    lock, workers, peers = found.evidence.lock, found.evidence.workers, found.peers
    said = {
        "found": lock is not None and lock.whole and lock.age is not None,
        "held": lock is not None and bool(lock.holders),
        "seen": lock is not None and lock.seen,
        "os": lock is not None and lock.protocol == "kernel",
        "soft": lock is not None and lock.protocol == "soft",
        "marker": lock is not None and lock.protocol == "marker",
        "strict": lock is not None and lock.protocol == "strict",
        "unknown": lock is not None and lock.protocol == "unknown",
        "sidecar": workers is not None and workers.sidecar is not None,
        "odd": peers is not None and bool(peers.odd),
        "odd_moving": peers is not None and bool(peers.odd) and all(r.kind in PROGRESS for r in peers.odd),
        "here": peers is not None and bool(peers.absent) and peers.here,
    }
    return all(said[name] == value for name, value in rule.when)


def busy(cpu: Cpu | None) -> bool:
    return cpu is not None and cpu.wall > 0 and cpu.seconds >= BUSY_SHARE * cpu.wall


def phase_of(samples: list[Sample], rules: Catalog) -> str | None:
    """What the busiest-looking thread compiles, from the innermost frame a phase of the data names;
    None when it compiles nothing (an import runs torch's modules, and compiles nothing)."""
    frames = _innermost(samples[-1:], depth=None)
    if any(p.matches(f) for f in frames for p in rules.importing):
        return None
    for frame in frames:
        for phase in rules.phases:
            if phase.frame.matches(frame):
                return phase.phase.format(function=frame.name.rsplit(".", 1)[-1])
    return None


def _moving(found: Finding, samples: list[Sample], rules: Catalog) -> Finding | None:
    """Busy and moving: CPU time rising between the looks (the process's, or its compile workers'
    and their compilers') while its stack is in a phase of a compile. A busy process elsewhere (an
    import, a model running) is judged by its torch, as before. Its code is what its torch alone
    gives (the table's TORCH): a compiling server reads the same whether a dump catches it busy or
    between two compiles."""
    phase = phase_of(samples, rules)
    if not busy(found.evidence.cpu) or phase is None:
        return None
    code = rules.by_kind("moving").code
    return found._replace(kind="moving", code=code if code is not None else found.code, phase=phase)


# A rank whose job waits for it, judged by its torch alone (not formatting, not moving, not stalled
# on something of its own): what blocks the job is this rank.
AWAITABLE: tuple[FindingKind, ...] = ("eager-torch", "stale-import", "lazy", "unknown-torch")


def with_peers(judged: list[tuple[ProcessFacts, Finding]], rules: Catalog) -> list[Finding]:
    """Ranks of one job (`ProcessFacts.same_job`: the launcher's variables) judged again against each
    other: a rank in a collective names the job's ranks not in one (and where they are) and the ranks
    of WORLD_SIZE no process read is; a rank the others wait for is told so, and is the job's stall
    when nothing of its own explains it."""
    collective = {r.kind for r in rules.matched() if r.evidence == "peers"}
    out = []
    for process, found in judged:
        mates = [(p, f) for p, f in judged if p.pid != process.pid and p.same_job(process)]
        waiting = [(p, f) for p, f in mates if f.kind in collective and f.waiting is not None]
        odd = tuple(
            Peer(p.pid, p.launch.rank, f.kind, _where(f)) for p, f in mates if f.kind not in collective
        )
        if found.kind in collective and found.waiting is not None:
            ranks = (process.pid, *(p.pid for p, _ in waiting))
            job = [process, *(p for p, _ in mates)]
            peers = Peers(_name(found.waiting), ranks, odd, _absent(job), _here(process))
            found = _rejudged(found._replace(peers=peers), rules)
        elif found.kind not in collective and waiting:
            awaited_in = next(_name(f.waiting) for _, f in waiting if f.waiting is not None)
            peers = Peers(awaited_in, tuple(p.pid for p, _ in waiting), (), (), _here(process))
            found = found._replace(awaited_by=peers.waiting, peers=peers)
            if found.kind in AWAITABLE:
                rule = rules.by_kind("rank-awaited")
                code = rule.code if rule.code is not None else found.code
                found = found._replace(kind=rule.kind, code=code, id=rule.id)
        out.append(found)
    return out


def _name(frame: Frame) -> str:
    return frame.name.rsplit(".", 1)[-1]


def _absent(job: list[ProcessFacts]) -> tuple[int, ...]:
    """The ranks of the job's WORLD_SIZE that no process read is (empty when no launcher said)."""
    sizes = {p.launch.world_size for p in job if p.launch.world_size is not None}
    if len(sizes) != 1 or any(p.launch.rank is None for p in job):
        return ()
    return tuple(sorted(set(range(sizes.pop())) - {p.launch.rank for p in job if p.launch.rank is not None}))


def _here(process: ProcessFacts) -> bool:
    """Whether the whole job runs on this machine: its rendezvous is a loopback address, or torchrun
    started every rank of WORLD_SIZE here (LOCAL_WORLD_SIZE)."""
    launch = process.launch
    address = (launch.master or launch.store or "").rsplit(":", 1)[0].strip("[]")
    loopback = address == "localhost" or address.startswith("127.") or address == "::1"
    return loopback or (launch.world_size is not None and launch.local_world_size == launch.world_size)


def _rejudged(found: Finding, rules: Catalog) -> Finding:
    rule = next(r for r in rules.matched() if r.evidence == "peers" and holds(r, found))
    code = rule.code if rule.code is not None else found.code
    return found._replace(kind=rule.kind, code=code, id=rule.id)


def _where(found: Finding) -> str:
    return found.frames[0].where() if found.frames else "no Python frames"


def severity(found: Finding, rules: Catalog) -> int:
    """Its place in the table's order of exit codes; the finding marked `first` before every one."""
    return -1 if rules.by_kind(found.kind).first else rules.severity.index(found.code)


def decide(found: list[Finding], problems: list[Unreadable], rules: Catalog) -> tuple[int | None, ExitCode]:
    """The finding that decides the run (the most severe, the first in PID order; None when none was
    read), and the run's exit code: its code, or an unread process's when that is more severe."""
    ranked = [(severity(f, rules), i) for i, f in enumerate(found)]
    first = min(ranked, default=None)
    codes = [rules.unread[u.why].code for u in problems] + ([found[first[1]].code] if first else [])
    code = min(codes, key=rules.severity.index, default=ExitCode.OK)
    if first is not None and first[0] < 0:
        code = found[first[1]].code
    return (first[1] if first else None), code
