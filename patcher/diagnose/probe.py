"""probe: one question for a startup or liveness probe, will this start end on its own?

Cheap where it can be: only the target and the processes below it are read (their CPU time twice,
an interval apart, from /proc/PID/stat; the children from /proc/PID/task/TID/children), and the torch
the target loaded, as verify reads it. Stacks are read only where they decide:
- busy, on a torch that formats eagerly: a dump of the target tells the eager formatting (stuck:
  the hang this tool fixes, which a restart repeats) from a compile (progress, with a warning);
- idle: diagnose's whole reading (locks and their holders, compile workers, ranks) names the wait.
Busy on a lazy torch is progress without a dump. Whether a finding ends on its own is the table's
`ends` (patches/diagnose_findings.json), never decided here. What could not be read (no py-spy, no
ptrace rights, a seccomp filter) is said, and the answer then comes from /proc alone: exit 0, since
nothing proves a state that does not end.

The read runs under a deadline it never exceeds (a thread joined with a timeout): past it, the
answer is what /proc said, said as such.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Mapping
from typing import Literal, NamedTuple

from patcher.core.errors import LazylogError
from patcher.core.exitcodes import ExitCode
from patcher.core.spec import PatchSpec
from patcher.diagnose import findings, judge, procs, stacks, torchstate
from patcher.diagnose.findings import Catalog
from patcher.diagnose.model import Cpu, ProcessFacts, Sample, TorchFacts, Unreadable

Status = Literal["ok", "warning", "stuck"]
INTERVAL = 0.25  # seconds between the two looks at the CPU time
DUMPS = 1  # stack dumps when they decide (each about 20 ms of py-spy CPU); every one must show the eager formatting
DUMP_GAP = 0.05
# Moving: CPU time of the tree rose by this many clock ticks (usually 10 ms each) between the looks.
# Lower than diagnose's busy share on purpose: on a node whose cores compiles share, a compiling
# server gets a small slice, and any rise is progress; a waiter on a lock, a future or a collective
# sleeps in the kernel and uses none. A busy process on an eager torch is still read for the formatting.
MOVING_TICKS = 2


class Answer(NamedTuple):
    """What a probe says: its status, the finding that decides it (ID and kind, '' when none was
    made), a short summary, the step, the exit code, and what could not be read."""

    status: Status
    pid: int
    id: str
    summary: str
    step: str
    code: ExitCode
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """The first line (what the kubelet keeps in the pod's event), then the notes."""
        head = f"{self.status}: PID {self.pid}: {self.id + ' ' if self.id else ''}{self.summary}"
        return [head + (f"; {self.step}" if self.step else ""), *self.notes]


def status_of(ends: bool, code: ExitCode, unread: bool) -> tuple[Status, ExitCode]:
    """A finding that does not end on its own is stuck, with its own exit code; one that ends is ok,
    or a warning when its code is not OK (an eager torch) or something could not be read."""
    if not ends:
        return "stuck", code if code != ExitCode.OK else ExitCode.STALLED
    return ("warning" if code != ExitCode.OK or unread else "ok"), ExitCode.OK


def decided(kind: str, code: ExitCode, catalog: Catalog) -> tuple[Status, ExitCode]:
    declared = catalog.by_kind(kind)
    return status_of(declared.ends, code, False)


# Reading, bounded: the target and the processes below it.


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(b")") + 2 :].decode().split()


def tree(pid: int) -> list[int]:
    """The process and every process below it, from the kernel's own list of each thread's
    children (no listing of /proc)."""
    found, frontier = [pid], [pid]
    while frontier:
        below = []
        for parent in frontier:
            try:
                tasks = os.listdir(f"/proc/{parent}/task")
            except OSError:
                continue
            for task in tasks:
                try:
                    with open(f"/proc/{parent}/task/{task}/children") as f:
                        below += [int(c) for c in f.read().split()]
                except OSError:
                    continue
        frontier = [p for p in dict.fromkeys(below) if p not in found]
        found += frontier
    return found


def cpu_ticks(pids: list[int]) -> int:
    """utime, stime and the reaped children's, summed over the processes still there."""
    return sum(sum(int(v) for v in fields[11:15]) for p in pids if (fields := _stat(p)) is not None)


