"""The sentences about an install's state and what a command did or would do, built from the state
and the facts (an error found while locating torch or reading its files is said where it is found).

A message is what was found (the state's description) and what was or would be done; advice is
the `next` step, rendered by the command line with the options the user gave. Dry runs speak in
the future tense.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from patcher.core.classify import Known, base_version
from patcher.core.errors import LazylogError
from patcher.core.exitcodes import ExitCode
from patcher.core.report import Advice, Next, State, Support
from patcher.core.state import LAZY, UNKNOWN_NEXT, VERIFY, Defect, has, unknown_why
from patcher.core.undo import UNDO_VERSION

if TYPE_CHECKING:
    from patcher.core.facts import Reading
    from patcher.core.installed import Snapshot, Target
    from patcher.core.spec import PatchSpec
    from patcher.core.steps import Done

# What graph.py, the undo record and RECORD are, per state: docs/states.md's table prints them.
DESCRIPTION: dict[State, str] = {
    "pristine": "graph.py is unpatched{release}, eager",
    "patched": "graph.py is patched{release} and matches its undo record",
    "apply-interrupted": "graph.py is patched{release} but RECORD still lists its original hash (an interrupted apply)",
    "ships-lazy": "graph.py ships the lazy call{release}: natively lazy",
    "record-only": "graph.py is original{release} beside the undo record of its patch (an apply stopped before "
    "graph.py, or a revert before removing the record)",
    "revert-interrupted": "graph.py is original{release} but RECORD still lists the patched hash (an interrupted revert)",
    "unrecorded": "graph.py was patched by torch-lazylog{release} but its undo record is gone; its original "
    "bytes are still known",
    "reinstalled": "graph.py is unpatched{release}, eager, beside a stale undo record of an earlier torch "
    "(torch was reinstalled over a patched one)",
    "upgraded": "graph.py ships the lazy call{release}, beside a stale undo record of an earlier torch",
    "untrusted-eager": "graph.py is unpatched{release}, eager, beside an undo record that does not describe it",
    "untrusted-patched": "graph.py is patched{release}, beside an undo record that does not describe it",
    "untrusted-lazy": "graph.py ships the lazy call{release}, beside an undo record that does not describe it",
    "newer-eager": "graph.py is unpatched{release}, eager, beside an undo record a newer torch-lazylog wrote",
    "newer-patched": "graph.py is patched{release}, beside an undo record a newer torch-lazylog wrote",
    "newer-lazy": "graph.py ships the lazy call{release}, beside an undo record a newer torch-lazylog wrote",
    "edited": "graph.py changed since apply: it is neither the file its undo record describes nor one "
    "torch-lazylog knows",
    "unknown": "graph.py is not one torch-lazylog knows",
}

DEFECT: dict[Defect, str] = {
    "record-row": "RECORD's row for graph.py names other bytes than the file's",
    "stale-unchecked-pyc": "{pyc} is a stale unchecked-hash pyc: Python runs it instead of the source",
}

# Past and future forms, for a run and a dry run.
_VERBS = {
    "patched": ("Patched", "Would patch"),
    "wrote": ("wrote", "would write"),
    "removed": ("removed", "would remove"),
    "rebuilt": ("rebuilt", "would rebuild"),
    "updated": ("updated", "would update"),
    "restored": ("Reverted", "Would revert"),
}


def described(known: Known) -> str:
    if known.release is None:
        return ""
    release = known.release.version
    return (
        f" (release {release}'s file)"
        if known.match == "exact"
        else f" (a build with release {release}'s patch site)"
    )


def _where(torch_version: str | None, torch_dir: Path) -> str:
    return f"torch {torch_version or '(unknown version)'} at {torch_dir}"


def state_text(state: State, known: Known) -> str:
    return DESCRIPTION[state].format(release=described(known))


def verify(reading: Reading, target: Target, problems: list[str], eager: bool) -> str:
    """verify's sentence: how torch formats the text, what was found, and what else is wrong."""
    state, known, newer = reading.state, reading.known, reading.newer_undo
    how = "eagerly" if eager or state not in LAZY else "lazily"
    found = f"; but {'; '.join(problems)}" if problems else ""
    if has(state, "newer") and newer is not None:
        what = newer_record(state, known, target.undo_path, newer)
    else:
        what = state_text(state, known)
    torch_version, torch_dir = target.torch_version, target.torch_dir
    return f"{_where(torch_version, torch_dir)} formats the implicit-fallback log {how}: {what}{found}"


