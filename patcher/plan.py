"""The plan, pure: a snapshot and a decision in; the exact writes and the verdict out, or a refusal.

Nothing here reads or writes a file. The engine reads the snapshot, asks for a plan, checks that
every path the plan writes is writable, and hands the plan's steps to fsio.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from patcher import fsio
from patcher.classify import Known, State, describe
from patcher.edits import Edit
from patcher.errors import ExitCode, LazylogError, Next, refused
from patcher.hashes import record_hash, sha256
from patcher.locate import Target
from patcher.pyc import Pyc, Rebuild
from patcher.record import FileChange, FileState, UndoRecord, record_edit, row_hash
from patcher.snapshot import FileStat, Snapshot
from patcher.spec import PatchSpec

if TYPE_CHECKING:
    from patcher.transform import Rewritten


class Plan(NamedTuple):
    state: State
    message: str
    code: ExitCode = ExitCode.OK
    next: Next | None = None
    release: str | None = None
    match: str | None = None
    diff: str | None = None
    problems: tuple[str, ...] = ()
    steps: tuple[fsio.Step | Rebuild, ...] = ()  # in commit order; a Rebuild is compiled, then written
    result: bytes | None = None  # graph.py after the plan, when it changes
    check: tuple[Path, ...] = ()  # must be writable (and no link) before any write


def _writable(target: Target, snap: Snapshot) -> tuple[Path, ...]:
    paths = [target.graph, target.graph.parent]
    paths += (
        [target.dist_info, target.dist_info / "RECORD"] if target.dist_info else [target.undo_path.parent]
    )
    return (*paths, *(p.path for p in snap.pycs))


def _pyc_steps(target: Target, pycs: list[Pyc], source: bytes, mtime_ns: int) -> list[fsio.Step | Rebuild]:
    """Rebuild the target interpreter's own pycs; remove the others (their Python rebuilds them)."""
    own = [p for p in pycs if p.tag == target.interpreter.cache_tag and p.mode != "invalid"]
    removes = [fsio.Remove(p.path, label=f"pyc-{p.path.name}") for p in pycs if p not in own]
    return [*(Rebuild(p, source, mtime_ns) for p in own), *removes]


def _write(
    path: Path, data: bytes, label: str, like: FileStat | None, mtime_ns: int | None = None
) -> fsio.Write:
    mode, uid, gid = (like.mode, like.uid, like.gid) if like else (0o644, -1, -1)
    return fsio.Write(path, data, mode, uid, gid, mtime_ns=mtime_ns, label=label)


def unknown(target: Target, spec: PatchSpec, known: Known) -> LazylogError:
    supported = (
        f"torch-lazylog patches {', '.join(spec.releases.versions('eager'))} and knows "
        f"{', '.join(spec.releases.versions('native'))} as natively lazy"
    )
    error = refused(
        f"Expected graph.py of a known torch release, found torch {target.torch_version or '(unknown version)'} "
        f"at {target.torch_dir} whose graph.py is not one torch-lazylog knows: {known.reason.rstrip('.')}. "
        f"{supported}. Nothing was written. If this is a vendor build, compare its branch with the "
        "nearest release (the diff) and add its fingerprint to patches/ with `torch-lazylog fingerprint`."
    )
    error.diff = known.diff or None
    return error


def _diff(before: bytes, edit: Edit, spec: PatchSpec, context: int = 3) -> str:
    """The unified diff of a whole-line edit, built from the edit itself (no diff of the whole file)."""
    name = "torch/" + spec.file
    lines = before[: edit.offset].decode("utf-8", "surrogateescape").splitlines(keepends=True)
    after = before[edit.offset + len(edit.old) :].decode("utf-8", "surrogateescape").splitlines(keepends=True)
    old = edit.old.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    new = edit.new.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    head, tail = lines[-context:] if context else [], after[:context]
    start = len(lines) - len(head) + 1
    hunk = [
        f"@@ -{start},{len(head) + len(old) + len(tail)} +{start},{len(head) + len(new) + len(tail)} @@\n"
    ]
    hunk += [" " + line for line in head] + ["-" + line for line in old] + ["+" + line for line in new]
    hunk += [" " + line for line in tail]
    return f"--- a/{name}\n+++ b/{name}\n" + "".join(hunk)