class Busy(NamedTuple):
    cpu: Cpu
    processes: int  # the target and those below it, at the second look
    ticks: int = 0  # clock ticks of CPU time between the looks

    @property
    def moving(self) -> bool:
        return self.ticks >= MOVING_TICKS


def _torch_process(pids: list[int]) -> ProcessFacts | Unreadable | None:
    """The first process of the tree with torch loaded (the target, or the Python a shell or
    launcher started); else why the target could not be read."""
    first: ProcessFacts | Unreadable | None = None
    for index, pid in enumerate(pids):
        seen = procs.alone(pid)
        if seen is None:
            if index == 0:
                return Unreadable(pid, "missing", "")
            continue
        read = procs.read_process(seen)
        if isinstance(read, ProcessFacts):
            return read
        first = read if index == 0 else first
    return first


def _eager_in_every(samples: list[Sample]) -> tuple[bool, int]:
    """Whether every dump shows the eager formatting, and its deepest __str__ chain."""
    depths = []
    for sample in samples:
        found = [f for s in sample if (f := judge.formatting(s)) is not None and f[0] == "eager"]
        if not found:
            return False, 0
        depths.append(max(f[1] for f in found))
    return bool(samples), max(depths, default=0)


class Probe(NamedTuple):
    """What the probe read, for the pure decision."""

    pid: int
    process: ProcessFacts | Unreadable | None
    torch: TorchFacts | None
    busy: Busy
    samples: list[Sample] | None  # None: not taken
    unread: str  # why the stacks could not be read ('' when read or not needed)


def _dumps(pid: int) -> list[Sample] | str:
    try:
        spy = stacks.find()
    except stacks.Missing:
        return "no py-spy beside the tool nor on PATH"
    taken: list[Sample] = []
    for index in range(DUMPS):
        if index:
            time.sleep(DUMP_GAP)
        try:
            taken.append(stacks.dump(spy, pid))
        except stacks.Failed as failed:
            return failed.reason + (" (no ptrace rights over it)" if failed.denied else "")
    return taken


def read(pid: int, spec: PatchSpec) -> Probe:
    """Two looks at the CPU time of the tree, the loaded torch read between them; the dumps when
    the target is busy on an eager torch."""
    pids = tree(pid)
    start, before = time.monotonic(), cpu_ticks(pids)
    process = _torch_process(pids)
    if isinstance(process, Unreadable) and process.why == "missing":
        return Probe(pid, process, None, Busy(Cpu(0.0, 0.0), 0), None, "")
    torch = None
    if isinstance(process, ProcessFacts):
        torch = torchstate.read_torch(process, spec, set())
    time.sleep(max(0.0, INTERVAL - (time.monotonic() - start)))
    pids = [p for p in dict.fromkeys([*pids, *tree(pid)])]
    after, wall = cpu_ticks(pids), time.monotonic() - start
    ticks = max(0, after - before)
    busy = Busy(Cpu(ticks / os.sysconf("SC_CLK_TCK"), wall), len(pids), ticks)
    samples: list[Sample] | None = None
    unread = ""
    if isinstance(process, ProcessFacts) and busy.moving and _eager(torch):
        dumped = _dumps(process.pid)
        samples, unread = (dumped, "") if isinstance(dumped, list) else (None, dumped)
    return Probe(pid, process, torch, busy, samples, unread)


def _eager(torch: TorchFacts | None) -> bool:
    return torch is not None and torch.report.code == ExitCode.EAGER


def _cpu(busy: Busy) -> str:
    return f"{busy.cpu.seconds:.2f} s of CPU in {busy.cpu.wall:.2f} s over {busy.processes} process(es)"


def _apply(process: ProcessFacts, program: str) -> str:
    """apply for the process's own interpreter (diagnose's step), for the torch directory it loaded
    when that interpreter alone does not import it."""
    if not process.owns_torch and process.torch_dir is not None:
        return f"{program} apply --torch-dir {shlex.quote(process.torch_dir)}"
    return f"{program} apply --python {shlex.quote(process.interpreter)}"


