"""Shared helpers: bytecode files, the tool as a separate process (here or aimed at a venv), the README's
step and JSON fields, the single file, the checkout as a user clones it, the write steps a crash can
stop, and the case counts the README states."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.docs import block

MODES = {"timestamp": "TIMESTAMP", "checked-hash": "CHECKED_HASH", "unchecked-hash": "UNCHECKED_HASH"}
ROOT = Path(__file__).resolve().parent.parent
OPT_LEVELS = [0, 1, 2]
# 3 modes x 3 optimisation levels, each checked after apply and after revert.
BYTECODE_CASES = len(MODES) * len(OPT_LEVELS)
# The mutation fuzzer's cases: the suite's, and `pytest -m fuzz_long`'s (the README's Safety table gives both).
FUZZ_CASES = 300
FUZZ_LONG_CASES = 5000

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


def readme_json_fields() -> list[str]:
    table = block("json-fields")
    return [f for row in re.findall(r"^\| (`[^|]+) \|", table, re.M) for f in re.findall(r"`(\w+)`", row)]


def venv_tool(venv: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """This checkout's torch-lazylog (the runner's), aimed at the venv's interpreter with --python."""
    done = subprocess.run(
        [sys.executable, "-m", "patcher", *args, "--python", str(venv / "bin" / "python"), "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.stdout, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def probe_under_coverage(python: Path, params: dict[str, object], cwd: Path) -> dict[str, Any]:
    """patcher.in_target.inductor run by file path in `python` under coverage (found through PYTHONPATH,
    nothing is installed there), so that the module that only ever runs beside torch is measured;
    it compiles in `cwd`, as the runtime check has it compile in its throw-away cache."""
    import coverage

    from patcher.in_target import inductor

    assert inductor.__file__ is not None
    env = dict(os.environ, PYTHONPATH=str(Path(coverage.__file__).parent.parent), TMPDIR=str(cwd))
    env |= {"TORCHINDUCTOR_CACHE_DIR": str(cwd / "inductor"), "TRITON_CACHE_DIR": str(cwd / "triton")}
    env |= {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
    done = subprocess.run(
        [str(python), "-m", "coverage", "run", f"--rcfile={ROOT / 'pyproject.toml'}", inductor.__file__],
        input=json.dumps({"cwd": str(cwd)} | params), capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _names(tag: str) -> list[str]:
    return ["torch_lazylog.json", "graph.py", f"graph.{tag}.opt-2.pyc", f"graph.{tag}.pyc", "RECORD"]


def crash_points(command: str) -> list[str]:
    """Every write step, in order: each new file staged (written, fsynced), then each moved into
    place or removed. apply writes the undo record first; revert removes it last."""
    names = _names(cache_tag())
    staged = names if command == "apply" else names[1:]
    points = [f"{stage}:{name}" for name in staged for stage in ("write", "fsync")]
    for name in staged[:-1]:  # RECORD is moved last of the writes
        points += [f"replace:{name}", f"replaced:{name}"]
    if command == "apply":
        points += [f"unlink:{foreign_pyc_name()}", f"unlinked:{foreign_pyc_name()}"]
    points += ["replace:RECORD", "replaced:RECORD"]
    if command == "revert":
        points += ["unlink:torch_lazylog.json", "unlinked:torch_lazylog.json"]
    return points
