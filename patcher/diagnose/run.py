"""diagnose as a plain function of typed values: which processes, read them, sample them, judge."""

from __future__ import annotations

from typing import NamedTuple

from patcher.core.errors import ExitCode, LazylogError, environment
from patcher.core.report import JsonValue, Report
from patcher.core.spec import PatchSpec
from patcher.diagnose import procs, render, stacks, torchstate, verdict
from patcher.diagnose.model import ProcessFacts, Sample, TorchFacts
from patcher.diagnose.procs import Unreadable


class Options(NamedTuple):
    pids: tuple[int, ...]
    children: bool = True
    samples: int = 3
    interval: float = 0.1


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
    """The process and its descendants that have torch loaded; what of them could not be read."""
    first = procs.read(pid)
    if not procs.exists(pid) and isinstance(first, Unreadable):
        return [], [first]
    found, problems = [], []
    for read in [first, *map(procs.read, procs.descendants(pid, tree))]:
        found += [read] if isinstance(read, ProcessFacts) else []
        problems += [read] if isinstance(read, Unreadable) and read.code == ExitCode.ENVIRONMENT else []
    if not found and not problems:  # a shell or a Python without torch, and nothing below it
        problems = [first if isinstance(first, Unreadable) else _no_torch(pid)]
    return found, problems


def _everyone() -> tuple[list[ProcessFacts], list[Unreadable]]:
    pids, unreadable = procs.with_torch()
    found = [r for r in map(procs.read, pids) if isinstance(r, ProcessFacts)]
    if found:
        return found, []
    rights = f"; {unreadable} processes could not be read: run diagnose as root" if unreadable else ""
    raise environment(f"Expected a running process with torch loaded, found none this user may read{rights}")


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


def _sampled(pid: int, taken: list[Sample] | stacks.Failed) -> list[Sample] | Unreadable:
    if not isinstance(taken, stacks.Failed):
        return taken
    if taken.denied:
        return procs.no_rights(pid, "stacks")
    return Unreadable(
        pid, ExitCode.ENVIRONMENT, f"Expected py-spy to read process {pid}'s stacks, but: {taken.reason}"
    )


def diagnose(options: Options, spec: PatchSpec) -> tuple[Report, list[dict[str, JsonValue]]]:
    found, problems = _processes(options)
    if not found:
        if len(problems) == 1:
            raise LazylogError(problems[0].code, problems[0].message)
        return render.report([], problems), [render.unreadable_entry(u) for u in problems]
    spy = stacks.find()
    taken = stacks.sample_all(spy, [p.pid for p in found], options.samples, options.interval)
    torches: dict[str | None, TorchFacts] = {}
    diagnosed = []
    for process in found:
        samples = _sampled(process.pid, taken[process.pid])
        if isinstance(samples, Unreadable):
            problems.append(samples)
            continue
        if process.torch_seen_at not in torches:
            torches[process.torch_seen_at] = torchstate.read(process, spec)
        torch = torches[process.torch_seen_at]
        diagnosed.append(render.Diagnosed(process, torch, verdict.decide(process, samples, torch)))
    if not diagnosed and len(problems) == 1:
        raise LazylogError(problems[0].code, problems[0].message)
    entries = [render.entry(d) for d in diagnosed] + [render.unreadable_entry(u) for u in problems]
    return render.report(diagnosed, problems), entries
