"""Real torch release files and real torch installs, fetched once and cached outside the repo.

The cache lives in $TORCH_LAZYLOG_CACHE (default ~/.cache/torch-lazylog): wheels/ holds the small
macOS wheels (their Python files are byte-identical to every other platform's), trees/ their
extracted files, venvs/ virtual environments with real torch (about 7 GB each).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

EAGER_RELEASES = [
    "2.4.1",
    "2.5.1",
    "2.6.0",
    "2.7.1",
    "2.8.0",
    "2.9.0",
    "2.9.1",
    "2.10.0",
    "2.11.0",
    "2.12.0",
    "2.12.1",
]
NATIVE_RELEASES = ["2.13.0", "2.14.1", "2.15.0"]
ALL_RELEASES = EAGER_RELEASES + NATIVE_RELEASES
# From the field notes (NOTES.md), independent of this project's own tables.
GRAPH_SHA256_2_10_0_PREFIX = "003fb433971d6595"

CACHE = Path(os.environ.get("TORCH_LAZYLOG_CACHE", Path.home() / ".cache" / "torch-lazylog"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


class Unavailable(Exception):
    """Real data could not be had: a failure under CI=true, a skip elsewhere."""


@contextlib.contextmanager
def cache_lock(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _pip_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PIP_CONSTRAINT"] = os.devnull  # this machine caps torch below 2.15; the wheels are data here
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    return env


def wheel(version: str) -> Path:
    directory = CACHE / "wheels"
    found = sorted(directory.glob(f"torch-{version}-*.whl"))
    if found:
        return found[0]
    with cache_lock("wheels"):
        found = sorted(directory.glob(f"torch-{version}-*.whl"))
        if found:
            return found[0]
        directory.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
            "--python-version", "3.11", "--platform", "macosx_11_0_arm64", "--platform", "macosx_14_0_arm64",
            f"torch=={version}", "--dest", str(directory),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, env=_pip_env(), check=False)
        found = sorted(directory.glob(f"torch-{version}-*.whl"))
        if done.returncode != 0 or not found:
            raise Unavailable(f"could not download the torch {version} wheel: {done.stderr.strip()[-400:]}")
        return found[0]


def graph_source(version: str) -> bytes:
    with zipfile.ZipFile(wheel(version)) as archive:
        return archive.read("torch/_inductor/graph.py")


def _extracted(version: str) -> Path:
    tree = CACHE / "trees" / f"torch-{version}"
    if (tree / ".complete").exists():
        return tree
    with cache_lock("trees"):
        if (tree / ".complete").exists():
            return tree
        shutil.rmtree(tree, ignore_errors=True)
        wanted = ("torch/__init__.py", "torch/version.py", "torch/_inductor/graph.py")
        with zipfile.ZipFile(wheel(version)) as archive:
            for name in archive.namelist():
                if name in wanted or (name.startswith("torch-") and ".dist-info/" in name):
                    archive.extract(name, tree)
        (tree / ".complete").touch()
        return tree


def release_tree(version: str, destination: Path) -> Path:
    """A site-packages holding the release's torch/{__init__,version}.py, _inductor/graph.py and
    its real dist-info (RECORD, METADATA, ...). Returns the torch package directory."""
    source = _extracted(version)
    shutil.copytree(source, destination, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    return destination / "torch"


def other_pythons() -> list[Path]:
    """CPython interpreters of other minor versions on this machine (pyenv's, when present)."""
    found: dict[str, Path] = {}
    roots = [Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions", Path("/usr/bin")]
    for root in roots:
        for candidate in sorted(root.glob("*/bin/python3.1[0-9]")) + sorted(root.glob("python3.1[0-9]")):
            minor = candidate.name
            if minor != f"python3.{sys.version_info.minor}" and os.access(candidate, os.X_OK):
                found.setdefault(minor, candidate)
    return [found[k] for k in sorted(found)]


def _ready(venv: Path) -> bool:
    return (venv / ".ready").exists() and (venv / "bin" / "python").exists()


def torch_venv(version: str) -> Path:
    """A venv with real `torch==version` from the registry (CUDA builds run on the CPU)."""
    venv = CACHE / "venvs" / f"torch-{version}-py{sys.version_info.major}.{sys.version_info.minor}"
    if _ready(venv):
        return venv
    with cache_lock(f"venv-{version}"):
        if _ready(venv):
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"torch=={version}"],
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                raise Unavailable(
                    f"could not build a venv with torch {version}: {done.stderr.strip()[-400:]}"
                )
        (venv / ".ready").touch()
        return venv
