"""Find the torch to patch, without importing it, and the interpreter that will load it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from patcher import interpreter
from patcher.errors import environment
from patcher.interpreter import Interpreter
from patcher.spec import PatchSpec

UNDO_NAME = "torch_lazylog.json"
# Without a dist-info (a source build, `pip install -e`), the undo record goes beside the torch
# package, never inside it.
UNDO_NAME_NO_DIST_INFO = ".torch_lazylog.json"

_VERSION_LINE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.MULTILINE)


class Target(NamedTuple):
    interpreter: Interpreter
    torch_dir: Path
    graph: Path
    dist_info: Path | None
    undo_path: Path
    torch_version: str | None

    @property
    def record_file(self) -> Path | None:
        return self.dist_info / "RECORD" if self.dist_info else None

    def undo_row_path(self) -> str | None:
        """The undo record's path as a RECORD row names it."""
        return f"{self.dist_info.name}/{UNDO_NAME}" if self.dist_info else None


def read_torch_version(torch_dir: Path, dist_info: Path | None) -> str | None:
    try:
        match = _VERSION_LINE.search((torch_dir / "version.py").read_text(encoding="utf-8"))
        if match:
            return match[1]
    except (OSError, UnicodeDecodeError):
        pass
    if dist_info is not None:
        from importlib.metadata import PathDistribution  # only when version.py says nothing

        version: str | None = PathDistribution(dist_info).version
        return version
    return None


def find_dist_info(torch_dir: Path, spec: PatchSpec) -> Path | None:
    from patcher.record import rows

    candidates = sorted(p for p in torch_dir.parent.glob("torch-*.dist-info") if p.is_dir())
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    listing = [p for p in candidates if rows(_read_or_empty(p), spec.record_path)]
    if len(listing) == 1:
        return listing[0]
    names = ", ".join(p.name for p in candidates)
    raise environment(
        f"Expected one torch dist-info beside {torch_dir}, found {len(candidates)} ({names}). "
        "Remove the stale ones (a broken uninstall leaves them) or reinstall torch."
    )


def _read_or_empty(dist_info: Path) -> bytes:
    try:
        return (dist_info / "RECORD").read_bytes()
    except OSError:
        return b""


def locate(python: str | None, torch_dir: str | None, spec: PatchSpec) -> Target:
    target_python, found = interpreter.probe(python, find_torch=torch_dir is None)
    directory = Path(os.path.abspath(torch_dir or found or "."))
    graph = directory / spec.file
    if not directory.is_dir() or not graph.is_file():
        found_text = (
            f"{directory} without it"
            if directory.is_dir()
            else f"no directory at {directory}"
            if not directory.exists()
            else f"{directory}, which is not a directory"
        )
        raise environment(
            f"Expected a torch package directory containing {spec.file}, found {found_text}. "
            "Pass --torch-dir with the `torch` directory inside site-packages."
        )
    dist_info = find_dist_info(directory, spec)
    undo = dist_info / UNDO_NAME if dist_info else directory.parent / UNDO_NAME_NO_DIST_INFO
    return Target(
        interpreter=target_python,
        torch_dir=directory,
        graph=graph,
        dist_info=dist_info,
        undo_path=undo,
        torch_version=read_torch_version(directory, dist_info),
    )
