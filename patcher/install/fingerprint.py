"""Fingerprints of real releases, generated from their wheels (the maintainer's `fingerprint` command)."""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

from patcher.core import steps
from patcher.core.errors import LazylogError
from patcher.core.exitcodes import ExitCode
from patcher.core.hashes import sha256, version_key
from patcher.core.outcome import Refused, Rewritten, Unchanged
from patcher.core.report import Report
from patcher.core.spec import PatchSpec, Release, Releases
from patcher.core.transform import rewrite, site_of

_WHEEL_VERSION = re.compile(r"^torch-(?P<version>[^-]+)-")


def graph_from_wheel(wheel: Path, spec: PatchSpec) -> tuple[str, bytes]:
    match = _WHEEL_VERSION.match(wheel.name)
    if match is None:
        raise LazylogError(
            ExitCode.USAGE,
            f"Expected a torch wheel named torch-<version>-...whl, found {wheel.name}. Pass the "
            "wheels of torch releases (e.g. `pip download --no-deps torch==2.10.0`)",
        )
    try:
        with zipfile.ZipFile(wheel) as archive:
            return match["version"], archive.read(spec.graph_row)
    except zipfile.BadZipFile as exc:
        raise LazylogError(
            ExitCode.USAGE, f"Expected {wheel} to be a wheel (a zip archive), but it is not ({exc})"
        ) from exc
    except KeyError as exc:
        raise LazylogError(
            ExitCode.USAGE, f"Expected {wheel} to contain {spec.graph_row}, but it does not"
        ) from exc


def release_row(version: str, source: bytes, spec: PatchSpec) -> tuple[Release, dict[str, str]]:
    outcome = rewrite(source, spec)
    if isinstance(outcome, Refused):
        raise LazylogError(
            ExitCode.REFUSED, f"torch {version}: cannot fingerprint graph.py: {outcome.reason}."
        )
    if isinstance(outcome, Unchanged):
        row = Release(version, "native", sha256(source), len(source), outcome.site.fingerprint)
        return row, {outcome.site.fingerprint: outcome.site.code}
    assert isinstance(outcome, Rewritten)
    after = site_of(outcome.source, spec)
    assert not isinstance(after, Refused), after
    row = Release(
        version=version,
        kind="eager",
        sha256=sha256(source),
        size=len(source),
        site=outcome.before.fingerprint,
        patched_sha256=sha256(outcome.source),
        patched_size=len(outcome.source),
        patched_site=after.fingerprint,
    )
    return row, {
        outcome.before.fingerprint: outcome.before.code,
        after.fingerprint: after.code,
    }


def build_releases(sources: Iterable[tuple[str, bytes]], spec: PatchSpec) -> Releases:
    rows: dict[str, Release] = {}
    code: dict[str, str] = {}
    for version, source in sources:
        row, site_code = release_row(version, source, spec)
        rows[version] = row
        code |= site_code
    ordered = tuple(rows[v] for v in sorted(rows, key=version_key))
    return Releases(rows=ordered, site_code=code)


def releases_table(releases: Releases) -> str:
    """docs/releases.md's supported-release table, rendered from the patch definition."""
    lines = [
        "| torch | graph.py as released | `apply` does | sha256 of graph.py (first 16) |",
        "|---|---|---|---|",
    ]
    for row in releases.rows:
        kind, does = ("eager", "patches (one line)") if row.kind == "eager" else ("natively lazy", "nothing")
        lines.append(f"| {row.version} | {kind} | {does} | `{row.sha256[:16]}` |")
    return "\n".join(lines) + "\n"


def command(wheels: list[Path], output: Path | None, check: bool, markdown: bool) -> Report:
    """The `fingerprint` command: its report, whose `table` is the table made when neither --check
    nor --output was given (printed alone as text; with --json, in the JSON)."""
    from patcher.install import definitions, fsio

    spec = definitions.load()
    releases = build_releases((graph_from_wheel(w, spec) for w in wheels), spec)
    text = json.dumps(releases.to_json(spec.id), indent=2, sort_keys=True) + "\n"
    code, changed, shown = ExitCode.OK, False, None
    if check:
        shipped = json.dumps(spec.releases.to_json(spec.id), indent=2, sort_keys=True) + "\n"
        message = f"The shipped releases table matches {len(wheels)} wheel(s)"
        if shipped != text:
            code = ExitCode.DIFFERS
            message = "The shipped releases table differs from the one these wheels give"
    elif output is not None:
        fsio.write_all([steps.Write(output, text.encode(), 0o644, -1, -1)], "fingerprint")
        changed, message = True, f"Wrote {len(releases.rows)} release(s) to {output}"
    else:
        shown = releases_table(releases) if markdown else text
        versions = ", ".join(f"{r.version} ({r.kind})" for r in releases.rows)
        message = f"Fingerprinted {len(releases.rows)} release(s): {versions}"
    return Report("fingerprint", "unknown", changed, message, code, table=shown)