def answer_of(probe: Probe, program: str, catalog: Catalog) -> Answer | None:
    """The answer from what was read, or None when only diagnose's whole reading can tell (idle)."""
    process, busy, pid = probe.process, probe.busy, probe.pid
    if isinstance(process, Unreadable) and process.why == "missing":
        return Answer("stuck", pid, "", "no such process", "", ExitCode.USAGE)
    notes = (
        (f"The stacks could not be read: {probe.unread}; answered from /proc alone.",) if probe.unread else ()
    )
    moving = busy.moving
    if not isinstance(process, ProcessFacts):
        why = "no process with torch loaded yet" if process is None else f"not read ({process.why})"
        state = "busy" if moving else "idle"
        return Answer("warning", pid, "", f"{state}, {why} ({_cpu(busy)})", "", ExitCode.OK, notes)
    if not moving:
        return None
    eager_now, depth = _eager_in_every(probe.samples or [])
    if eager_now:
        rule = catalog.by_kind("eager-formatting")
        status, code = status_of(rule.ends, ExitCode.EAGER, False)
        summary = (
            f"in the eager formatting of the implicit-fallback text ({depth} nested __str__ frames), the hang "
            "torch-lazylog fixes; it repeats on every start of this torch"
        )
        step = f"{_apply(process, program)}, then restart it"
        return Answer(status, pid, rule.id, summary, step, code, notes)
    rule = catalog.by_kind("moving")
    eager = _eager(probe.torch)
    code = ExitCode.EAGER if eager else ExitCode.OK
    status, exit_code = status_of(rule.ends, code, bool(notes))
    what = "busy and moving" + (", not in the eager formatting" if probe.samples is not None else "")
    summary = f"{what} ({_cpu(busy)})" + (": its torch formats the text eagerly" if eager else "")
    step = f"patch it before it starts again: {_apply(process, program)}" if eager else ""
    return Answer(status, pid, rule.id, summary, step, exit_code, notes)


def _short(entry: Mapping[str, object]) -> str:
    """The finding of diagnose's entry in a clause: its kind, and the lock it names."""
    evidence = entry.get("evidence")
    lock = evidence.get("lock") if isinstance(evidence, dict) else None
    path = lock.get("path") if isinstance(lock, dict) else None
    kind = str(entry.get("finding") or "")
    return kind.replace("-", " ") + (f": {path}" if path else "")


def whole(pid: int, spec: PatchSpec, program: str, busy: Busy, catalog: Catalog) -> Answer:
    """An idle target: diagnose's whole reading of it and the processes below it names the wait."""
    from patcher.diagnose import run  # only here: the rest of diagnose's reading

    options = run.Options((pid,), True, 2, 0.1, program)
    try:
        report, entries = run.diagnose(options, spec)
    except LazylogError as error:
        note = f"The stacks could not be read: {error.text()}; answered from /proc alone."
        return Answer("warning", pid, "", f"idle ({_cpu(busy)})", "", ExitCode.OK, (note,))
    entry = next((e for e in entries if e.get("id")), None)
    if entry is None:
        notes = (f"The stacks could not be read: {report.message}",)
        return Answer("warning", pid, "", f"idle ({_cpu(busy)})", "", ExitCode.OK, notes)
    kind = str(entry["finding"])
    status, code = decided(kind, ExitCode(int(str(entry["exit_code"]))), catalog)
    step = str(entry.get("next") or "") if status == "stuck" else ""
    return Answer(status, pid, str(entry["id"]), _short(entry), step, code)


def probe(pid: int, spec: PatchSpec, program: str, deadline: float) -> Answer:
    """The answer within `deadline` seconds: past it, what was read by then."""
    catalog = findings.load()
    result: list[Answer] = []
    partial: list[Busy] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            read_ = read(pid, spec)
            partial.append(read_.busy)
            answer = answer_of(read_, program, catalog)
            result.append(answer if answer is not None else whole(pid, spec, program, read_.busy, catalog))
        except BaseException as error:  # raised again in the caller's thread, caught at the edge
            errors.append(error)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(deadline)
    if errors:
        raise errors[0]
    if result:
        return result[0]
    said = f" ({_cpu(partial[0])})" if partial else ""
    note = f"No answer within the deadline of {deadline:g} s: the stacks were not read in time."
    return Answer("warning", pid, "", f"not judged in time{said}", "", ExitCode.OK, (note,))
