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
from patcher.core.report import Advice, Next, Report
from patcher.core.spec import PatchSpec
from patcher.core.undo import newer
from patcher.install import locate, lock, snapshot

if TYPE_CHECKING:
    from patcher.core.outcome import Rewritten


def install_of(target: Target) -> Install:
    """What the advice to reinstall this torch needs to know."""
    return Install(
        dist_version=locate.dist_version(target.dist_info),  # not version.py's label: an index's
        vendor=vendor(target),
        installer=snapshot.installer(target),
        owner=target.owner,
        managed=target.interpreter.externally_managed,
        pip=target.interpreter.has_pip,
    )


def read_install(target: Target, spec: PatchSpec) -> tuple[Snapshot, Reading, Rewritten | None]:
    """The snapshot, its one reading, and the rewrite apply would make."""
    snap = snapshot.take(target, spec)
    known, rewritten = classify.classify(snap.graph, spec, target.torch_version, snap.undo)
    return snap, facts.reading_of(snap, spec, known, target.undo_row_path(), time.time_ns()), rewritten


def vendor(target: Target) -> bool:
    """A build no index has: its distribution's version is local (`+rocm...`) or not there at all."""
    version = locate.dist_version(target.dist_info)
    return version is None or "+" in version


def refusal(target: Target, spec: PatchSpec, snap: Snapshot, reading: Reading) -> LazylogError:
    """The one refusal for what was found: a file changed since apply; a release series the fix
    cannot reach (upgrade torch); a release's graph.py changed (reinstall it); a build this tool
    does not know (fingerprint it)."""
    if reading.state == "edited" and snap.undo is not None:
        change = snap.undo.graph
        text = messages.edited(target.undo_path, snap.sha256, change.after.sha256, change.before.sha256)
        return LazylogError(ExitCode.REFUSED, text, reading.state, "reinstall")
    known, where = reading.known, (target.torch_version, target.torch_dir)
    refused = messages.refused_release(*where) if known.cause == "import" else None
    support = messages.support(spec)
    next: Next
    if refused is not None:
        message, next = refused, Advice(messages.upgrade(support))
    elif vendor(target):
        message, next = messages.unknown(*where, known.reason), Advice(messages.FINGERPRINT)
    else:
        message, next = messages.changed_site(*where, known.reason), "reinstall"
    return LazylogError(
        ExitCode.REFUSED,
        message,
        reading.state,
        next,
        nearest_diff=known.nearest_diff or None,
        support=support,
    )


def newer_version(snap: Snapshot) -> int | None:
    """The version of an undo record that a newer torch-lazylog wrote and this one cannot read."""
    return newer(snap.undo_raw) if snap.undo is None and snap.undo_raw is not None else None


def located(command: str, target: Target, state: str, message: str) -> Report:
    """What every report about a located torch names: the torch and its files."""
    return Report(
        command=command,
        state=state,
        changed=False,
        message=message,
        torch_version=target.torch_version,
        torch_dir=str(target.torch_dir),
        torch_path_entry=target.torch_path_entry,
        graph_py=str(target.graph),
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
        sha256=sha256(snap.graph if graph is None else graph),
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
        return _verdict(target, spec, snap, reading)


def _verdict(target: Target, spec: PatchSpec, snap: Snapshot, reading: Reading) -> Report:
    rule, found = state.verdict(reading.state, reading.row, reading.stale_unchecked)
    if rule.code == ExitCode.REFUSED:
        raise refusal(target, spec, snap, reading)
    stale = [str(p.path) for p in snap.stale_pycs() if p.mode == "unchecked-hash"]
    texts = [messages.PROBLEM[p].format(pyc=", ".join(stale)) for p in found]
    eager = rule.code == ExitCode.EAGER
    version = newer_version(snap)
    said = None
    if version is not None:  # judged by graph.py alone; apply and revert would refuse
        said = messages.newer_record(reading.state, reading.known, target.undo_path, version)
        rule = rule._replace(next=None)
    message = messages.verify(
        reading.state, reading.known, target.torch_version, target.torch_dir, texts, eager, said
    )
    shown = report("verify", target, snap, reading, message)
    return shown._replace(code=rule.code, next=rule.next, problems=tuple(texts))
