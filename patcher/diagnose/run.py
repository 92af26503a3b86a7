"""diagnose in three steps: read (one listing of /proc, /proc/locks, the dumps, the torch each process
loaded, what each finding may ask for), judge (patcher/diagnose/judge.py, pure), say (render)."""

from __future__ import annotations

import os
from typing import NamedTuple

from patcher.core.errors import LazylogError
from patcher.core.exitcodes import ExitCode
from patcher.core.report import JsonValue, Report
from patcher.core.spec import PatchSpec
from patcher.diagnose import (
    claims,
    findings,
    judge,
    locks,
    procs,
    render,
    rendezvous,
    stacks,
    torchstate,
    tracing,
)
from patcher.diagnose.findings import Catalog
from patcher.diagnose.model import Cpu, Evidence, ProcessFacts, Sample, TorchFacts, Unreadable
from patcher.diagnose.procs import ProcTable


class Options(NamedTuple):
    pids: tuple[int, ...]
    children: bool
    samples: int
    interval: float
    program: str  # how the user runs the tool, for the apply its advice names


class Read(NamedTuple):
    """One process as read: its facts, samples, torch and evidence; whether it ended while sampled."""

    process: ProcessFacts
    samples: list[Sample]
    torch: TorchFacts
    evidence: Evidence
    exited: bool


def judged_ones(facts: dict[int, ProcessFacts], table: ProcTable) -> list[ProcessFacts]:
    """The processes judged on their own: those with no process with torch loaded above them, and
    ranks (launcher's variables) whose nearest such process is not the same rank. Everything else
    with torch (Inductor's compile workers, check_build, a rank's own children) is read as part of
    the process above it."""

    def above(pid: int) -> ProcessFacts | None:
        parent = table.processes[pid].parent if pid in table.processes else 0
        while parent > 1 and parent in table.processes:
            if parent in facts:
                return facts[parent]
            parent = table.processes[parent].parent
        return None

    kept = []
    for process in facts.values():
        over, launch = above(process.pid), process.launch
        ranked = launch.rank is not None or launch.store is not None
        rank = ranked and (over is None or (over.launch.job, over.launch.rank) != (launch.job, launch.rank))
        if over is None or rank:
            kept.append(process)
    return kept


def _given(pid: int, table: ProcTable, children: bool) -> tuple[dict[int, ProcessFacts], list[Unreadable]]:
    """The process and (with children) every process below it with torch loaded; what could not be
    read, when nothing was (a process below one read that this user may not read is part of it, not
    a problem of its own). The process itself is judged only when it has torch loaded or nothing
    below it is: a launcher this user may not read is passed over as one without torch is."""
    seen = table.processes.get(pid)
    if seen is None:
        return {}, [Unreadable(pid, "missing", "")]
    first = procs.read_process(seen)
    below = [procs.read_process(table.processes[p]) for p in (table.below(pid) if children else [])]
    found = {r.pid: r for r in [first, *below] if isinstance(r, ProcessFacts)}
    if found:  # what below it could not be read is read as part of it (its CPU time), not judged
        return found, []
    problems = [r for r in below if isinstance(r, Unreadable) and r.why == "rights"]
    if not problems:  # a shell or a Python without torch, and nothing below it
        problems = [first if isinstance(first, Unreadable) else Unreadable(pid, "no-torch", seen.command)]
    return found, problems


def _processes(
    options: Options, table: ProcTable, rights: str, catalog: Catalog
) -> tuple[list[ProcessFacts], list[Unreadable]]:
    if not options.pids:
        pids, unread = procs.with_torch(table)
        everyone = [procs.read_process(table.processes[p]) for p in pids]
        joined, _ = rendezvous.joined([r for r in everyone if isinstance(r, ProcessFacts)], table)
        found = {r.pid: r for r in joined}
        if not found:
            nobody = Unreadable(0, "none", "", str(unread) if unread else "")
            raise LazylogError(ExitCode.ENVIRONMENT, render.unread(nobody, catalog, rights))
        return judged_ones(found, table), []
    facts: dict[int, ProcessFacts] = {}
    problems: dict[int, Unreadable] = {}
    for pid in options.pids:
        found, unreadable = _given(pid, table, options.children)
        facts |= found
        problems |= {u.pid: u for u in unreadable}
    facts = {p.pid: p for p in rendezvous.joined(list(facts.values()), table)[0]}
    kept = {p.pid: p for p in judged_ones(facts, table)} | {p: facts[p] for p in options.pids if p in facts}
    return sorted(kept.values()), sorted(problems.values())