# ---------------------------------------------------------------- apply


def apply(
    target: Target,
    spec: PatchSpec,
    snap: Snapshot,
    decision: tuple[Known, Rewritten | None] | None,
    now_ns: int,
    dry_run: bool = False,
) -> Plan:
    """`decision` is None exactly when graph.py is recorded as patched (no parse needed then)."""
    if decision is None:
        return _apply_repair(target, spec, snap)
    known, outcome = decision
    if known.state == "unknown":
        raise unknown(target, spec, known)
    if known.state == "native":
        return _apply_native(target, spec, snap, known)
    stale_undo = snap.undo is not None and snap.sha256 != snap.undo.graph.before.sha256
    if known.state == "patched":
        raise refused(
            f"Expected graph.py to be either pristine or patched with its undo record, found it patched"
            f"{known.described()} but with {'a stale' if stale_undo else 'no'} undo record at {target.undo_path}. "
            "The file is lazy, but revert cannot restore it byte for byte. Nothing was written. To start "
            f"clean, reinstall torch, then run apply again."
        )
    assert outcome is not None and known.release is not None and known.match is not None
    planned = _apply_patch(target, spec, snap, known, outcome, now_ns, stale_undo)
    if dry_run:
        line = outcome.edit.line_number(snap.graph)
        message = f"Would patch graph.py line {line} of torch {target.torch_version}{known.described()}; nothing written."
        return planned._replace(message=message, steps=())
    return planned


def _record_before(snap: Snapshot) -> bytes | None:
    """RECORD as it was before this tool touched it (undoing an earlier, interrupted change)."""
    if snap.record is None or snap.undo is None or snap.undo.record is None:
        return snap.record
    change = snap.undo.record
    if sha256(snap.record) == change.after.sha256:
        return change.edit.inverted().apply(snap.record)
    return snap.record


def _record_change(
    target: Target, snap: Snapshot, new: bytes, spec: PatchSpec
) -> tuple[FileChange | None, bytes | None]:
    base = _record_before(snap)
    if base is None or target.dist_info is None or snap.record_stat is None:
        return None, None
    row = target.undo_row_path()
    add = row if row and row_hash(base, row) is None else None
    edit = record_edit(base, spec.record_path, record_hash(new), len(new), add)
    new_record = edit.apply(base)
    change = FileChange(
        f"{target.dist_info.name}/RECORD",
        FileState(sha256(base), len(base)),
        FileState(sha256(new_record), len(new_record)),
        edit,
        mode=snap.record_stat.mode,
        mtime_ns=snap.record_stat.mtime_ns,
    )
    return change, new_record


def _undo_record(
    spec: PatchSpec, snap: Snapshot, known: Known, outcome: Rewritten, record_change: FileChange | None
) -> UndoRecord:
    assert known.release is not None and known.match is not None
    new = outcome.source
    graph = FileChange(
        spec.record_path,
        FileState(snap.sha256, len(snap.graph)),
        FileState(sha256(new), len(new)),
        outcome.edit,
        mode=snap.graph_stat.mode,
        mtime_ns=snap.graph_stat.mtime_ns,
    )
    return UndoRecord(spec.id, known.release.version, known.match, graph, record_change)


