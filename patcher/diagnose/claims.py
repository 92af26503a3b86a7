"""Lock waits named by their frames alone, before any loop is read for what it does: filelock's
StrictSoftFileLock, whose holders are the PIDs its claims record (LOCK.filelock/claims/), and a wait
in a lock's acquire loop of a class no row of patches/diagnose_knowledge.json knows (a lock of
unknown protocol: never a process at rest).

A strict claim is never broken by age, only by its owner or force_break(): a claim whose PID no live
process on its host is stays, and the wait never ends on its own. Read only: the claims' records
(a few hundred bytes each), /proc as procs read it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from patcher.diagnose import knowledge, locks, procs, waits
from patcher.diagnose.model import Frame, Holder, Lock, ProcessFacts, Sample, Stack
from patcher.diagnose.procs import ProcTable

RECORD = 4096  # a claim's record is about 120 bytes: what is read of one, at most
CLAIMS = 64  # claim files read, at most


def waited(process: ProcessFacts, samples: list[Sample], seen: ProcTable) -> Lock | None:
    """The strict or unknown lock a thread waits on in every sample, or None."""
    for stack in samples[-1] if samples else ():
        found = _wait_of(stack)  # the last sample: the one dumped with the locals that name the class
        if found is None or not all(_stays(sample, stack.thread, found[1]) for sample in samples):
            continue
        protocol, frame = found
        path = next(_paths(frame), None)
        lock = _strict(process, path, frame, seen) if protocol == "strict" else None
        return lock or _unread(
            process, path, frame
        )  # a strict lock whose path no local names: its claims unread
    return None


def _wait_of(stack: Stack) -> tuple[str, Frame] | None:
    """`strict` and its frame for a StrictSoftFileLock's wait; `unknown` for a wait in a lock's
    acquire loop no known row names; None for anything else (the known protocols locks reads)."""
    known = locks.protocol_of(stack)
    if known is not None:
        return ("strict", known[1]) if known[0].protocol == "strict" else None
    for wait in knowledge.load().waits:
        for frame in stack.frames:
            if frame.name.rsplit(".", 1)[-1] in wait.functions and frame.filename.endswith("/" + wait.file):
                return "unknown", frame
    return None


def _stays(sample: Sample, thread: str, frame: Frame) -> bool:
    """Whether the thread is in the same waiting function in this sample."""
    return any(
        s.thread == thread and any((f.filename, f.name) == (frame.filename, frame.name) for f in s.frames)
        for s in sample
    )


def _paths(frame: Frame) -> Iterator[str]:
    for _, shown in frame.locals:
        text = waits.string(shown)
        if text is not None and not text.cut and text.head.startswith("/"):
            yield text.head


def _unread(process: ProcessFacts, path: str | None, frame: Frame) -> Lock:
    """A lock whose holders diagnose cannot read: of unknown protocol, or without its path."""
    read_at = locks.reached(process, path) if path else ""
    return Lock(
        "unknown", path or "", read_at, None, (), frame, whole=path is not None, lock_class=_class(frame)
    )


def _class(frame: Frame) -> str:
    shown = dict(frame.locals).get("self", "")
    return shown[1:].split(" ", 1)[0] if shown.startswith("<") else ""


def _records(directory: str) -> list[list[str]]:
    try:
        names = sorted(os.listdir(directory))[:CLAIMS]
    except OSError:
        return []
    found = []
    for name in (n for n in names if not n.startswith(".")):
        try:
            with open(os.path.join(directory, name), "rb") as record:
                found.append(record.read(RECORD).decode("ascii", errors="replace").split("\n"))
        except OSError:
            continue
    return found


def _age(read_at: str) -> float | None:
    try:
        return max(0.0, time.time() - os.stat(read_at).st_mtime)
    except OSError:
        return None


def _host(process: ProcessFacts) -> str:
    named = ""
    if process.container:
        try:
            with open(process.root + "/etc/hostname", "rb") as file:
                named = file.read(256).decode(errors="replace").strip()
        except OSError:
            named = ""
    return named or os.uname().nodename


def _strict(process: ProcessFacts, path: str | None, frame: Frame, seen: ProcTable) -> Lock | None:
    """The lock with the holders its claims name: a live process of its PID on its host holds it; a
    claim of another host, or read from outside the waiter's PID namespace, may be live (a holder
    not proven gone); a claim whose PID no process here is, is gone."""
    if path is None:
        return None
    shape = knowledge.load().claims
    read_at = locks.reached(process, path)
    pids, gone, elsewhere = [], [], []
    for lines in _records(shape.directory.format(lock=read_at)):
        try:
            magic, pid = lines[shape.magic_line], int(lines[shape.pid_line])
            host = bytes.fromhex(lines[shape.hostname_hex_line]).decode(errors="replace")
        except (IndexError, ValueError):
            continue
        if not magic.startswith(shape.magic):
            continue
        alive = pid in seen.processes and seen.processes[pid].state != "Z"
        if host != _host(process) or process.container:
            elsewhere.append(Holder(pid, f"a claim of PID {pid} on host {host}", "?", ""))
        elif alive:
            pids.append(pid)
        else:
            gone.append(pid)
    holders = tuple(Holder(s.pid, s.command, s.state, s.wchan) for s in (seen.processes[p] for p in pids))
    mount = locks.mount_of(process.pid, procs.resolved(process.root, path))
    return Lock(
        "strict", path, read_at, _age(read_at), (*holders, *dict.fromkeys(elsewhere)), frame,
        mount=mount, seen=locks.all_in_view(mount), claims=tuple(dict.fromkeys(gone)), lock_class=_class(frame),
    )  # fmt: skip
