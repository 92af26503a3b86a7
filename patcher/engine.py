"""apply, verify and revert: lock, read a snapshot, decide, plan, check, then carry the plan out.

Each command is the same five steps; only the decision and the plan differ (patcher.classify and
patcher.plan, both pure). Nothing is written, temp files of a killed run included, until the plan
exists and every path it writes has been checked; fsio is the only module that writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from patcher import classify, fsio, plan, pyc, snapshot
from patcher.errors import LazylogError
from patcher.hashes import sha256
from patcher.locate import Target
from patcher.plan import Plan
from patcher.report import Report
from patcher.snapshot import Snapshot
from patcher.spec import PatchSpec


def _under_lock(target: Target, exclusive: bool, work: Callable[[], Report]) -> Report:
    """Run one command under the torch directory's lock; errors learn which torch they are about."""
    try:
        with fsio.locked(target.torch_dir, exclusive):
            return work()
    except LazylogError as exc:
        exc.details.setdefault("torch_version", target.torch_version)
        exc.details.setdefault("torch_dir", str(target.torch_dir))
        exc.details.setdefault("graph_py", str(target.graph))
        exc.details.setdefault("undo_record", str(target.undo_path))
        raise


def _carry_out(target: Target, snap: Snapshot, planned: Plan, command: str) -> bool:
    """Check, compile the pycs, stage everything, then commit; False when there is nothing to write."""
    if not planned.steps:
        return False
    fsio.require_writable(planned.check, links=(target.torch_dir, target.graph.parent, target.graph))
    rebuilds = [s for s in planned.steps if isinstance(s, pyc.Rebuild)]
    compiled: dict[Path, bytes] = {}
    if rebuilds:
        first = rebuilds[0]
        datas, _ = pyc.compile_for(
            target.interpreter, [r.pyc for r in rebuilds], first.source, target.graph, first.mtime_ns
        )
        compiled = {r.pyc.path: data for r, data in zip(rebuilds, datas, strict=True)}
    fsio.discard(list(snap.leftovers))  # temp files of a killed run: only now that every check passed
    steps: list[fsio.Step] = []
    for step in planned.steps:
        if isinstance(step, pyc.Rebuild):
            item = step.pyc
            step = fsio.Write(
                item.path,
                compiled[item.path],
                item.mode_bits,
                item.uid,
                item.gid,
                label=f"pyc-{item.path.name}",
            )
        steps.append(step)
    fsio.run(steps, command)
    return True


def _report(command: str, target: Target, snap: Snapshot, planned: Plan, changed: bool) -> Report:
    graph = planned.result if changed and planned.result is not None else snap.graph
    pycs = pyc.find(target.graph, target.interpreter.pycache_prefix) if changed else list(snap.pycs)
    return Report(
        command=command,
        state=planned.state,
        changed=changed,
        message=planned.message,
        code=planned.code,
        next=planned.next,
        torch_version=target.torch_version,
        torch_dir=str(target.torch_dir),
        graph_py=str(target.graph),
        sha256=sha256(graph),
        release=planned.release,
        match=planned.match,
        undo_record=str(target.undo_path),
        diff=planned.diff,
        problems=planned.problems,
        pycs=tuple(p.describe() for p in pycs),
    )


def apply(target: Target, spec: PatchSpec, dry_run: bool = False) -> Report:
    def work() -> Report:
        snap = snapshot.read(target, spec)
        decision = None if snap.recorded_patched else classify.decide(snap.graph, spec, target.torch_version)
        planned = plan.apply(target, spec, snap, decision, now_ns=time.time_ns(), dry_run=dry_run)
        if dry_run:
            return _report("apply", target, snap, planned, False)
        return _report("apply", target, snap, planned, _carry_out(target, snap, planned, "apply"))

    return _under_lock(target, not dry_run, work)


def revert(target: Target, spec: PatchSpec) -> Report:
    def work() -> Report:
        snap = snapshot.read(target, spec)
        undo = snap.undo
        recorded = undo is not None and snap.sha256 in (undo.graph.after.sha256, undo.graph.before.sha256)
        known = None if recorded else classify.classify(snap.graph, spec, target.torch_version)
        planned = plan.revert(target, spec, snap, known)
        return _report("revert", target, snap, planned, _carry_out(target, snap, planned, "revert"))

    return _under_lock(target, True, work)


def verify(target: Target, spec: PatchSpec) -> Report:
    def work() -> Report:
        snap = snapshot.read(target, spec)
        known = None if snap.recorded_patched else classify.classify(snap.graph, spec, target.torch_version)
        if known is not None and known.state == "unknown":
            raise plan.unknown(target, spec, known)
        return _report("verify", target, snap, plan.verify(target, spec, snap, known), False)

    return _under_lock(target, False, work)