def _bytes_alone(state: State, known: Known) -> str:
    """graph.py's bytes alone, in the states an undo record this version cannot read leaves: the
    state's description without the record it was found beside."""
    return state_text(state, known).partition(", beside ")[0]


def _newer(undo_path: Path, undo_version: int) -> str:
    return (
        f"an undo record a newer torch-lazylog wrote ({undo_path}: undo record version {undo_version}, "
        f"where this one reads up to version {UNDO_VERSION})"
    )


def newer_record(state: State, known: Known, undo_path: Path, undo_version: int) -> str:
    """verify's description of graph.py beside an undo record a newer torch-lazylog wrote: the
    record named as that tool's, never as damage, and what this version does with it."""
    return (
        f"{_bytes_alone(state, known)}, beside {_newer(undo_path, undo_version)}: "
        "this one judges graph.py alone and leaves the record as it is; run the torch-lazylog that "
        "wrote it, or a later one, to apply or revert"
    )


def newer_refused(
    command: str,
    state: State,
    known: Known,
    where: tuple[str | None, Path],
    undo_path: Path,
    undo_version: int,
) -> str:
    """apply's or revert's refusal beside a newer tool's undo record: it neither reads nor rewrites it."""
    return (
        f"Expected an undo record this torch-lazylog can read beside graph.py of {_where(*where)}, found "
        f"{_newer(undo_path, undo_version)}; {_bytes_alone(state, known)}. Nothing "
        f"was written and the record is left as it is: run the torch-lazylog that wrote it, or a later "
        f"one, to {command}"
    )


def _extras(done: Done, dry_run: bool) -> list[str]:
    said = (
        (done.undo_written and not done.graph_written, "wrote", "its undo record"),
        (done.undo_removed and not done.graph_written, "removed", "the undo record"),
        (done.record_written, "updated", "RECORD"),
        (done.pycs, "rebuilt", f"{done.pycs} pyc file(s)"),
        (done.pycs_removed, "removed", f"{done.pycs_removed} pyc file(s) of other interpreters"),
    )
    return [f"{_VERBS[verb][dry_run]} {what}" for due, verb, what in said if due]


def changed(
    command: str, state: State, known: Known, torch_version: str | None, done: Done, dry_run: bool
) -> str:
    """apply's or revert's sentence: what the install was, and what was (or would be) done."""
    what = f"torch {torch_version or '(unknown version)'}"
    if done.graph_written and command == "apply":
        lead = (
            f"{_VERBS['patched'][dry_run]} graph.py line {done.line} of {what}{described(known)}: the "
            "implicit-fallback log text is built only when the line is emitted"
        )
    elif done.graph_written:
        lead = f"{_VERBS['restored'][dry_run]} graph.py of {what} to its original bytes{described(known)}"
    elif command == "revert":
        never = "; torch-lazylog never patched it" if state in LAZY else ""
        lead = f"Nothing to revert: {state_text(state, known)}{never}"
    else:
        lead = f"{what} formats the implicit-fallback log lazily already: {state_text(state, known)}"
    if has(state, "recorded"):  # its record only follows RECORD's new row
        done = done._replace(undo_written=False)
    extras = _extras(done, dry_run)
    if done.graph_written and not has(state, "usual"):
        extras.insert(0, f"it was: {state_text(state, known)}")
    if done.no_record and (done.graph_written or done.undo_written):
        extras.append("there was no RECORD to keep")
    if dry_run:
        extras.append("nothing was written")
    elif not any(done._replace(no_record=False, line=None)):
        extras.append("nothing to do" if command == "apply" else "nothing written")
    return lead + ("; " + "; ".join(extras) if extras else "")


# The release series on the package index that have the eager call but no LazyString for the fix
# to pass, read from their wheels: 2.1.x's torch._logging has it, but graph.py does not import it.
REFUSED_SERIES: dict[str, str] = {
    "2.1": "its graph.py does not import LazyString, and the patch adds no import",
    "2.0": "it has no torch._logging, so no LazyString to import",
}