def _apply_patch(
    target: Target,
    spec: PatchSpec,
    snap: Snapshot,
    known: Known,
    outcome: Rewritten,
    now_ns: int,
    stale_undo: bool,
) -> Plan:
    new = outcome.source
    record_change, new_record = _record_change(target, snap, new, spec)
    undo = _undo_record(spec, snap, known, outcome, record_change)
    steps: list[fsio.Step | Rebuild] = [
        _write(target.undo_path, undo.to_bytes(), "undo", snap.record_stat),
        _write(target.graph, new, "graph", snap.graph_stat, mtime_ns=now_ns),
        *_pyc_steps(target, list(snap.pycs), new, now_ns),
    ]
    if new_record is not None and target.record_file is not None:
        steps.append(_write(target.record_file, new_record, "RECORD", snap.record_stat))
    line = outcome.edit.line_number(snap.graph)
    stale = " (replaced a stale undo record)" if stale_undo else ""
    return Plan(
        "patched",
        f"Patched graph.py line {line} of torch {target.torch_version}{known.described()}: the implicit-fallback "
        f"log text is now built only when the line is emitted{stale}.",
        release=undo.release,
        match=undo.match,
        diff=_diff(snap.graph, outcome.edit, spec),
        steps=tuple(steps),
        result=new,
        check=_writable(target, snap),
    )


def _apply_native(target: Target, spec: PatchSpec, snap: Snapshot, known: Known) -> Plan:
    """Nothing to patch; bytecode that does not describe the source is rebuilt, and an undo record
    left from a patched older torch is dropped when the file is a pristine release."""
    stale = snap.stale_pycs()
    steps = _pyc_steps(target, stale, snap.graph, snap.graph_stat.mtime_ns)
    fixed = f"; rebuilt {len(stale)} stale pyc file(s)" if stale else ""
    if snap.undo is not None:
        if known.match != "exact":
            raise refused(
                f"Expected graph.py to be a known release or as torch-lazylog left it, found it lazy"
                f"{known.described()} but not the file its undo record {target.undo_path} describes: it "
                "changed since apply, so its original cannot be restored. Nothing was written."
            )
        steps.append(fsio.Remove(target.undo_path, label="undo"))
        fixed += "; removed the stale undo record of an earlier torch"
    return Plan(
        "native",
        f"torch {target.torch_version} formats the implicit-fallback log lazily already"
        f"{known.described()}: nothing to do{fixed}.",
        release=known.release.version if known.release else None,
        match=known.match,
        steps=tuple(steps),
        check=_writable(target, snap) if steps else (),
    )


def _record_repair(target: Target, spec: PatchSpec, snap: Snapshot) -> bytes | None:
    """RECORD as it should be for the patched graph.py, when it is not (an interrupted apply, or a
    row put back by hand); None when it already is."""
    undo = snap.undo
    if snap.record is None or undo is None or undo.record is None:
        return None
    if sha256(snap.record) == undo.record.before.sha256:
        return undo.record.edit.apply(snap.record)  # the recorded edit, exactly
    if row_hash(snap.record, spec.record_path) == record_hash(snap.graph):
        return None
    row = target.undo_row_path()
    add = row if row and row_hash(snap.record, row) is None else None
    return record_edit(snap.record, spec.record_path, record_hash(snap.graph), len(snap.graph), add).apply(
        snap.record
    )


def _apply_repair(target: Target, spec: PatchSpec, snap: Snapshot) -> Plan:
    """graph.py is patched and recorded; finish whatever an interrupted run left undone."""
    undo = snap.undo
    assert undo is not None
    steps: list[fsio.Step | Rebuild] = []
    fixed = []
    record = _record_repair(target, spec, snap)
    if record is not None and target.record_file is not None:
        steps.append(_write(target.record_file, record, "RECORD", snap.record_stat))
        fixed.append("updated RECORD")
    stale = snap.stale_pycs()
    steps += _pyc_steps(target, stale, snap.graph, snap.graph_stat.mtime_ns)
    if stale:
        fixed.append(f"rebuilt {len(stale)} stale pyc file(s)")
    done = f"; finished an interrupted run ({', '.join(fixed)})" if fixed else ""
    return Plan(
        "patched",
        f"torch {target.torch_version} is already patched (torch {undo.release}){done}.",
        release=undo.release,
        match=undo.match,
        steps=tuple(steps),
        check=_writable(target, snap) if fixed else (),
    )


# ---------------------------------------------------------------- revert


