"""apply, verify and revert: read everything, decide, then hand a list of writes to fsio.

Nothing here writes a file itself. Each command reads a snapshot under the lock, works out what
the installed torch is (by hashes first, by the libcst site fingerprint only when no hash is
known), and either reports or builds the full list of writes before the first one happens.
"""

from __future__ import annotations

import difflib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from patcher import fsio, pyc
from patcher.errors import ExitCode, LazylogError, environment, refused
from patcher.hashes import record_hash, sha256, version_key
from patcher.locate import Target
from patcher.record import FileChange, FileState, UndoRecord, record_edit, row_hash, undo_parse_error
from patcher.spec import PatchSpec, Release

if TYPE_CHECKING:
    from patcher.transform import Rewritten, Site

State = Literal["eager", "patched", "native", "unknown"]


@dataclass
class Report:
    command: str
    state: State
    changed: bool
    message: str
    code: ExitCode = ExitCode.OK
    torch_version: str | None = None
    torch_dir: str | None = None
    graph_py: str | None = None
    sha256: str | None = None
    release: str | None = None
    match: str | None = None
    undo_record: str | None = None
    diff: str | None = None
    problems: list[str] = field(default_factory=list)
    pycs: list[dict[str, object]] = field(default_factory=list)
    checks: list[dict[str, object]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "state": self.state,
            "changed": self.changed,
            "exit_code": int(self.code),
            "message": self.message,
            "torch_version": self.torch_version,
            "torch_dir": self.torch_dir,
            "graph_py": self.graph_py,
            "sha256": self.sha256,
            "release": self.release,
            "match": self.match,
            "undo_record": self.undo_record,
            "diff": self.diff,
            "problems": self.problems,
            "pycs": self.pycs,
            "checks": self.checks,
        }


@dataclass(frozen=True)
class Snapshot:
    graph: bytes
    stat: os.stat_result
    record: bytes | None
    undo: UndoRecord | None
    pycs: list[pyc.Pyc]
    leftovers: list[Path]


@dataclass(frozen=True)
class Known:
    state: State
    release: Release | None
    match: Literal["exact", "site"] | None
    reason: str = ""
    diff: str = ""


def _base(version: str | None) -> str:
    return (version or "").split("+")[0]


def _nearest(rows: list[Release], torch_version: str | None) -> Release:
    same = [r for r in rows if r.version == _base(torch_version)]
    return same[0] if same else max(rows, key=lambda r: version_key(r.version))


def _site_diff(spec: PatchSpec, code: str, form: str, torch_version: str | None) -> str:
    """A short diff of this branch against the most similar known one."""
    by_site: dict[str, list[Release]] = {}
    for row in spec.releases.rows:
        fingerprint = row.site if form == "eager" or row.state == "native" else row.patched_site
        if fingerprint in spec.releases.site_code:
            by_site.setdefault(fingerprint, []).append(row)
    if not by_site:
        return ""
    scored = []
    for fingerprint, rows in by_site.items():
        row = _nearest(rows, torch_version)
        ratio = difflib.SequenceMatcher(None, spec.releases.site_code[fingerprint], code).ratio()
        scored.append(
            (ratio, row.version == _base(torch_version), version_key(row.version), fingerprint, row)
        )
    *_, fingerprint, row = max(scored)
    lines = list(
        difflib.unified_diff(
            spec.releases.site_code[fingerprint].splitlines(),
            code.splitlines(),
            f"torch {row.version} (nearest release)",
            f"torch {torch_version or '(installed)'}",
            n=1,
            lineterm="",
        )
    )
    shown = lines[:24] + (["..."] if len(lines) > 24 else [])
    return f"The branch differs from the nearest release, {row.version}:\n" + "\n".join(shown)


def classify(source: bytes, spec: PatchSpec, torch_version: str | None) -> Known:
    """What this graph.py is: by its hash when known (no parse), else by its site fingerprint."""
    hit = _by_hash(source, spec, torch_version)
    if hit is not None:
        return hit
    from patcher.transform import Refused, site_of  # libcst: only when no hash is known

    site = site_of(source, spec)
    if isinstance(site, Refused):
        return Known("unknown", None, None, site.reason)
    return _by_site(site, spec, torch_version)