def support(spec: PatchSpec) -> Support:
    """Every release the table knows, and the refused series: for --verbose and JSON."""
    eager, native = spec.releases.versions("eager"), spec.releases.versions("native")
    refused = tuple((f"{series}.x", why) for series, why in REFUSED_SERIES.items())
    return Support(tuple(eager), tuple(native), refused)


def refused_release(torch_version: str | None, torch_dir: Path) -> str | None:
    """The refusal of a torch of a refused series (its version's major.minor), if it is of one."""
    series = ".".join(base_version(torch_version).split(".")[:2])
    if series not in REFUSED_SERIES:
        return None
    return (
        f"Expected a torch release torch-lazylog patches, found {_where(torch_version, torch_dir)}: "
        f"{REFUSED_SERIES[series]}, as in every {series}.x release. Nothing was written"
    )


def upgrade(support: Support) -> str:
    """What a refused release's user can do: only a person can choose the torch to upgrade to."""
    return (
        f"upgrade torch to a release torch-lazylog patches ({support.eager[0]} to "
        f"{support.eager[-1]}), or to {support.native[0]} or later, which is lazy as released "
        "(docs/releases.md)"
    )


def changed_site(torch_version: str | None, torch_dir: Path, reason: str) -> str:
    """A release's graph.py, not as released: what differs; the diff and the reinstall say the rest."""
    return (
        f"Expected graph.py of {_where(torch_version, torch_dir)} as released, found it changed: "
        f"{reason.rstrip('.')}. Nothing was written"
    )


def unknown(torch_version: str | None, torch_dir: Path, reason: str) -> str:
    return (
        f"Expected graph.py of a torch release or build torch-lazylog knows, found "
        f"{_where(torch_version, torch_dir)}: {reason.rstrip('.')}. Nothing was written"
    )


# What a vendor build's user can do: judge the diff, then add the build to the table.
FINGERPRINT = (
    "compare its implicit-fallback branch with the nearest release's (the diff, when one is shown); if "
    "the call and its branch are the release's, add this build's fingerprint to patches/ as "
    "docs/releases.md#a-vendor-build says; until then it is refused"
)


def edited(undo_path: Path, sha: str, after: str, before: str) -> str:
    return (
        f"Expected graph.py to be as torch-lazylog left it (sha256 {after[:16]}...) or the original "
        f"({before[:16]}...) its undo record {undo_path} names, found {sha[:16]}..., a file torch-lazylog "
        "does not know: it changed since apply, so neither its original nor its patched bytes can be "
        "restored. Nothing was written"
    )


def refusal(
    command: str, target: Target, spec: PatchSpec, snap: Snapshot, reading: Reading, vendor: bool
) -> LazylogError:
    """The one refusal of a state whose command refuses, its sentence and its next step: a file changed
    since apply (reinstall); an undo record a newer torch-lazylog wrote (that tool's to apply or
    revert); a release series the fix cannot reach (upgrade torch); a release's graph.py changed
    (reinstall it); a build this tool does not know (`vendor`: fingerprint it)."""
    state, known, where = reading.state, reading.known, (target.torch_version, target.torch_dir)
    if state == "edited" and snap.undo is not None:
        change = snap.undo.graph_change
        text = edited(target.undo_path, snap.sha256, change.after.sha256, change.before.sha256)
        return LazylogError(ExitCode.REFUSED, text, state, VERIFY[state].next)
    if has(state, "newer") and reading.newer_undo is not None:  # never read, rewritten or removed
        text = newer_refused(command, state, known, where, target.undo_path, reading.newer_undo)
        return LazylogError(ExitCode.REFUSED, text, state, VERIFY[state].next)
    refused = refused_release(*where) if known.cause == "import" else None
    supported = support(spec)
    why = unknown_why(refused is not None, vendor)  # the table's next step, by why it is unknown
    if refused is not None:
        message = refused
    else:
        said = unknown if why == "vendor-build" else changed_site
        message = said(*where, known.reason)
    step = UNKNOWN_NEXT[why]
    next: Next = (
        step if step == "reinstall" else Advice(upgrade(supported) if step == "upgrade" else FINGERPRINT)
    )
    return LazylogError(
        ExitCode.REFUSED, message, state, next, nearest_diff=known.nearest_diff or None, support=supported
    )
