"""apply, verify and revert: lock, read a snapshot, name the state, look up the command's rule,
plan, check, then carry the plan out.

The state is decided once per command (patcher.facts, patcher.state); the rule is a row of that
command's table; the plan is pure (patcher.plan); fsio is the only module that writes, and nothing
is written, temp files of a killed run included, until every path the plan writes has been checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patcher import classify, facts, fsio, messages, pyc, snapshot, state
from patcher.edits import line_edit
from patcher.errors import ExitCode, LazylogError, refused
from patcher.facts import Reading
from patcher.hashes import sha256
from patcher.locate import Target
from patcher.report import Report
from patcher.snapshot import Snapshot
from patcher.spec import PatchSpec

if TYPE_CHECKING:
    from patcher.outcome import Rewritten
    from patcher.plan import Plan


def _under_lock(target: Target, exclusive: bool, work: Callable[[], Report]) -> Report:
    """Run one command under the torch directory's lock; errors learn which torch they are about."""
    try:
        with fsio.locked(target.torch_dir, exclusive):
            return work()
    except LazylogError as exc:
        if exc.next == "reinstall":
            version = snapshot.metadata_version(target)
            exc.details.setdefault("dist_version", version)
            exc.details.setdefault("vendor", "yes" if version is None or "+" in version else "no")
            exc.details.setdefault("installer", snapshot.installer(target))
            exc.details.setdefault("owner", target.owner)
            exc.details.setdefault("managed", "yes" if target.interpreter.externally_managed else "no")
            has_pip = target.interpreter.has_pip
            exc.details.setdefault("pip", None if has_pip is None else "yes" if has_pip else "no")
        exc.details.setdefault("torch_version", target.torch_version)
        exc.details.setdefault("torch_dir", str(target.torch_dir))
        exc.details.setdefault("graph_py", str(target.graph))
        exc.details.setdefault("undo_record", str(target.undo_path))
        raise


def _read(target: Target, spec: PatchSpec, apply: bool) -> tuple[Snapshot, Reading, Rewritten | None]:
    """The snapshot and its one reading; apply's libcst parse doubles as the classification."""
    snap = snapshot.read(target, spec)
    rewritten = None
    if apply:
        known, rewritten = classify.decide(snap.graph, spec, target.torch_version)
    else:
        known = classify.classify(snap.graph, spec, target.torch_version)
    return snap, facts.read(snap, spec, known, target.undo_row_path(), time.time_ns()), rewritten


def _refusal(target: Target, spec: PatchSpec, snap: Snapshot, reading: Reading) -> LazylogError:
    if reading.state == "edited" and snap.undo is not None:
        change = snap.undo.graph
        text = messages.edited(target.undo_path, snap.sha256, change.after.sha256, change.before.sha256)
        error = refused(text, next="reinstall")
    else:
        support = messages.supported(spec.releases.versions("eager"), spec.releases.versions("native"))
        known = reading.known
        error = refused(messages.unknown(target.torch_version, target.torch_dir, known.reason, support), None)
        error.diff = known.diff or None
    error.state = reading.state
    return error


def _carry_out(target: Target, snap: Snapshot, planned: Plan, command: str) -> None:
    """Check, compile the pycs, stage everything, then commit."""
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
    steps: list[fsio.Step] = [
        fsio.Write(
            s.pyc.path,
            compiled[s.pyc.path],
            s.pyc.mode_bits,
            s.pyc.uid,
            s.pyc.gid,
            label=f"pyc-{s.pyc.path.name}",
        )
        if isinstance(s, pyc.Rebuild)
        else s
        for s in planned.steps
    ]
    fsio.run(steps, command)


