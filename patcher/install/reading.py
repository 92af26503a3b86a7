"""verify, and what every command does first: lock, read a snapshot, name the state, and report it.

Nothing here writes (the lock is an flock on the torch directory): diagnose judges a running
server's torch through this module, as verify does. apply and revert (install.engine) build on it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from patcher.core import classify, facts, messages, state
from patcher.core.errors import Install, LazylogError
from patcher.core.exitcodes import ExitCode
from patcher.core.facts import Reading
from patcher.core.hashes import sha256
from patcher.core.installed import Snapshot, Target
from patcher.core.report import Report, State
from patcher.core.spec import PatchSpec
from patcher.install import lock, snapshot

if TYPE_CHECKING:
    from patcher.core.outcome import Rewritten


def install_of(target: Target) -> Install:
    """What the advice to reinstall this torch needs to know."""
    return Install(
        dist_version=target.dist_version,  # not version.py's label: an index's
        vendor=vendor(target),
        installer=snapshot.installer(target),
        owner=target.owner,
        managed=target.interpreter.externally_managed,
        pip=target.interpreter.has_pip,
    )


def read_install(target: Target, spec: PatchSpec) -> tuple[Snapshot, Reading, Rewritten | None]:
    """The snapshot, its one reading, and the rewrite apply would make."""
    snap = snapshot.take(target, spec)
    known, rewritten = classify.classify(snap.graph, snap.sha256, spec, target.torch_version, snap.undo)
    return snap, facts.reading_of(snap, spec, known, target.undo_row_path(), time.time_ns()), rewritten


def vendor(target: Target) -> bool:
    """A build no index has: its distribution's version is local (`+rocm...`) or not there at all."""
    version = target.dist_version
    return version is None or "+" in version


def refusal(command: str, target: Target, spec: PatchSpec, snap: Snapshot, reading: Reading) -> LazylogError:
    """The core's refusal of what was found (patcher.core.messages.refusal), with whether this torch
    is a vendor's build, which only its dist-info tells."""
    return messages.refusal(command, target, spec, snap, reading, vendor(target))


def located(command: str, target: Target, state: State, message: str) -> Report:
    """What every report about a located torch names: the torch and its files."""
    return Report(
        command=command,
        state=state,
        changed=False,
        message=message,
        torch_version=target.torch_version,
        torch_dir=str(target.torch_dir),
        torch_path_entry=target.torch_path_entry,
        graph_py=str(target.graph_py),
        undo_record=str(target.undo_path),
    )


def report(
    command: str,
    target: Target,
    snap: Snapshot,
    reading: Reading,
    message: str,
    graph: bytes | None = None,
) -> Report:
    """Every report after the read names the torch, its state and graph.py's hash after the run; a
    command adds its own fields with Report._replace, which mypy checks."""
    known = reading.known
    return located(command, target, reading.state, message)._replace(
        sha256=snap.sha256 if graph is None else sha256(graph),
        release=known.release.version if known.release else None,
        match=known.match,
        pycs=tuple(p.describe() for p in snap.pycs),
    )


@contextlib.contextmanager
def keeping(command: str, target: Target, snap: Snapshot, reading: Reading) -> Iterator[None]:
    """An error raised after the read keeps what was read: its report is this reading's, built as a
    success's is, with the error's sentence and code."""
    try:
        yield
    except LazylogError as exc:
        if exc.found is None:
            exc.found = report(command, target, snap, reading, exc.message)
        raise


def verify(target: Target, spec: PatchSpec) -> Report:
    with lock.locked(target.torch_dir, exclusive=False):
        return verify_unlocked(target, spec)


def verify_unlocked(target: Target, spec: PatchSpec) -> Report:
    """verify's reading without the torch directory's lock: for diagnose, which must never wait on an
    apply (it says instead when one held the lock while it read)."""
    snap, reading, _ = read_install(target, spec)
    with keeping("verify", target, snap, reading):
        return _verify_report(target, spec, snap, reading)


def _verify_report(target: Target, spec: PatchSpec, snap: Snapshot, reading: Reading) -> Report:
    rule, found = state.verify_rule(reading.state, reading.row_fit, reading.stale_unchecked)
    if rule.code == ExitCode.REFUSED:
        raise refusal("verify", target, spec, snap, reading)
    stale = [str(p.path) for p in reading.stale if p.mode == "unchecked-hash"]
    texts = [messages.DEFECT[p].format(pyc=", ".join(stale)) for p in found]
    message = messages.verify(reading, target, texts, rule.code == ExitCode.EAGER)
    shown = report("verify", target, snap, reading, message)
    return shown._replace(code=rule.code, next=rule.next, problems=tuple(texts))


def verify_snapshot(target: Target, spec: PatchSpec, snap: Snapshot) -> Report:
    """verify's decision on a snapshot read elsewhere (an image's layers, patcher.image): the same
    classification, reading, rule and report, without this machine's files or lock."""
    known, _ = classify.classify(snap.graph, snap.sha256, spec, target.torch_version, snap.undo)
    reading = facts.reading_of(snap, spec, known, target.undo_row_path(), time.time_ns())
    with keeping("verify", target, snap, reading):
        return _verify_report(target, spec, snap, reading)
