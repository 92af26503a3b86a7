"""The patch definition (patches/*.json): what to change, and the fingerprints of real releases."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal, NamedTuple

from patcher.core.errors import environment
from patcher.core.report import JsonValue

PATCH_NAME = "lazy_implicit_fallback.json"
SPEC_VERSION = 1

# The one vocabulary for what a graph.py is, eager or lazy: an eager release's file or branch; lazy as
# torch-lazylog patches it (no release ships those bytes); lazy as released (2.13.0 on); not known.
# A release row is "eager" or "native".
Kind = Literal["eager", "patched", "native", "unknown"]


class Release(NamedTuple):
    version: str
    kind: Kind  # "eager" or "native": graph.py as the release ships it
    sha256: str
    size: int
    site: str
    patched_sha256: str | None = None
    patched_size: int | None = None
    patched_site: str | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """The row as the releases table lists it: a native row has no patched fields."""
        return {name: value for name, value in self._asdict().items() if value is not None}


class Releases(NamedTuple):
    """The generated half of a patch definition: one row per real release, and each site's code."""

    rows: tuple[Release, ...]
    site_code: dict[str, str]

    def by_sha256(self, sha: str) -> tuple[Kind, list[Release]] | None:
        """Releases whose graph.py (pristine or patched) has this hash; 2.12.0 and 2.12.1 share one."""
        pristine = [row for row in self.rows if row.sha256 == sha]
        if pristine:
            return pristine[0].kind, pristine
        patched = [row for row in self.rows if row.patched_sha256 == sha]
        return ("patched", patched) if patched else None

    def by_site(self, site: str, lazy: bool) -> tuple[Kind, list[Release]]:
        """Releases whose branch has this fingerprint, and what the branch is of them."""
        if not lazy:
            return "eager", [r for r in self.rows if r.site == site and r.kind == "eager"]
        # A lazy branch identical to a release that ships it is natively lazy, even when it is also
        # what patching an older release gives (2.12 patched == 2.13): only an undo record tells.
        native = [r for r in self.rows if r.site == site and r.kind == "native"]
        if native:
            return "native", native
        return "patched", [r for r in self.rows if r.patched_site == site]

    def versions(self, kind: Kind) -> list[str]:
        return [r.version for r in self.rows if r.kind == kind]

    def to_json(self, patch_id: str) -> dict[str, JsonValue]:
        return {
            "generated_by": "torch-lazylog fingerprint",
            "patch": patch_id,
            "releases": [r.to_json() for r in self.rows],
            "sites": dict(sorted(self.site_code.items())),
            "version": SPEC_VERSION,
        }


class PatchSpec(NamedTuple):
    id: str
    file: str  # relative to the torch package directory
    scope: str
    call: str
    message: str  # the string literal exactly as in the source
    eager: str
    lazy: str
    import_module: str
    import_name: str
    releases: Releases

    @property
    def graph_row(self) -> str:
        """graph.py's path as its row in the dist-info's RECORD names it (relative to site-packages)."""
        return "torch/" + self.file


def parse(name: str, read: Callable[[str], str]) -> PatchSpec:
    """The definition `name` and its releases table, each text got from `read` (install.definitions
    reads them from the installed package, a checkout or the single file's zip)."""
    try:
        raw = json.loads(read(name))
        if raw.get("version") != SPEC_VERSION:
            raise ValueError(f"unsupported version {raw.get('version')!r}")
        table = json.loads(read(raw["releases_file"]))
        if not isinstance(table, dict) or not isinstance(table.get("releases"), list):
            raise ValueError("the releases table is not an object with a list of releases")
        rows = tuple(Release(**row) for row in table["releases"])
        return PatchSpec(
            id=raw["id"],
            file=raw["file"],
            scope=raw["scope"],
            call=raw["call"],
            message=raw["message"],
            eager=raw["eager"],
            lazy=raw["lazy"],
            import_module=raw["requires_import"]["module"],
            import_name=raw["requires_import"]["name"],
            releases=Releases(rows=rows, site_code=dict(table["sites"])),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:  # pragma: no cover - a broken install
        raise environment(
            f"Expected the patch definition {name} shipped with torch-lazylog to be readable, but {exc}. "
            "The tool's own install is damaged: reinstall torch-lazylog (not torch)"
        ) from exc