def _done(target: Target, snap: Snapshot, planned: Plan) -> messages.Done:
    steps = planned.steps
    writes = {
        s.pyc.path if isinstance(s, pyc.Rebuild) else s.path for s in steps if not isinstance(s, fsio.Remove)
    }
    removes = {s.path for s in steps if isinstance(s, fsio.Remove)}
    pycs = {p.path for p in snap.pycs}
    changed = planned.result is not None and target.graph in writes
    return messages.Done(
        graph=changed,
        line=line_edit(snap.graph, planned.result).line_number(snap.graph) if planned.result else None,
        undo_written=target.undo_path in writes,
        undo_removed=target.undo_path in removes,
        record=target.record_file in writes,
        pycs=len(writes & pycs),
        pycs_removed=len(removes & pycs),
        no_record=snap.record is None,
    )


def _report(
    command: str,
    target: Target,
    snap: Snapshot,
    reading: Reading,
    message: str,
    graph: bytes | None = None,
    **extra: Any,
) -> Report:
    """Every report names the torch, its state and graph.py's hash after the run."""
    known = reading.known
    return Report(
        command=command,
        state=reading.state,
        changed=False,
        message=message,
        torch_version=target.torch_version,
        torch_dir=str(target.torch_dir),
        torch_path_entry=target.torch_path_entry,
        graph_py=str(target.graph),
        sha256=sha256(snap.graph if graph is None else graph),
        release=known.release.version if known.release else None,
        match=known.match,
        undo_record=str(target.undo_path),
        pycs=tuple(p.describe() for p in snap.pycs),
    )._replace(**extra)


def _change(command: str, target: Target, spec: PatchSpec, dry_run: bool = False) -> Report:
    snap, reading, rewritten = _read(target, spec, apply=command == "apply")
    rule = state.TABLES[command][reading.state]
    if "refuse" in rule.does:
        raise _refusal(target, spec, snap, reading)
    planned = plan_for(target, spec, snap, reading, rule.does, rewritten)
    done = _done(target, snap, planned)
    message = messages.changed(command, reading.state, reading.known, target.torch_version, done, dry_run)
    diff = None
    if command == "apply" and planned.result is not None:
        from patcher.diff import unified

        diff = unified(snap.graph, planned.result, "torch/" + spec.file)
    if dry_run and planned.steps:  # what the real run would refuse, the dry run refuses too
        fsio.require_writable(planned.check, links=(target.torch_dir, target.graph.parent, target.graph))
    if dry_run or not planned.steps:
        return _report(command, target, snap, reading, message, diff=diff)
    reading = reading._replace(state=rule.leaves or reading.state)
    _carry_out(target, snap, planned, command)
    pycs = tuple(p.describe() for p in pyc.find(target.graph, target.interpreter.pycache_prefix))
    return _report(
        command, target, snap, reading, message, planned.result, diff=diff, changed=True, pycs=pycs
    )


def plan_for(
    target: Target,
    spec: PatchSpec,
    snap: Snapshot,
    reading: Reading,
    does: tuple[state.Action, ...],
    rewritten: Rewritten | None,
) -> Plan:
    from patcher import plan

    return plan.build(target, spec, snap, reading, does, time.time_ns(), rewritten)


def apply(target: Target, spec: PatchSpec, dry_run: bool = False) -> Report:
    return _under_lock(target, not dry_run, lambda: _change("apply", target, spec, dry_run))


def revert(target: Target, spec: PatchSpec) -> Report:
    return _under_lock(target, True, lambda: _change("revert", target, spec))


def verify(target: Target, spec: PatchSpec) -> Report:
    def work() -> Report:
        snap, reading, _ = _read(target, spec, apply=False)
        found = state.problems(reading.state, reading.facts)
        rule = state.verdict(reading.state, found)
        if "refuse" in rule.does:
            raise _refusal(target, spec, snap, reading)
        stale = [str(p.path) for p in snap.stale_pycs() if p.mode == "unchecked-hash"]
        texts = [messages.problem_text(p, ", ".join(stale)) for p in found]
        eager = rule.code == ExitCode.EAGER
        message = messages.verify(
            reading.state, reading.known, target.torch_version, target.torch_dir, texts, eager
        )
        return _report(
            "verify", target, snap, reading, message, code=rule.code, next=rule.next, problems=tuple(texts)
        )

    return _under_lock(target, False, work)
