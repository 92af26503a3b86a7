"""Real torch release files and real torch installs, fetched once and cached outside the repo.

The cache lives in $TORCH_LAZYLOG_CACHE (default ~/.cache/torch-lazylog): wheels/ holds the small
macOS wheels (their Python files are byte-identical to every other platform's), trees/ their
extracted files, venvs/ virtual environments with real torch (about 7 GB each).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

EAGER_RELEASES = [
    "2.2.0",
    "2.2.1",
    "2.2.2",
    "2.3.0",
    "2.3.1",
    "2.4.0",
    "2.4.1",
    "2.5.0",
    "2.5.1",
    "2.6.0",
    "2.7.0",
    "2.7.1",
    "2.8.0",
    "2.9.0",
    "2.9.1",
    "2.10.0",
    "2.11.0",
    "2.12.0",
    "2.12.1",
]
NATIVE_RELEASES = ["2.13.0", "2.14.0", "2.14.1", "2.15.0"]
ALL_RELEASES = EAGER_RELEASES + NATIVE_RELEASES
# Found on the package index after the first table was made (issue 28): each round-trips with the
# single file too.
ADDED_RELEASES = ["2.2.0", "2.2.1", "2.2.2", "2.3.0", "2.3.1", "2.4.0", "2.5.0", "2.7.0", "2.14.0"]
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


def pip_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PIP_CONSTRAINT"] = os.devnull  # this machine caps torch below 2.15; the wheels are data here
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    return env


def pip(args: list[str], what: str, python: str | Path = sys.executable) -> None:
    """Every download of real data goes through here: a failure is one sentence naming `what`."""
    done = subprocess.run(
        [str(python), "-m", "pip", *args], capture_output=True, text=True, env=pip_env(), check=False
    )
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip().startswith("ERROR")]
        why = (lines or done.stderr.strip().splitlines() or ["no output"])[-1].removeprefix("ERROR: ")
        raise Unavailable(f"could not fetch {what} from the package registry: {why}")


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
        pip(
            ["download", "--quiet", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
             "--platform", "macosx_11_0_arm64", "--platform", "macosx_14_0_arm64",
             f"torch=={version}", "--dest", str(directory)],
            f"the torch {version} wheel",
        )  # fmt: skip
        return sorted(directory.glob(f"torch-{version}-*.whl"))[0]


def release_file(version: str, name: str) -> bytes:
    """One file of the release as its wheel holds it (`torch/utils/file_baton.py`): the pure-Python
    files are the same on every platform, so no torch install is needed to read them."""
    with zipfile.ZipFile(wheel(version)) as archive:
        return archive.read(name)


def graph_source(version: str) -> bytes:
    return release_file(version, "torch/_inductor/graph.py")


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


def interpreter(python: str | Path) -> tuple[Path, str]:
    """What `python` is: the file its links lead to, and the version it reports (`sys.version`: the
    release, its build and its compiler). A venv's `bin/python` is only a link, which a venv made
    again under the same name points at another Python."""
    done = subprocess.run(
        [str(python), "-c", "import sys; print(sys.version)"], capture_output=True, text=True, check=True
    )
    return Path(python).resolve(), done.stdout.strip()


def _ready(venv: Path) -> bool:
    """Complete, and its `bin/python` still the Python the venv was made by (pyvenv.cfg's version):
    a venv made from another venv's `bin/python` (as Python 3.10's venv links it) would otherwise run
    another Python over site-packages that are not its own."""
    python, config = venv / "bin" / "python", venv / "pyvenv.cfg"
    if not ((venv / ".ready").exists() and python.exists() and config.exists()):
        return False
    made = re.search(r"^version\s*=\s*(\S+)", config.read_text(), re.M)
    runs = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
    )
    return made is not None and runs.returncode == 0 and runs.stdout.strip() == made[1]


def _build_venv(venv: Path, python: str | Path, requirements: list[str], what: str) -> Path:
    """A venv built once under a lock and marked ready only when complete; a half-built one is redone.
    It is made by the interpreter `python` leads to, never through another venv's link."""
    if _ready(venv):
        return venv
    with cache_lock(f"venv-{venv.name}"):
        if _ready(venv):
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        start, made_by = time.monotonic(), Path(python).resolve()
        subprocess.run([str(made_by), "-m", "venv", str(venv)], check=True, capture_output=True)
        try:
            pip(["install", "--quiet", *requirements], what, python=venv / "bin" / "python")
        except Unavailable:
            shutil.rmtree(venv, ignore_errors=True)
            raise
        (venv / ".ready").touch()
        log(f"made the venv {venv.name} ({what}) in {time.monotonic() - start:.0f} s")
        return venv


