"""Find the torch to patch, without importing it, and the interpreter that will load it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from patcher.errors import environment
from patcher.spec import PatchSpec

UNDO_NAME = "torch_lazylog.json"
# Without a dist-info (a source build, `pip install -e`), the undo record goes beside the torch
# package, never inside it.
UNDO_NAME_NO_DIST_INFO = ".torch_lazylog.json"

# Runs in the target interpreter. find_spec of a top-level package does not execute it.
_PROBE = r"""
import importlib.util, json, sys
info = {
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "cache_tag": sys.implementation.cache_tag,
    "magic": importlib.util.MAGIC_NUMBER.hex(),
    "pycache_prefix": getattr(sys, "pycache_prefix", None),
    "torch_dir": None,
    "error": None,
}
if sys.argv[1:] == ["--find-torch"]:
    try:
        spec = importlib.util.find_spec("torch")
    except Exception as exc:
        info["error"] = "%s: %s" % (type(exc).__name__, exc)
    else:
        if spec is not None and spec.submodule_search_locations:
            info["torch_dir"] = list(spec.submodule_search_locations)[0]
print(json.dumps(info))
"""

_VERSION_LINE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.MULTILINE)


@dataclass(frozen=True)
class Interpreter:
    executable: str
    version: str
    cache_tag: str | None
    magic: str
    pycache_prefix: str | None


@dataclass(frozen=True)
class Target:
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


def run_script(
    python: str, script: str, what: str, args: list[str] | None = None, stdin: str | None = None
) -> str:
    """Run a short script in the target interpreter and return its stdout; `what` names the job."""
    try:
        done = subprocess.run(
            [python, "-c", script, *(args or [])],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "it timed out"
        raise environment(
            f"Expected a Python interpreter at {python} to {what}, but it could not be run ({why}); "
            "pass --python with the interpreter of the environment that has torch."
        ) from exc
    if done.returncode != 0:
        raise environment(
            f"Expected {python} to {what}, but it exited with {done.returncode}: "
            f"{done.stderr.strip()[-500:]}. Nothing was written; pass --python with a working Python 3 interpreter."
        )
    return done.stdout


def probe(python: str, find_torch: bool) -> tuple[Interpreter, str | None]:
    stdout = run_script(python, _PROBE, "run a short probe script", ["--find-torch"] if find_torch else [])
    info = json.loads(stdout)
    interpreter = Interpreter(
        executable=info["executable"] or python,
        version=info["version"],
        cache_tag=info["cache_tag"],
        magic=info["magic"],
        pycache_prefix=info["pycache_prefix"],
    )
    if find_torch and info["torch_dir"] is None:
        why = f" ({info['error']})" if info["error"] else ""
        raise environment(
            f"Expected `import torch` to find torch for {interpreter.executable} "
            f"(Python {interpreter.version}), but it found none{why}. "
            "Install torch there, or pass --python or --torch-dir to point at the right one."
        )
    return interpreter, info["torch_dir"]


def read_torch_version(torch_dir: Path, dist_info: Path | None) -> str | None:
    try:
        match = _VERSION_LINE.search((torch_dir / "version.py").read_text(encoding="utf-8"))
        if match:
            return match[1]
    except (OSError, UnicodeDecodeError):
        pass
    if dist_info is not None:
        try:
            for line in (dist_info / "METADATA").read_text(encoding="utf-8").splitlines():
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
        except (OSError, UnicodeDecodeError):
            pass
    return None


def find_dist_info(torch_dir: Path, spec: PatchSpec) -> Path | None:
    candidates = sorted(p for p in torch_dir.parent.glob("torch-*.dist-info") if p.is_dir())
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    row = (spec.record_path + ",").encode()
    listing = [p for p in candidates if row in _read_or_empty(p / "RECORD")]
    if len(listing) == 1:
        return listing[0]
    names = ", ".join(p.name for p in candidates)
    raise environment(
        f"Expected one torch dist-info beside {torch_dir}, found {len(candidates)} ({names}). "
        "Remove the stale ones (a broken uninstall leaves them) or reinstall torch."
    )


def _read_or_empty(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def locate(python: str | None, torch_dir: str | None, spec: PatchSpec) -> Target:
    interpreter, found = probe(python or sys.executable, find_torch=torch_dir is None)
    directory = Path(os.path.abspath(torch_dir or found or "."))
    graph = directory / spec.file
    if not directory.is_dir() or not graph.is_file():
        raise environment(
            f"Expected a torch package directory containing {spec.file}, found {directory} "
            f"{'without it' if directory.is_dir() else 'is not a directory'}. "
            "Pass --torch-dir with the `torch` directory inside site-packages."
        )
    dist_info = find_dist_info(directory, spec)
    undo = dist_info / UNDO_NAME if dist_info else directory.parent / UNDO_NAME_NO_DIST_INFO
    return Target(
        interpreter=interpreter,
        torch_dir=directory,
        graph=graph,
        dist_info=dist_info,
        undo_path=undo,
        torch_version=read_torch_version(directory, dist_info),
    )
