"""The target interpreter: what it is, and running this package's target modules in it.

When the target is the interpreter running torch-lazylog, the modules of patcher.target are called
in-process (no second interpreter starts). Otherwise each runs by file path with `-I`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import ModuleType
from typing import NamedTuple

from patcher.errors import environment


class Interpreter(NamedTuple):
    executable: str
    version: str
    cache_tag: str | None
    magic: str
    pycache_prefix: str | None
    in_process: bool = False


def is_running(python: str | None) -> bool:
    """Whether `python` names the interpreter running this code (a venv's own path, not resolved)."""
    return python is None or os.path.abspath(python) == os.path.abspath(sys.executable)


def run_module(
    python: str,
    module: ModuleType,
    what: str,
    args: list[str] | None = None,
    stdin: str | None = None,
    timeout: float = 300,
    **kwargs: object,
) -> subprocess.CompletedProcess[str]:
    """Run one of patcher.target's modules in `python` by its file path, isolated (-I) and writing no
    bytecode (-B): starting the target interpreter must not write into its environment (a .pth that
    imports a module, as cuda-bindings ships, would otherwise get a pyc where uv compiled none)."""
    assert module.__file__ is not None
    command = [python, "-I", "-B", module.__file__, *(args or [])]
    try:
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
        )
    except subprocess.TimeoutExpired as exc:
        raise environment(f"Expected {python} to {what} within {timeout:.0f} s, but it timed out.") from exc
    except OSError as exc:
        raise environment(_unrunnable(python, what, exc)) from exc


def _unrunnable(python: str, what: str, exc: OSError) -> str:
    if os.path.isdir(python):
        found = "a directory"
    elif not os.path.exists(python):
        found = "no such file"
    else:
        found = f"a file that could not be run ({exc.strerror})"
    return (
        f"Expected a Python interpreter at {python} to {what}, found {found}; "
        "pass --python with the interpreter of the environment that has torch."
    )


def output(python: str, done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1].rstrip(".")
        raise environment(
            f"Expected {python} to be a Python 3 interpreter that can {what}, but it exited with "
            f"{done.returncode} ({last}). Nothing was written; pass --python with a working Python 3.10+."
        )
    return done.stdout


def probe(python: str | None, find_torch: bool) -> tuple[Interpreter, str | None]:
    from patcher.target import interp

    if is_running(python):
        info = interp.info(find_torch)
    else:
        assert python is not None
        what = "report where its torch is"
        done = run_module(python, interp, what, ["--find-torch"] if find_torch else [])
        try:
            info = json.loads(output(python, done, what))
        except ValueError as exc:
            raise environment(
                f"Expected {python} to be a Python 3 interpreter, but it printed something else. "
                "Nothing was written; pass --python with a working Python 3.10+."
            ) from exc
    interpreter = Interpreter(
        executable=str(info["executable"] or python),
        version=str(info["version"]),
        cache_tag=info["cache_tag"],
        magic=str(info["magic"]),
        pycache_prefix=info["pycache_prefix"],
        in_process=is_running(python),
    )
    if find_torch and info["torch_dir"] is None:
        why = f" ({info['error']})" if info["error"] else ""
        raise environment(
            f"Expected `import torch` to find torch for {interpreter.executable} "
            f"(Python {interpreter.version}), but it found none{why}. "
            "Install torch there, or pass --python or --torch-dir to point at the right one."
        )
    return interpreter, info["torch_dir"]