def _sampled(
    process: ProcessFacts, taken: list[Sample] | stacks.Failed, exited: bool
) -> list[Sample] | Unreadable:
    if not isinstance(taken, stacks.Failed):
        return taken
    if exited:
        return Unreadable(process.pid, "exited", process.command)
    if taken.denied:
        return Unreadable(process.pid, "rights", process.command, "stacks")
    return Unreadable(process.pid, "py-spy", process.command, taken.reason)


def _read(
    options: Options, spec: PatchSpec, table: ProcTable, found: list[ProcessFacts], catalog: Catalog, spy: str
) -> tuple[list[Read], list[Unreadable]]:
    """Every process found read whole, and the ranks of its job on this machine that were not named
    (read and judged too, and only named in its paragraph): the only dumps and the only reading of
    /proc/locks a run makes, and the CPU time of each tree twice (before and after the dumps)."""
    stored = rendezvous.joined(found, table)[1] if any(p.launch.store for p in found) else []
    everyone = sorted([*found, *procs.job_of(found, table), *stored])
    judged = {p.pid for p in everyone}
    trees = {p.pid: [q for q in table.below(p.pid) if q not in judged] for p in everyone}
    held = {p.pid: u for p in everyone if (u := tracing.held(p, table)) is not None}  # py-spy fails on them
    taken = stacks.sample_all(
        spy, [p.pid for p in everyone if p.pid not in held], options.samples, options.interval
    )
    after = procs.again(table, [q for p in everyone for q in [p.pid, *trees[p.pid]]])
    os_locks = locks.os_locks()
    locked = {(os.makedev(*r.device), r.inode) for r in os_locks if not r.blocked and not r.shared}
    torches: dict[str | None, TorchFacts] = {}
    read, problems = [], []
    for process in everyone:
        if process.pid in held:
            problems += [held[process.pid]] if process in found else []
            continue
        exited = procs.gone(process.pid)
        samples = _sampled(process, taken[process.pid], exited)
        if isinstance(samples, Unreadable):
            problems += [samples] if process in found else []
            continue
        if process.torch_seen_at not in torches:
            torches[process.torch_seen_at] = torchstate.read_torch(process, spec, locked)
        wall = after.read_at - table.read_at
        cpu = Cpu(max(0.0, after.cpu_seconds(process.pid) - table.cpu_seconds(process.pid)), wall)
        lock = claims.waited(process, samples, table) or locks.waited(process, samples, table, os_locks)
        evidence = Evidence(
            lock,
            procs.workers_of(process, table, catalog.helpers),
            cpu,
            locks.restart_of(process, table),
            tuple(trees[process.pid]),
            locks.reach_of(process, table) if lock is not None else None,
        )
        read.append(Read(process, samples, torches[process.torch_seen_at], evidence, exited))
    return read, problems


def diagnose(options: Options, spec: PatchSpec) -> tuple[Report, list[dict[str, JsonValue]]]:
    catalog, rights, table = findings.load(), procs.rights(), procs.read()
    found, problems = _processes(options, table, rights, catalog)
    if not found and len(problems) == 1 and catalog.unread[problems[0].why].code != ExitCode.OK:
        raise LazylogError(catalog.unread[problems[0].why].code, render.unread(problems[0], catalog, rights))
    try:
        spy = stacks.find() if found else "py-spy"
    except stacks.Missing as missing:
        raise LazylogError(ExitCode.ENVIRONMENT, render.no_py_spy(missing.python, missing.install)) from None
    words = render.Words(catalog, options.program, spy, rights)
    read, unread = _read(options, spec, table, found, catalog, words.spy) if found else ([], [])
    problems += unread
    said = [judge.finding_of(r.process, r.samples, r.torch, r.evidence, catalog) for r in read]
    said = judge.with_peers([(r.process, f) for r, f in zip(read, said, strict=True)], catalog)
    diagnosed = [
        render.Diagnosed(r.process, r.torch, f, r.exited)
        for r, f in zip(read, said, strict=True)
        if r.process in found
    ]
    notes = [u for u in problems if catalog.unread[u.why].code == ExitCode.OK]
    if not diagnosed and len(problems) == 1 and not notes:
        raise LazylogError(catalog.unread[problems[0].why].code, render.unread(problems[0], catalog, rights))
    first, code = judge.decide([d.finding for d in diagnosed], problems, catalog)
    entries = [render.entry(d, words) for d in diagnosed] + [
        render.unreadable_entry(u, words) for u in problems
    ]
    return render.report(diagnosed, first, code, problems, words), entries


def pid_of(word: str) -> int:
    """A process ID as given on the command line: a whole number from 1 on, else a usage error."""
    if word.isascii() and word.isdigit() and int(word) >= 1:
        return int(word)
    raise LazylogError(
        ExitCode.USAGE,
        f"Expected a process ID (a whole number from 1 on), found {render.shown([repr(word)])}: pass the "
        "server's PID",
    )