def _by_hash(source: bytes, spec: PatchSpec, torch_version: str | None) -> Known | None:
    hit = spec.releases.by_sha256(sha256(source))
    return None if hit is None else Known(hit[0], _nearest(hit[1], torch_version), "exact")


def _by_site(site: Site, spec: PatchSpec, torch_version: str | None) -> Known:
    state, rows = spec.releases.by_site(site.fingerprint, site.form)
    if not rows:
        reason = "its implicit-fallback branch matches no known release"
        return Known("unknown", None, None, reason, _site_diff(spec, site.code, site.form, torch_version))
    return Known(state, _nearest(rows, torch_version), "site")


def decide(source: bytes, spec: PatchSpec, torch_version: str | None) -> tuple[Known, Rewritten | None]:
    """apply's whole decision, pure: what the file is, and the rewrite when it is a known eager one."""
    hit = _by_hash(source, spec, torch_version)
    if hit is not None and hit.state != "eager":
        return hit, None
    from patcher.transform import Refused, Rewritten, rewrite

    outcome = rewrite(source, spec, to="lazy")
    if isinstance(outcome, Refused):
        return Known("unknown", None, None, outcome.reason), None
    site = outcome.before if isinstance(outcome, Rewritten) else outcome.site
    known = hit or _by_site(site, spec, torch_version)
    return known, (outcome if isinstance(outcome, Rewritten) and known.state == "eager" else None)


def _supported(spec: PatchSpec) -> str:
    return (
        f"torch-lazylog patches {', '.join(spec.releases.versions('eager'))} and knows "
        f"{', '.join(spec.releases.versions('native'))} as natively lazy"
    )


def _unknown(target: Target, spec: PatchSpec, known: Known) -> LazylogError:
    return refused(
        f"Expected graph.py of a known torch release, found torch {target.torch_version or '(unknown version)'} "
        f"at {target.torch_dir} whose graph.py is not one torch-lazylog knows: {known.reason.rstrip('.')}. "
        f"{_supported(spec)}. Nothing was written. If this is a vendor build, compare its branch with the "
        "nearest release and add its fingerprint to patches/ with `torch-lazylog fingerprint`."
        + (f"\n{known.diff}" if known.diff else "")
    )


def _describe(known: Known) -> str:
    if known.release is None:
        return ""
    how = "identical to" if known.match == "exact" else "same patch site as"
    return f" ({how} torch {known.release.version})"