def _record_restore(target: Target, snap: Snapshot) -> list[fsio.Step]:
    undo = snap.undo
    if snap.record is None or undo is None or undo.record is None or target.record_file is None:
        return []
    change = undo.record
    current = sha256(snap.record)
    if current == change.before.sha256:
        return []
    inverse = change.edit.inverted()
    stat = snap.record_stat
    if current == change.after.sha256 and inverse.applies_to(snap.record) and stat is not None:
        restored = inverse.apply(snap.record)
        return [
            fsio.Write(
                target.record_file, restored, change.mode, stat.uid, stat.gid, change.mtime_ns, "RECORD"
            )
        ]
    # RECORD changed since apply (another tool added rows): undo exactly our rows, wherever they are.
    if snap.record.count(change.edit.new) == 1:
        offset = snap.record.index(change.edit.new)
        restored = snap.record[:offset] + change.edit.old + snap.record[offset + len(change.edit.new) :]
        return [_write(target.record_file, restored, "RECORD", stat)]
    return []


def revert(target: Target, spec: PatchSpec, snap: Snapshot, known: Known | None) -> Plan:
    """`known` is the classification of graph.py, needed only when it is not as the record says."""
    undo = snap.undo
    if undo is None:
        assert known is not None
        return _revert_unrecorded(target, spec, known)
    if snap.sha256 == undo.graph.after.sha256:
        return _revert_patched(target, snap)
    if snap.sha256 == undo.graph.before.sha256:
        steps = [
            *_pyc_steps(target, snap.stale_pycs(), snap.graph, snap.graph_stat.mtime_ns),
            *_record_restore(target, snap),
            fsio.Remove(target.undo_path, label="undo"),
        ]
        return Plan(
            "eager",
            f"graph.py of torch {target.torch_version} was already original; finished an interrupted run "
            "(restored RECORD, removed the undo record).",
            release=undo.release,
            match=undo.match,
            steps=tuple(steps),
            check=_writable(target, snap),
        )
    assert known is not None
    if known.match == "exact" and known.state in ("eager", "native"):
        # torch was reinstalled over a patched one: the record describes a file that is gone.
        return Plan(
            known.state,
            f"Nothing to revert: graph.py is pristine torch {undo.release} (torch was reinstalled); "
            "removed the stale undo record.",
            release=known.release.version if known.release else None,
            match=known.match,
            steps=(fsio.Remove(target.undo_path, label="undo"),),
            check=_writable(target, snap),
        )
    raise refused(
        f"Expected graph.py to be as torch-lazylog left it (sha256 {undo.graph.after.sha256[:16]}...) or the "
        f"original ({undo.graph.before.sha256[:16]}...), found {snap.sha256[:16]}...: it changed since apply. "
        f"Nothing was written. Only a reinstall of torch brings back a known graph.py."
    )


def _revert_unrecorded(target: Target, spec: PatchSpec, known: Known) -> Plan:
    if known.state == "unknown":
        raise unknown(target, spec, known)
    if known.state == "patched":
        raise refused(
            f"Expected an undo record at {target.undo_path} for the patched graph.py{known.described()}, found "
            "none, so the original bytes cannot be restored exactly. Nothing was written. Only a reinstall of torch brings them back."
        )
    return Plan(
        known.state,
        f"Nothing to revert: graph.py of torch {target.torch_version} is not patched{known.described()}.",
        release=known.release.version if known.release else None,
        match=known.match,
    )


