"""diagnose as a plain function of typed values: which processes, read them, sample them, judge."""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from patcher.core.errors import LazylogError, environment
from patcher.core.exitcodes import ExitCode
from patcher.core.report import JsonValue, Report
from patcher.core.spec import PatchSpec
from patcher.diagnose import findings, locks, procs, render, stacks, torchstate, verdict
from patcher.diagnose.findings import Rules
from patcher.diagnose.model import Cpu, Evidence, ProcessFacts, Sample, TorchFacts
from patcher.diagnose.procs import Unreadable


class Options(NamedTuple):
    pids: tuple[int, ...]
    children: bool
    samples: int
    interval: float
    program: str  # how the user runs the tool, for the apply its advice names


def _no_torch(pid: int) -> Unreadable:
    line = procs.shown(procs.command_line(pid)[:3])
    return Unreadable(
        pid,
        ExitCode.ENVIRONMENT,
        f"Expected torch loaded in process {pid} ({line}) or one it started, found a Python that has "
        "not imported torch (no torch/_C*.so in its memory map): pass the PID of the server, or "
        "diagnose again once it has imported torch",
    )


def _tree(pid: int, tree: dict[int, int]) -> tuple[list[ProcessFacts], list[Unreadable]]:
    """The process and its descendants that have torch loaded; what of them could not be read.

    The process itself is judged only when it has torch loaded or nothing below it is named: a
    launcher this user may not read is passed over as one without torch is (as root), whoever runs
    diagnose."""
    first = procs.read_process(pid)
    if not procs.exists(pid) and isinstance(first, Unreadable):
        return [], [first]
    below = list(map(procs.read_process, procs.descendants(pid, tree)))
    found = [r for r in [first, *below] if isinstance(r, ProcessFacts)]
    problems = [r for r in below if isinstance(r, Unreadable) and r.code == ExitCode.ENVIRONMENT]
    if not found and not problems:  # a shell or a Python without torch, and nothing below it
        problems = [first if isinstance(first, Unreadable) else _no_torch(pid)]
    return found, problems


def _everyone() -> tuple[list[ProcessFacts], list[Unreadable]]:
    pids, unreadable = procs.with_torch()
    found = [r for r in map(procs.read_process, pids) if isinstance(r, ProcessFacts)]
    if found:
        return found, []
    rights = f"; {unreadable} processes could not be read: {_unread_advice()}" if unreadable else ""
    raise environment(f"Expected a running process with torch loaded, found none this user may read{rights}")


def _unread_advice() -> str:
    if procs.may_trace_as_root():
        return (
            "the kernel refuses them even to root with CAP_SYS_PTRACE (a user or PID namespace above "
            "this one, or a security module such as Yama or an LSM): diagnose from the host"
        )
    if os.geteuid() == 0:
        return (
            "this root runs without CAP_SYS_PTRACE: add it (`--cap-add SYS_PTRACE`) or diagnose from the host"
        )
    return "run diagnose as root"


def _processes(options: Options) -> tuple[list[ProcessFacts], list[Unreadable]]:
    if not options.pids:
        return _everyone()
    tree = procs.parents() if options.children else {}
    found: dict[int, ProcessFacts] = {}
    problems: dict[int, Unreadable] = {}
    for pid in options.pids:
        facts, unreadable = _tree(pid, tree)
        found |= {f.pid: f for f in facts}
        problems |= {u.pid: u for u in unreadable}
    return sorted(found.values()), sorted(problems.values())


def _sampled(pid: int, taken: list[Sample] | stacks.Failed, exited: bool) -> list[Sample] | Unreadable:
    if not isinstance(taken, stacks.Failed):
        return taken
    if exited:
        return Unreadable(
            pid,
            ExitCode.USAGE,
            f"Expected process {pid} to keep running while it was sampled, but it exited before "
            "py-spy read its stacks",
        )
    if taken.denied:
        return procs.no_rights(pid, "stacks")
    return Unreadable(
        pid, ExitCode.ENVIRONMENT, f"Expected py-spy to read process {pid}'s stacks, but: {taken.reason}"
    )


