"""Shared helpers: bytecode files, the tool as a separate process, the README's step, the single file and
the checkout as a user clones it."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

MODES = {"timestamp": "TIMESTAMP", "checked-hash": "CHECKED_HASH", "unchecked-hash": "UNCHECKED_HASH"}

_MAKE_PYC = r"""
import importlib.util, json, py_compile, sys
source, mode, optimize = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfile = importlib.util.cache_from_source(source, optimization=optimize or "")
py_compile.compile(source, cfile=cfile, doraise=True, optimize=optimize,
                   invalidation_mode=py_compile.PycInvalidationMode[mode])
print(cfile)
"""

_CHECK_PYC = r"""
import importlib.util, json, marshal, os, sys
from importlib import _bootstrap_external as be
pyc, source, optimize = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(pyc, "rb").read()
src = open(source, "rb").read()
flags = int.from_bytes(data[4:8], "little")
ok_header = data[:4] == importlib.util.MAGIC_NUMBER
if flags == 0:
    st = os.stat(source)
    fresh = (int.from_bytes(data[8:12], "little"), int.from_bytes(data[12:16], "little")) == (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)
else:
    fresh = data[8:16] == importlib.util.source_hash(src)
same_code = marshal.loads(data[16:]) == compile(src, source, "exec", dont_inherit=True, optimize=optimize)
print(json.dumps({"flags": flags, "magic_ok": ok_header, "fresh": fresh, "same_code": same_code}))
"""


def make_pyc(
    source: Path, mode: str, optimize: int, python: str = sys.executable, env: dict[str, str] | None = None
) -> Path:
    done = subprocess.run(
        [python, "-c", _MAKE_PYC, str(source), MODES[mode], str(optimize)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return Path(done.stdout.strip())


def check_pyc(pyc: Path, source: Path, optimize: int, python: str = sys.executable) -> dict[str, object]:
    """What the interpreter that owns this pyc sees: its mode flags, and whether it runs `source`."""
    done = subprocess.run(
        [python, "-c", _CHECK_PYC, str(pyc), str(source), str(optimize)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def tool(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """torch-lazylog in its own process (for kills and races)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "patcher", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def cache_tag() -> str:
    tag = sys.implementation.cache_tag
    assert tag is not None
    return tag


def foreign_pyc_name() -> str:
    """graph.py's pyc under a cache tag derived from the runner's and so never equal to it."""
    return f"graph.{cache_tag()}-other.pyc"


def magic() -> bytes:
    return importlib.util.MAGIC_NUMBER


def readme_snippet() -> str:
    """The README's Dockerfile snippet, as printed."""
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    match = re.search(r"```dockerfile\n(.*?)```", text, re.S)
    assert match
    return match[1]


def build_single_file(out: Path) -> Path:
    """The single file, made as the docs print it (`python3 -m patcher.pyz`), from this checkout."""
    done = subprocess.run(
        [sys.executable, "-m", "patcher.pyz", str(out)],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == str(out), done.stderr
    return out


def checkout_copy(destination: Path) -> Path:
    """What a user has after cloning: the tracked files of this checkout, without its caches. Builds
    (pip wheel, python -m build) run there, never in the checkout, where they would write build/ and
    *.egg-info under the feet of another suite reading the same tree (.ci/run runs two at once)."""
    root = Path(__file__).resolve().parent.parent
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        if name and (root / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, destination / name)
    return destination