def _revert_patched(target: Target, snap: Snapshot) -> Plan:
    undo = snap.undo
    assert undo is not None
    inverse = undo.graph.edit.inverted()
    original = inverse.apply(snap.graph) if inverse.applies_to(snap.graph) else b""
    if sha256(original) != undo.graph.before.sha256:
        raise refused(
            f"The undo record {target.undo_path} does not restore graph.py to the hash it records "
            f"({undo.graph.before.sha256[:16]}...). Nothing was written. Only a reinstall of torch brings back the original (pip removes the record)."
        )
    graph = fsio.Write(
        target.graph,
        original,
        undo.graph.mode,
        snap.graph_stat.uid,
        snap.graph_stat.gid,
        undo.graph.mtime_ns,
        "graph",
    )
    steps = [
        graph,
        *_pyc_steps(target, list(snap.pycs), original, undo.graph.mtime_ns),
        *_record_restore(target, snap),
        fsio.Remove(target.undo_path, label="undo"),
    ]
    return Plan(
        "eager",
        f"Reverted graph.py of torch {target.torch_version} to its original bytes.",
        release=undo.release,
        match=undo.match,
        steps=tuple(steps),
        result=original,
        check=_writable(target, snap),
    )


# ---------------------------------------------------------------- verify


def verify(target: Target, spec: PatchSpec, snap: Snapshot, known: Known | None) -> Plan:
    """The verdict; `known` is None exactly when graph.py is recorded as patched."""
    problems: list[str] = []
    if known is None:
        assert snap.undo is not None
        state: State = "patched"
        release: str | None = snap.undo.release
        match: str | None = snap.undo.match
        if snap.record is not None and row_hash(snap.record, spec.record_path) != record_hash(snap.graph):
            problems.append("RECORD still lists graph.py with its original hash (an interrupted apply)")
    else:
        state, match = known.state, known.match
        release = known.release.version if known.release else None
        problems += _record_problems(target, snap, known)
    if state in ("patched", "native"):
        problems += [
            f"{item.path} is a stale unchecked-hash pyc: Python runs it instead of the patched source"
            for item in snap.stale_pycs()
            if item.mode == "unchecked-hash"
        ]
    code = _code(state, problems)
    message = _verdict(target, snap, state, problems, describe(release, match))
    next_step = None if code == ExitCode.OK else _next_for_verify(snap, state, known)
    return Plan(state, message, code, next_step, release=release, match=match, problems=tuple(problems))


def _next_for_verify(snap: Snapshot, state: State, known: Known | None) -> Next:
    """The one command that fixes what verify found, or the reinstall state when none can."""
    if state == "eager" or known is None:
        return "apply"  # patches, or finishes an interrupted apply (RECORD, stale pycs)
    undo_is_stale = snap.undo is not None and snap.sha256 != snap.undo.graph.before.sha256
    if undo_is_stale:
        # apply drops a record of a file since replaced by a pristine lazy release; nothing else can help
        return "apply" if known.match == "exact" and known.state == "native" else "reinstall"
    return "reinstall" if known.state == "patched" else "apply"


def _record_problems(target: Target, snap: Snapshot, known: Known) -> list[str]:
    problems = []
    if snap.undo is not None and snap.sha256 == snap.undo.graph.before.sha256:
        problems.append("an undo record exists but graph.py is original (an interrupted apply or revert)")
    elif snap.undo is not None:
        problems.append(f"the undo record {target.undo_path} is stale: it describes another graph.py")
    if known.state == "patched":
        problems.append("graph.py is patched but has no matching undo record, so revert cannot restore it")
    return problems


def _code(state: State, problems: list[str]) -> ExitCode:
    return ExitCode.EAGER if state == "eager" or problems else ExitCode.OK


def _verdict(target: Target, snap: Snapshot, state: State, problems: list[str], described: str) -> str:
    notes = (
        f" ({len(snap.leftovers)} temp file(s) left by an interrupted run; the next apply or revert removes them)"
        if snap.leftovers
        else ""
    )
    where = f"torch {target.torch_version} at {target.torch_dir}"
    if state == "eager":
        return f"{where} formats the implicit-fallback log eagerly{described}.{notes}"
    if problems:
        return f"{where} is {state} but not consistent: {'; '.join(problems)}.{notes}"
    if state == "native":
        return f"{where} formats the implicit-fallback log lazily: natively{described}.{notes}"
    return (
        f"{where} formats the implicit-fallback log lazily: graph.py is patched{described} "
        f"and matches its undo record.{notes}"
    )