def _evidence(spy: str, process: ProcessFacts, samples: list[Sample], rules: Rules, cpu: Cpu) -> Evidence:
    """What the findings matched by its frames ask for (the compile workers); for an idle process
    that none matches, the lock it waits on, if any (patcher/diagnose/locks.py), and how it was
    started; and the CPU time of its tree."""
    asked = verdict.wanted(samples, rules)
    lock = workers = start = reach = None
    if not asked and not verdict.busy(cpu) and not verdict.formats(samples):
        lock = locks.waited(spy, process, samples)
        start = locks.start_of(process) if lock is not None else None
        reach = locks.reach_of(process) if lock is not None else None
    if "workers" in asked:
        workers = procs.workers_of(process, rules)
    return Evidence(lock, workers, cpu, start, reach)


def _cpu(found: list[ProcessFacts]) -> dict[int, float]:
    tree = procs.parents()
    return {p.pid: procs.cpu_seconds(p.pid, tree) for p in found}


def _judged(
    options: Options, spec: PatchSpec, found: list[ProcessFacts], words: render.Words
) -> tuple[list[render.Diagnosed], list[Unreadable]]:
    """Every process found judged, each rank against its job: the ranks of its job on this machine
    that were not named are read, sampled and judged too, and only named in its paragraph."""
    rules, spy = words.rules, words.spy
    job = procs.job_of(found, procs.parents())
    everyone = sorted([*found, *job])
    before, start = _cpu(everyone), time.monotonic()
    taken = stacks.sample_all(spy, [p.pid for p in everyone], options.samples, options.interval)
    after, wall = _cpu(everyone), time.monotonic() - start
    torches: dict[str | None, TorchFacts] = {}
    diagnosed, problems = [], []
    for process in everyone:
        exited = procs.gone(process.pid)
        samples = _sampled(process.pid, taken[process.pid], exited)
        if isinstance(samples, Unreadable):
            problems += [samples] if process in found else []
            continue
        if process.torch_seen_at not in torches:
            torches[process.torch_seen_at] = torchstate.read_torch(process, spec)
        torch = torches[process.torch_seen_at]
        cpu = Cpu(max(0.0, after.get(process.pid, 0.0) - before[process.pid]), wall)
        read = _evidence(spy, process, samples, rules, cpu)
        finding = verdict.finding_of(process, samples, torch, read, rules)
        diagnosed.append(render.Diagnosed(process, torch, finding, exited))
    judged = verdict.with_peers([(d.process, d.finding) for d in diagnosed], rules)
    rejudged = [d._replace(finding=f) for d, f in zip(diagnosed, judged, strict=True)]
    return [d for d in rejudged if d.process in found], problems


def _helpers_left_out(found: list[ProcessFacts], given: tuple[int, ...], rules: Rules) -> list[ProcessFacts]:
    """Inductor's compile workers are read as part of their parent (its CPU time, its finding), not
    on their own, unless named."""
    kept = [p for p in found if p.pid in given or not any(h in p.command for h in rules.helpers)]
    return kept or found


def diagnose(options: Options, spec: PatchSpec) -> tuple[Report, list[dict[str, JsonValue]]]:
    found, problems = _processes(options)
    if not found:
        if len(problems) == 1:
            raise LazylogError(problems[0].code, problems[0].message)
        return _unread(problems)
    words = render.Words(findings.load(), options.program, stacks.find())
    diagnosed, unread = _judged(options, spec, _helpers_left_out(found, options.pids, words.rules), words)
    problems += unread
    if not diagnosed and len(problems) == 1:
        raise LazylogError(problems[0].code, problems[0].message)
    entries = [render.entry(d, words) for d in diagnosed]
    entries += [render.unreadable_entry(u) for u in problems]
    return render.report(diagnosed, problems, words), entries


def _unread(problems: list[Unreadable]) -> tuple[Report, list[dict[str, JsonValue]]]:
    return render.report_unread(problems), [render.unreadable_entry(u) for u in problems]


def pid_of(word: str) -> int:
    """A process ID as given on the command line: a whole number from 1 on, else a usage error."""
    if word.isascii() and word.isdigit() and int(word) >= 1:
        return int(word)
    raise LazylogError(
        ExitCode.USAGE,
        f"Expected a process ID (a whole number from 1 on), found {procs.shown([repr(word)])}: pass the "
        "server's PID",
    )
