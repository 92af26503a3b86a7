"""The target interpreter: what it is, and running this package's target modules in it.

A target module runs in the target interpreter as the server's `python` would start: with the
environment torch-lazylog was given (PYTHONPATH, PYTHONHOME, PYTHONPYCACHEPREFIX, PYTHONSAFEPATH,
the user site, .pth files all count), never `-I`. It is started with `-c` and a launcher that takes
the one entry `-c` adds (the working directory, as '') off sys.path before importing anything, then
runs the module's source as __main__. So the tool's own files and working directory never decide what
is found, and however the interpreter's path is spelled, the answer is the same.

When the target is the interpreter running torch-lazylog and it started plainly (no -I, -E, -s, -S),
and the call needs no environment of its own, the module's `answer` is called in-process on sys.path
less its launch entry: no second interpreter starts, and it sees what a second one would. `call` is
the one place that decides; every target module takes a JSON request and gives a JSON answer.
"""

from __future__ import annotations

import json
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING, cast

from patcher.core.errors import Hint, Pass, environment
from patcher.core.installed import Found, Interpreter
from patcher.in_target import interp

if TYPE_CHECKING:
    import subprocess

_WORKING_PYTHON = Hint(("Nothing was written; ", Pass("--python", "a working Python 3.10+")))

# -c puts '' (the working directory) first, after site has run; nothing else makes a '' entry, since
# site turns every other entry absolute. Removed before the first import that could be shadowed.
# stdin brings the module's file name (for tracebacks), its source (read by its loader: a file, or a
# member of the single-file build's zip, which no other interpreter can open) and the module's own
# stdin, split by NULs, which neither a file name, nor source, nor JSON holds.
_LAUNCHER = (
    "import sys\n"
    "if sys.path[:1] == ['']:\n"
    "    del sys.path[0]\n"
    "import io\n"
    "name, source, text = sys.stdin.read().split('\\0', 2)\n"
    "sys.stdin = io.StringIO(text)\n"
    "exec(compile(source, name, 'exec'), {'__name__': '__main__', '__file__': name})\n"
)


def in_process(python: str | None) -> bool:
    """Whether `python` names this interpreter, started plainly (above): its own path, or another name
    in the same directory for the same file (a venv's bin/python3 for bin/python). Never resolved
    further: a venv's interpreter is a symlink to a base one whose environment differs."""
    flags = sys.flags
    if flags.isolated or flags.ignore_environment or flags.no_user_site or flags.no_site:
        return False
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        return True
    same_dir = os.path.dirname(os.path.abspath(python)) == os.path.dirname(os.path.abspath(sys.executable))
    try:
        return same_dir and os.path.samefile(python, sys.executable)
    except OSError:
        return False


def call(
    python: str | None,
    module: ModuleType,
    request: dict[str, object],
    what: str,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> dict[str, object]:
    """`module.answer(request)` in `python` (None: this tool's own), here or in a new process (above):
    never here for a module that says it needs a process of its own (`OWN_PROCESS`)."""
    own_process: bool = getattr(module, "OWN_PROCESS", False)
    if env is None and not own_process and in_process(python):
        saved = sys.path[:]
        if not getattr(sys.flags, "safe_path", False):  # the launch's entry (none under -P, PYTHONSAFEPATH)
            del sys.path[:1]
        try:
            answered: dict[str, object] = module.answer(request)
            return answered
        finally:
            sys.path[:] = saved
    executable = python or sys.executable
    done = run_module(executable, module, what, json.dumps(request), timeout, env)
    lines = done.stdout.strip().splitlines()  # the answer is the last (a sitecustomize may print before it)
    try:
        got: object = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        got = None
    if isinstance(got, dict):
        return got
    but = "it printed something else"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1].rstrip(".")
        but = f"it exited with {done.returncode} ({last})"
    raise environment(
        f"Expected {executable} to be a Python 3 interpreter that can {what}, but {but}", _WORKING_PYTHON
    )


def run_module(
    python: str, module: ModuleType, what: str, stdin: str, timeout: float, env: dict[str, str] | None
) -> subprocess.CompletedProcess[str]:
    """Run one of patcher.in_target's modules in `python`, in this process's environment (see above),
    writing no bytecode (-B): starting the target must not write into its environment (a .pth that
    imports a module, as cuda-bindings ships, would otherwise get a pyc where uv compiled none)."""
    import subprocess  # only when a second interpreter is needed

    try:
        return subprocess.run(
            [python, "-B", "-c", _LAUNCHER],
            input=_launched(module, stdin),  # never this process's stdin (PYTHONINSPECT would wait on it)
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise environment(f"Expected {python} to {what} within {timeout:.0f} s, but it timed out.") from exc
    except OSError as exc:
        if os.path.isdir(python):
            found = "a directory"
        elif not os.path.exists(python):
            found = "no such file"
        else:
            found = f"a file that could not be run ({exc.strerror})"
        raise environment(
            f"Expected a Python interpreter at {python} to {what}, found {found}",
            Hint((Pass("--python", "the interpreter of the environment that has torch"),), sentence=False),
        ) from exc


def _launched(module: ModuleType, stdin: str) -> str:
    """What the launcher reads: the module's file name and source, then the module's stdin."""
    loader = module.__spec__.loader if module.__spec__ else None
    source = loader.get_source(module.__name__) if loader and hasattr(loader, "get_source") else None
    assert source is not None and module.__file__ is not None, f"{module.__name__} has no source to run"
    return "\0".join((module.__file__, source, stdin))


def _fits(value: object, hint: object) -> bool:
    """Whether a JSON value is of an annotation of interp.Info: str, bool, None, list[str], or a union."""
    import types
    import typing

    if isinstance(hint, types.UnionType):
        return any(_fits(value, option) for option in typing.get_args(hint))
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    return value is None if hint is type(None) else isinstance(value, hint)  # type: ignore[arg-type]


def _checked(answer: dict[str, object], executable: str) -> interp.Info:
    """The probe's answer, checked against interp.Info key by key: the one place it is. What another
    program (or a Python running another tool's copy of the module) answered is one sentence."""
    import typing

    hints = typing.get_type_hints(interp.Info)
    wrong = [key for key, hint in hints.items() if key not in answer or not _fits(answer[key], hint)]
    if wrong:
        said = json.dumps(answer)
        said = said if len(said) <= 200 else said[:200] + "..."
        raise environment(
            f"Expected {executable} to answer where its torch is with {', '.join(hints)}, but it "
            f"answered {said} (wrong or missing: {', '.join(wrong)})",
            _WORKING_PYTHON,
        )
    return cast(interp.Info, answer)


def probe(python: str | None, find_torch: bool) -> tuple[Interpreter, Found]:
    """The interpreter's facts and, with find_torch, where its `import torch` comes from."""
    answer = call(python, interp, {"find_torch": find_torch}, "report where its torch is")
    info = _checked(answer, python or sys.executable)
    interpreter = Interpreter(
        executable=info["executable"] or python or sys.executable,
        version=info["version"],
        cache_tag=info["cache_tag"],
        pycache_prefix=info["pycache_prefix"],
        path=tuple(info["path"]),
        externally_managed=info["externally_managed"],
        has_pip=info["pip"],
    )
    return interpreter, Found(info["torch_dir"], info["torch_path_entry"], info["error"])