def _manylinux() -> list[str]:
    """Every manylinux tag a glibc 2.28 system takes, newest first: pip's --platform takes only the tags
    it is given (nvidia-nccl-cu13 2.28.9, which torch 2.11.0 pins, is tagged manylinux_2_18 alone)."""
    machine = platform.machine()
    return [f"manylinux_2_{minor}_{machine}" for minor in range(28, 16, -1)] + [f"manylinux2014_{machine}"]


# What torch requires but `pip download` leaves out, as pip and setuptools are already at hand.
_NOT_DOWNLOADED = ["setuptools"]


def log(line: str) -> None:
    """How long a download or a build took, in the cache's log (what a cold run spends, by part)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "images.log", "a") as out:
        out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")


def linux_wheels(version: str, minor: str) -> Path:
    """torch `version` for CPython `minor` on Linux with every dependency (the CUDA libraries, ~4 GB),
    downloaded once into the cache: the torch venvs and the stand-in images install from here, so
    the wheels that several of them share (every Python's CUDA libraries) are downloaded once."""
    directory = CACHE / "linux-wheels" / f"torch-{version}"
    ready = directory / f".complete-py{minor}"
    if ready.exists():
        return directory
    with cache_lock(f"linux-wheels-{version}"):
        if ready.exists():
            return directory
        directory.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        platforms = [arg for tag in _manylinux() for arg in ("--platform", tag)]
        pip(
            ["download", "--quiet", "--only-binary=:all:", "--python-version", minor, *platforms,
             "--dest", str(directory), f"torch=={version}", *_NOT_DOWNLOADED],
            f"torch {version} for Python {minor} with its dependencies",
        )  # fmt: skip
        ready.touch()
        log(f"downloaded torch {version} for Python {minor} in {time.monotonic() - start:.0f} s")
    return directory


def torch_venv(version: str) -> Path:
    """A venv with real `torch==version` (CUDA builds run on the CPU), installed from linux_wheels.
    Whichever interpreter built a ready one is reused: the target interpreter matters here, not the
    one running the tests."""
    for venv in sorted((CACHE / "venvs").glob(f"torch-{version}-py*")):
        if _ready(venv):
            return venv
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    wheels = linux_wheels(version, minor)
    return _build_venv(
        CACHE / "venvs" / f"torch-{version}-py{minor}",
        sys.executable,
        ["--no-index", "--find-links", str(wheels), f"torch=={version}"],
        f"torch {version}",
    )


# The torch venvs the e2e tests use, in the order the e2e tests first need them (fetch makes them in
# this order): 2.10.0 (the ROCm images' release; most tests), 2.14.1 (torch's own JIT build lock, a
# FileLock), the two newest eager releases' CUDA builds, and 2.13.0 (a CPU build, natively lazy).
VENV_RELEASES = ["2.10.0", "2.14.1", "2.11.0", "2.12.1", "2.13.0"]


def fetch() -> None:
    """Everything the suite downloads, fetched ahead (`python -m tests.realdata`): `.ci/run` starts it
    beside the tests, so the downloads overlap the tests that need none; each part is made under its
    lock, so a test that needs one waits for it rather than fetching it twice."""
    for version in VENV_RELEASES[:1]:
        torch_venv(version)
    for version in ALL_RELEASES:
        wheel(version)
    for version in VENV_RELEASES[1:]:
        torch_venv(version)


if __name__ == "__main__":
    fetch()


def tool_dependencies() -> list[str]:
    """The tool's runtime requirements, as pyproject.toml lists them (no tomllib before 3.11)."""
    text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)\]", text, re.S | re.M)
    assert block, "pyproject.toml lists no dependencies"
    return re.findall(r'"([^"]+)"', block[1])


def deps_venv(python: Path, requirements: list[str] | None = None) -> Path:
    """A venv of `python` with only the tool's dependencies (or `requirements`): the checkout runs
    from its own tree (PYTHONPATH), so no checkout is ever installed into a venv that others share."""
    requirements = requirements or tool_dependencies()
    path, version = interpreter(python)
    key = hashlib.sha256("\n".join([str(path), version, *requirements]).encode()).hexdigest()[:12]
    name = f"deps-py{version.split()[0]}-{key}"  # keyed by what it is: the Python and what it holds
    return _build_venv(CACHE / "venvs" / name, path, requirements, "the tool's dependencies")