def _stat_like(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_mode & 0o7777, st.st_uid, st.st_gid


def read_snapshot(target: Target, spec: PatchSpec) -> Snapshot:
    try:
        graph = target.graph.read_bytes()
        stat = os.stat(target.graph)
    except OSError as exc:
        raise environment(f"Could not read {target.graph}: {exc.strerror}.") from exc
    record = None
    if target.record_file is not None:
        try:
            record = target.record_file.read_bytes()
        except OSError as exc:
            raise environment(
                f"Expected {target.record_file} (the list of torch's installed files), but could not read it "
                f"({exc.strerror}). The install is damaged: reinstall torch "
                f"(pip install --force-reinstall --no-deps torch=={_base(target.torch_version) or '<version>'})."
            ) from exc
    undo = None
    try:
        raw = target.undo_path.read_bytes()
    except FileNotFoundError:
        raw = None
    except OSError as exc:
        raise environment(f"Could not read the undo record {target.undo_path}: {exc.strerror}.") from exc
    if raw is not None:
        try:
            undo = UndoRecord.parse(
                raw,
                spec.id,
                spec.record_path,
                f"{target.dist_info.name}/RECORD" if target.dist_info else None,
            )
        except ValueError as exc:
            raise undo_parse_error(str(target.undo_path), str(exc)) from exc
    pycs = pyc.find(target.graph, target.interpreter.pycache_prefix)
    dirs = [target.graph.parent, *pyc.cache_dirs(target.graph, target.interpreter.pycache_prefix)]
    if target.dist_info is not None:
        dirs.append(target.dist_info)
    else:
        dirs.append(target.undo_path.parent)
    return Snapshot(graph, stat, record, undo, pycs, fsio.leftovers(dirs))


def _fill(report: Report, target: Target, snap: Snapshot | None) -> Report:
    report.torch_version = target.torch_version
    report.torch_dir = str(target.torch_dir)
    report.graph_py = str(target.graph)
    report.undo_record = str(target.undo_path)
    if snap is not None:
        report.sha256 = sha256(snap.graph)
        report.pycs = [p.describe() for p in snap.pycs]
    return report


def _check_writable(target: Target, snap: Snapshot) -> None:
    """Refuse links and read-only files before writing; root ignores mode bits, this tool does not."""
    for path in (target.torch_dir, target.graph.parent, target.graph):
        if path.is_symlink():
            raise environment(
                f"Expected {path} to be a real file or directory, found a symbolic link to {os.readlink(path)}. "
                "Writing through it would change a shared store (and every environment linked to it); "
                "copy the package into place (e.g. uv's --link-mode=copy) and run again."
            )
    checks = [target.graph, target.graph.parent]
    if target.dist_info is not None:
        checks += [target.dist_info, target.dist_info / "RECORD"]
    else:
        checks.append(target.undo_path.parent)
    checks += [p.path for p in snap.pycs]
    for path in checks:
        mode = os.stat(path).st_mode
        if not mode & 0o200 or not os.access(path, os.W_OK):
            raise environment(
                f"Expected to be able to write {path}, but it is read-only (mode {oct(mode & 0o7777)}). "
                "Nothing was changed. Run torch-lazylog as the owner of the torch install with the "
                "install writable (in a Dockerfile: before any step that makes it read-only)."
            )


def _pyc_steps(target: Target, pycs: list[pyc.Pyc], source: bytes, mtime_ns: int) -> list[fsio.Step]:
    own = [p for p in pycs if p.tag == target.interpreter.cache_tag and p.mode != "invalid"]
    others = [p for p in pycs if p not in own]
    steps: list[fsio.Step] = []
    if own:
        datas, _ = pyc.compile_for(target.interpreter, own, source, target.graph, mtime_ns)
        for item, data in zip(own, datas, strict=True):
            mode, uid, gid = _stat_like(item.path)
            steps.append(fsio.Write(item.path, data, mode, uid, gid, label=f"pyc-{item.path.name}"))
    steps += [fsio.Remove(p.path, label=f"pyc-{p.path.name}") for p in others]
    return steps


def _stale_pycs(target: Target, snap: Snapshot) -> list[pyc.Pyc]:
    own = [p for p in snap.pycs if p.tag == target.interpreter.cache_tag]
    needs_hash = any(p.mode in ("checked-hash", "unchecked-hash") for p in own)
    digest = pyc.source_hash(target.interpreter, snap.graph) if needs_hash else None
    return [p for p in own if pyc.stale(p, snap.graph, snap.stat.st_mtime, digest)]


def _write(
    path: Path, data: bytes, label: str, like: Path | None = None, mtime_ns: int | None = None
) -> fsio.Write:
    mode, uid, gid = (
        _stat_like(like or path) if (like or path).exists() else (0o644, os.geteuid(), os.getegid())
    )
    return fsio.Write(path, data, mode, uid, gid, mtime_ns=mtime_ns, label=label)


def _record_before(snap: Snapshot) -> bytes | None:
    """RECORD as it was before this tool touched it (undoing an earlier, interrupted change)."""
    if snap.record is None or snap.undo is None or snap.undo.record is None:
        return snap.record
    change = snap.undo.record
    if sha256(snap.record) == change.after.sha256:
        return change.edit.inverted().apply(snap.record)
    return snap.record


def _report_known(report: Report, known: Known, target: Target, spec: PatchSpec) -> Known:
    """Put what graph.py is into the report; a file this tool does not know is refused here."""
    report.state = known.state
    report.release = known.release.version if known.release else None
    report.match = known.match
    if known.state == "unknown":
        raise _unknown(target, spec, known)
    return known


def _under_lock(target: Target, exclusive: bool, work: Callable[[], Report]) -> Report:
    """Run one command under the torch directory's lock; errors learn which torch they are about."""
    try:
        with fsio.locked(target.torch_dir, exclusive):
            return work()
    except LazylogError as exc:
        exc.details.setdefault("torch_version", target.torch_version)
        exc.details.setdefault("torch_dir", str(target.torch_dir))
        raise


# ---------------------------------------------------------------- apply


def apply(target: Target, spec: PatchSpec, dry_run: bool = False) -> Report:
    return _under_lock(target, not dry_run, lambda: _apply(target, spec, dry_run))


def _apply(target: Target, spec: PatchSpec, dry_run: bool) -> Report:
    snap = read_snapshot(target, spec)
    sha = sha256(snap.graph)
    undo = snap.undo
    if not dry_run:
        fsio.remove_leftovers(snap.leftovers)  # temp files of a killed run: ours, never committed

    if undo is not None and sha == undo.graph.after.sha256:
        return _apply_repair(target, spec, snap, dry_run)

    known, outcome = decide(snap.graph, spec, target.torch_version)
    stale_undo = undo is not None and sha != undo.graph.before.sha256
    report = _fill(Report("apply", known.state, False, ""), target, snap)
    _report_known(report, known, target, spec)
    if known.state == "native":
        report.message = (
            f"torch {target.torch_version} formats the implicit-fallback log lazily already"
            f"{_describe(known)}: nothing to do."
        )
        return report
    if known.state == "patched":
        raise refused(
            f"Expected graph.py to be either pristine or patched with its undo record, found it patched"
            f"{_describe(known)} but with {'a stale' if stale_undo else 'no'} undo record at {target.undo_path}. "
            "The file is lazy, but revert cannot restore it byte for byte. Nothing was written. To start "
            f"clean, reinstall torch (pip install --force-reinstall --no-deps torch=={_base(target.torch_version)}) "
            "and run apply again."
        )

    assert outcome is not None, "decide() rewrites every known eager file"
    new = outcome.source
    assert known.release is not None and known.match is not None
    record_change = None
    new_record = None
    base_record = _record_before(snap)
    if base_record is not None:
        row = target.undo_row_path()
        add = row if row and row_hash(base_record, row) is None else None
        edit = record_edit(base_record, spec.record_path, record_hash(new), len(new), add)
        new_record = edit.apply(base_record)
        assert target.dist_info is not None
        record_stat = os.stat(target.dist_info / "RECORD")
        record_change = FileChange(
            f"{target.dist_info.name}/RECORD",
            FileState(sha256(base_record), len(base_record)),
            FileState(sha256(new_record), len(new_record)),
            edit,
            mode=record_stat.st_mode & 0o7777,
            mtime_ns=record_stat.st_mtime_ns,
        )
    undo_new = UndoRecord(
        patch=spec.id,
        release=known.release.version,
        match=known.match,
        graph=FileChange(
            spec.record_path,
            FileState(sha, len(snap.graph)),
            FileState(sha256(new), len(new)),
            outcome.edit,
            mode=snap.stat.st_mode & 0o7777,
            mtime_ns=snap.stat.st_mtime_ns,
        ),
        record=record_change,
    )
    line = outcome.edit.line_number(snap.graph)
    report.diff = _diff(snap.graph, new, spec)
    if dry_run:
        report.message = f"Would patch graph.py line {line} of torch {target.torch_version}{_describe(known)}; nothing written."
        return report

    _check_writable(target, snap)
    mtime_ns = time.time_ns()
    steps = [
        _write(target.undo_path, undo_new.to_bytes(), "undo", like=target.dist_info and target.record_file),
        fsio.Write(
            target.graph,
            new,
            snap.stat.st_mode & 0o7777,
            snap.stat.st_uid,
            snap.stat.st_gid,
            mtime_ns=mtime_ns,
            label="graph",
        ),
        *_pyc_steps(target, snap.pycs, new, mtime_ns),
    ]
    if new_record is not None and target.record_file is not None:
        steps.append(_write(target.record_file, new_record, "RECORD"))
    fsio.run(steps, "apply")
    report.state = "patched"
    report.changed = True
    report.sha256 = sha256(new)
    report.pycs = [p.describe() for p in pyc.find(target.graph, target.interpreter.pycache_prefix)]
    stale = " (replaced a stale undo record)" if stale_undo else ""
    report.message = (
        f"Patched graph.py line {line} of torch {target.torch_version}{_describe(known)}: the implicit-fallback "
        f"log text is now built only when the line is emitted{stale}. Undo with `torch-lazylog revert`."
    )
    return report


def _apply_repair(target: Target, spec: PatchSpec, snap: Snapshot, dry_run: bool) -> Report:
    """graph.py is patched and recorded; finish whatever an interrupted run left undone."""
    undo = snap.undo
    assert undo is not None
    report = _fill(Report("apply", "patched", False, ""), target, snap)
    report.release, report.match = undo.release, undo.match
    steps: list[fsio.Step] = []
    fixed = []
    if (
        snap.record is not None
        and undo.record is not None
        and sha256(snap.record) == undo.record.before.sha256
    ):
        steps.append(_write(target.record_file or Path(), undo.record.edit.apply(snap.record), "RECORD"))
        fixed.append("updated RECORD")
    stale = _stale_pycs(target, snap)
    if stale:
        steps += _pyc_steps(target, stale, snap.graph, snap.stat.st_mtime_ns)
        fixed.append(f"rebuilt {len(stale)} stale pyc file(s)")
    if fixed and not dry_run:
        _check_writable(target, snap)
        fsio.run(steps, "apply")
        report.changed = True
    done = f"; finished an interrupted run ({', '.join(fixed)})" if fixed and not dry_run else ""
    report.message = f"torch {target.torch_version} is already patched (torch {undo.release}){done}."
    return report


def _diff(before: bytes, after: bytes, spec: PatchSpec) -> str:
    name = "torch/" + spec.file
    a = before.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    b = after.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{name}", f"b/{name}"))


# ---------------------------------------------------------------- revert


def revert(target: Target, spec: PatchSpec) -> Report:
    return _under_lock(target, True, lambda: _revert(target, spec))


def _record_restore(target: Target, snap: Snapshot) -> list[fsio.Step]:
    undo = snap.undo
    if snap.record is None or undo is None or undo.record is None or target.record_file is None:
        return []
    change = undo.record
    current = sha256(snap.record)
    if current == change.before.sha256:
        return []
    inverse = change.edit.inverted()
    if current == change.after.sha256 and inverse.applies_to(snap.record):
        _, uid, gid = _stat_like(target.record_file)
        restored = inverse.apply(snap.record)
        return [fsio.Write(target.record_file, restored, change.mode, uid, gid, change.mtime_ns, "RECORD")]
    # RECORD changed since apply (another tool added rows): undo exactly our rows, wherever they are.
    if snap.record.count(change.edit.new) == 1:
        offset = snap.record.index(change.edit.new)
        restored = snap.record[:offset] + change.edit.old + snap.record[offset + len(change.edit.new) :]
        return [_write(target.record_file, restored, "RECORD")]
    return []


def _revert(target: Target, spec: PatchSpec) -> Report:
    snap = read_snapshot(target, spec)
    sha = sha256(snap.graph)
    undo = snap.undo
    fsio.remove_leftovers(snap.leftovers)  # temp files of a killed run: ours, never committed
    steps: list[fsio.Step] = []
    report = _fill(Report("revert", "eager", False, ""), target, snap)

    if undo is None:
        known = _report_known(report, classify(snap.graph, spec, target.torch_version), target, spec)
        if known.state == "patched":
            raise refused(
                f"Expected an undo record at {target.undo_path} for the patched graph.py{_describe(known)}, found "
                "none, so the original bytes cannot be restored exactly. Nothing was written. Reinstall torch "
                f"(pip install --force-reinstall --no-deps torch=={_base(target.torch_version)}) to get them back."
            )
        report.message = (
            f"Nothing to revert: graph.py of torch {target.torch_version} is not patched{_describe(known)}."
        )
        return report

    report.release, report.match = undo.release, undo.match
    if sha == undo.graph.after.sha256:
        inverse = undo.graph.edit.inverted()
        original = inverse.apply(snap.graph) if inverse.applies_to(snap.graph) else b""
        if sha256(original) != undo.graph.before.sha256:
            raise refused(
                f"The undo record {target.undo_path} does not restore graph.py to the hash it records "
                f"({undo.graph.before.sha256[:16]}...). Nothing was written. Reinstall torch "
                f"(pip install --force-reinstall --no-deps torch=={_base(target.torch_version)}) and delete the record."
            )
        _check_writable(target, snap)
        steps += [
            fsio.Write(
                target.graph,
                original,
                undo.graph.mode,
                snap.stat.st_uid,
                snap.stat.st_gid,
                mtime_ns=undo.graph.mtime_ns,
                label="graph",
            ),
            *_pyc_steps(target, snap.pycs, original, undo.graph.mtime_ns),
            *_record_restore(target, snap),
            fsio.Remove(target.undo_path, label="undo"),
        ]
        fsio.run(steps, "revert")
        report.changed = True
        report.sha256 = sha256(original)
        report.message = f"Reverted graph.py of torch {target.torch_version} to its original bytes."
        return report

    if sha == undo.graph.before.sha256:
        _check_writable(target, snap)
        stale = _stale_pycs(target, snap)
        steps += [
            *(_pyc_steps(target, stale, snap.graph, snap.stat.st_mtime_ns) if stale else []),
            *_record_restore(target, snap),
            fsio.Remove(target.undo_path, label="undo"),
        ]
        fsio.run(steps, "revert")
        report.changed = True
        report.message = (
            f"graph.py of torch {target.torch_version} was already original; finished an interrupted run "
            "(restored RECORD, removed the undo record)."
        )
        return report

    known = classify(snap.graph, spec, target.torch_version)
    if known.match == "exact" and known.state in ("eager", "native"):
        # torch was reinstalled over a patched one: the record describes a file that is gone.
        _check_writable(target, snap)
        fsio.run([*steps, fsio.Remove(target.undo_path, label="undo")], "revert")
        _report_known(report, known, target, spec)
        report.changed = True
        report.message = (
            f"Nothing to revert: graph.py is pristine torch {report.release} (torch was reinstalled); "
            "removed the stale undo record."
        )
        return report
    raise refused(
        f"Expected graph.py to be as torch-lazylog left it (sha256 {undo.graph.after.sha256[:16]}...) or the "
        f"original ({undo.graph.before.sha256[:16]}...), found {sha[:16]}...: it changed since apply. Nothing was "
        f"written. Reinstall torch (pip install --force-reinstall --no-deps torch=={_base(target.torch_version)}) "
        f"and delete {target.undo_path}."
    )


# ---------------------------------------------------------------- verify


def verify(target: Target, spec: PatchSpec) -> Report:
    return _under_lock(target, False, lambda: _verify(target, spec))


def _verify(target: Target, spec: PatchSpec) -> Report:
    snap = read_snapshot(target, spec)
    sha = sha256(snap.graph)
    undo = snap.undo
    report = _fill(Report("verify", "unknown", False, ""), target, snap)
    problems = report.problems
    if undo is not None and sha == undo.graph.after.sha256:
        report.state = "patched"
        report.release, report.match = undo.release, undo.match
        if snap.record is not None and row_hash(snap.record, spec.record_path) != record_hash(snap.graph):
            problems.append("RECORD still lists graph.py with its original hash (an interrupted apply)")
    else:
        known = _report_known(report, classify(snap.graph, spec, target.torch_version), target, spec)
        if undo is not None and sha == undo.graph.before.sha256:
            problems.append("an undo record exists but graph.py is original (an interrupted apply or revert)")
        elif undo is not None:
            problems.append(f"the undo record {target.undo_path} is stale: it describes another graph.py")
        if known.state == "patched":
            problems.append(
                "graph.py is patched but has no matching undo record, so revert cannot restore it"
            )
    if report.state in ("patched", "native"):
        for item in _stale_pycs(target, snap):
            if item.mode == "unchecked-hash":
                problems.append(
                    f"{item.path} is a stale unchecked-hash pyc: Python runs it instead of the patched source"
                )
    notes = f" ({len(snap.leftovers)} temp file(s) left by an interrupted run; the next apply or revert removes them)"
    notes = notes if snap.leftovers else ""
    where = f"torch {target.torch_version} at {target.torch_dir}"
    if report.state == "eager":
        report.code = ExitCode.EAGER
        report.message = (
            f"{where} formats the implicit-fallback log eagerly{_describe_report(report)}. "
            f"Run `torch-lazylog apply`.{notes}"
        )
    elif problems:
        report.code = ExitCode.EAGER
        report.message = f"{where} is {report.state} but not consistent: {'; '.join(problems)}. Run `torch-lazylog apply` to repair.{notes}"
    elif report.state == "native":
        report.message = (
            f"{where} formats the implicit-fallback log lazily: natively{_describe_report(report)}.{notes}"
        )
    else:
        report.message = (
            f"{where} formats the implicit-fallback log lazily: graph.py is patched{_describe_report(report)} "
            f"and matches its undo record.{notes}"
        )
    return report


def _describe_report(report: Report) -> str:
    if report.release is None:
        return ""
    how = "identical to" if report.match == "exact" else "same patch site as"
    return f" ({how} torch {report.release})"
