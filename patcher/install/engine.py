"""apply and revert: what reading decides (lock, snapshot, state), then the command's rule, the plan,
the checks, and the plan carried out.

The state is decided once per command (patcher.core.facts, patcher.core.state); the rule is a row of that
command's table; the plan is pure (patcher.core.plan); fsio is the only module that writes, and nothing
is written, temp files of a killed run included, until every path the plan writes has been checked.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from patcher.core import messages, state
from patcher.core.installed import Snapshot, Target
from patcher.core.report import Report
from patcher.core.spec import PatchSpec
from patcher.core.steps import Rebuild, Step, Write
from patcher.install import fsio, lock, pyc
from patcher.install.reading import keeping, read_install, refusal, report

if TYPE_CHECKING:
    from patcher.core.facts import Reading
    from patcher.core.outcome import Rewritten
    from patcher.core.plan import Plan


def _carry_out(target: Target, snap: Snapshot, planned: Plan, command: str) -> None:
    """Compile the pycs, stage everything, then commit (every path written has been checked)."""
    rebuilds = [s for s in planned.steps if isinstance(s, Rebuild)]
    compiled: dict[Path, bytes] = {}
    if rebuilds:
        datas = pyc.compile_for(
            target.interpreter, [r.pyc for r in rebuilds], planned.source, target.graph_py, planned.mtime_ns
        )
        compiled = {r.pyc.path: data for r, data in zip(rebuilds, datas, strict=True)}
    fsio.discard(list(snap.leftovers))  # temp files of a killed run: only now that every check passed
    steps: list[Step] = [
        Write(
            s.pyc.path,
            compiled[s.pyc.path],
            s.pyc.mode_bits,
            s.pyc.uid,
            s.pyc.gid,
        )
        if isinstance(s, Rebuild)
        else s
        for s in planned.steps
    ]
    fsio.write_all(steps, command)


def _apply_or_revert(command: str, target: Target, spec: PatchSpec, dry_run: bool = False) -> Report:
    snap, reading, rewritten = read_install(target, spec)
    with keeping(command, target, snap, reading):
        return _decided(command, target, spec, snap, reading, rewritten, dry_run)


def _decided(
    command: str,
    target: Target,
    spec: PatchSpec,
    snap: Snapshot,
    reading: Reading,
    rewritten: Rewritten | None,
    dry_run: bool,
) -> Report:
    does = state.TABLES[command][reading.state]
    if "refuse" in does:
        raise refusal(command, target, spec, snap, reading)
    from patcher.core import plan

    planned = plan.build(target, spec, snap, reading, does, time.time_ns(), rewritten)
    message = messages.changed(
        command, reading.state, reading.known, target.torch_version, planned.done, dry_run
    )
    diff = None
    if command == "apply" and planned.result is not None:
        from patcher.core.diff import unified

        diff = unified(snap.graph, planned.result, "torch/" + spec.file)
    if planned.steps:  # what the real run would refuse, the dry run refuses too
        fsio.require_writable(
            planned.check, links=(target.torch_dir, target.graph_py.parent, target.graph_py)
        )
    if dry_run or not planned.steps:
        return report(command, target, snap, reading, message)._replace(diff=diff)
    _carry_out(target, snap, planned, command)
    pycs = tuple(p.describe() for p in pyc.find(target.graph_py, target.interpreter.pycache_prefix))
    result = report(command, target, snap, reading, message, planned.result)  # the state as read ...
    return result._replace(state=planned.leaves, diff=diff, changed=True, pycs=pycs)  # ... as left


def apply(target: Target, spec: PatchSpec, dry_run: bool = False) -> Report:
    with lock.locked(target.torch_dir, exclusive=not dry_run):
        return _apply_or_revert("apply", target, spec, dry_run)


def revert(target: Target, spec: PatchSpec) -> Report:
    with lock.locked(target.torch_dir, exclusive=True):
        return _apply_or_revert("revert", target, spec)
