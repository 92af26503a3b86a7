"""What a graph.py is, pure: its bytes and the known releases in, its kind, the nearest release and
apply's rewrite out.

By the whole-file hash first (no parse), then by the undo record of bytes this tool wrote (no parse);
by the libcst site fingerprint only when neither is known.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from patcher.core.edits import Edit, line_edit, swapped
from patcher.core.hashes import sha256, version_key
from patcher.core.outcome import Cause, Refused, Rewritten, Site
from patcher.core.spec import Kind, PatchSpec, Release
from patcher.core.undo import UndoRecord

Match = Literal["exact", "site"]
# What the bytes and the release table alone say graph.py is: a Kind where they decide it (a
# release's exact file, bytes this tool's undo record says it wrote, an eager branch, a file not
# known), or "lazy": a lazy branch known by its site, which one release ships and patching another
# gives alike. Which of the two it is, only this tool's traces say: patcher.core.facts decides that
# Kind, once, from them.
Seen = Kind | Literal["lazy"]


class Known(NamedTuple):
    kind: Seen
    release: Release | None
    match: Match | None
    reason: str = ""
    nearest_diff: str = ""  # an unknown file: its branch against the nearest release's
    cause: Cause = "site"  # for an unknown file: why (patcher.core.outcome)


def base_version(version: str | None) -> str:
    return (version or "").split("+")[0]


def _nearest(rows: list[Release], torch_version: str | None) -> Release:
    same = [r for r in rows if r.version == base_version(torch_version)]
    return same[0] if same else max(rows, key=lambda r: version_key(r.version))


def site_diff(spec: PatchSpec, code: str, lazy: bool, torch_version: str | None) -> str:
    """A short diff of this branch against the most similar known one."""
    import difflib  # only for a refusal

    by_site: dict[str, list[Release]] = {}
    for row in spec.releases.rows:
        fingerprint = row.patched_site if lazy and row.kind == "eager" else row.site
        if fingerprint in spec.releases.site_code:
            by_site.setdefault(fingerprint, []).append(row)
    if not by_site:
        return ""
    scored = []
    for fingerprint, rows in by_site.items():
        row = _nearest(rows, torch_version)
        ratio = difflib.SequenceMatcher(None, spec.releases.site_code[fingerprint], code).ratio()
        same = row.version == base_version(torch_version)
        scored.append((ratio, same, version_key(row.version), fingerprint, row))
    *_, fingerprint, row = max(scored)
    lines = list(
        difflib.unified_diff(
            spec.releases.site_code[fingerprint].splitlines(),
            code.splitlines(),
            f"torch {row.version} (nearest release)",
            f"installed torch {torch_version or ''}".rstrip(),
            n=1,
            lineterm="",
        )
    )
    shown = lines[:24] + (["..."] if len(lines) > 24 else [])
    return f"The branch differs from the nearest release, {row.version}:\n" + "\n".join(shown)


def by_hash(digest: str, spec: PatchSpec, torch_version: str | None) -> Known | None:
    """A release's file by its sha256 (`digest`), pristine or patched."""
    hit = spec.releases.by_sha256(digest)
    return None if hit is None else Known(hit[0], _nearest(hit[1], torch_version), "exact")


def one_edit(edit: Edit, spec: PatchSpec) -> bool:
    """A recorded edit is exactly the patch's: one eager argument made lazy, nothing else."""
    eager, lazy = spec.eager.encode(), spec.lazy.encode()
    return edit.old.count(eager) == 1 and edit.new == edit.old.replace(eager, lazy)


def by_undo_record(source: bytes, digest: str, spec: PatchSpec, undo: UndoRecord | None) -> Known | None:
    """Bytes this tool wrote, as its undo record says (a vendor's build, read with libcst when it was
    patched): the record's after-hash is theirs and its one edit's lazy side is in them where it
    says. Patched at that release's site, with no parse: the command the tool image leaves in an
    image verifies it without libcst."""
    if undo is None or undo.graph_change.after.sha256 != digest:
        return None
    edit = undo.graph_change.edit
    if not edit.inverted().applies_to(source) or not one_edit(edit, spec):
        return None
    rows = [r for r in spec.releases.rows if r.version == undo.release]
    return Known("patched", rows[0], "site") if rows else None


def by_site(site: Site, spec: PatchSpec, torch_version: str | None) -> Known:
    _, rows = spec.releases.by_site(site.fingerprint, site.lazy)
    if not rows:
        reason = "its implicit-fallback branch matches no known release"
        return Known("unknown", None, None, reason, site_diff(spec, site.code, site.lazy, torch_version))
    # A lazy branch that patching the build's own release gives (a vendor 2.12.1 this tool patched,
    # whose branch 2.13.0 also ships) is named by that release: the build's own version. (An eager
    # branch is no release's patched one.)
    own = base_version(torch_version)
    mine = [r for r in spec.releases.rows if r.version == own and r.patched_site == site.fingerprint]
    return Known("lazy" if site.lazy else "eager", mine[0] if mine else _nearest(rows, torch_version), "site")


def classify(
    source: bytes, digest: str, spec: PatchSpec, torch_version: str | None, undo: UndoRecord | None
) -> tuple[Known, Rewritten | None]:
    """What this graph.py is (`digest`: its sha256, hashed when it was read), and the rewrite apply
    makes of it when it is eager. A known release, or bytes this tool wrote (its undo record says
    so), is settled by hashes alone; anything else takes one libcst parse, which gives the site and
    the rewrite together."""
    hit = by_hash(digest, spec, torch_version) or by_undo_record(source, digest, spec, undo)
    if hit is not None and hit.kind != "eager":
        return hit, None
    if hit is not None:
        # An exact eager release needs no parse: its one eager argument made lazy must give the table's
        # patched sha256, which the libcst rewrite gave when the table was made from the real wheel.
        assert hit.release is not None  # a hash is known by its release
        new = swapped(source, spec.eager, spec.lazy)
        if new is not None and sha256(new) == hit.release.patched_sha256:
            return hit, Rewritten(new, line_edit(source, new), Site(False, hit.release.site, ""))
        reason = f"patching it does not give the known patched bytes of torch {hit.release.version}"
        return Known("unknown", None, None, reason), None
    from patcher.core.transform import rewrite  # libcst: only when no hash is known

    outcome = rewrite(source, spec)
    if isinstance(outcome, Refused):  # an unknown file, with its branch's diff when it has one
        branch = outcome.branch
        diff = site_diff(spec, branch, outcome.lazy, torch_version) if branch else ""
        return Known("unknown", None, None, outcome.reason, diff, outcome.cause), None
    site = outcome.before if isinstance(outcome, Rewritten) else outcome.site
    known = by_site(site, spec, torch_version)
    return known, (outcome if isinstance(outcome, Rewritten) and known.kind == "eager" else None)
