"""What the target interpreter is, and where its `import torch` would come from (without importing it).

`path` is sys.path as the interpreter builds it from its environment and site configuration
(PYTHONPATH, PYTHONHOME, the user site, .pth files, ...), without the one entry its launch adds
(the script's directory, or the working directory for -c and -m): that entry belongs to the program
started, not to the environment, and here the program is torch-lazylog.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TypedDict


class Info(TypedDict):
    executable: str
    version: str
    cache_tag: str | None
    pycache_prefix: str | None
    path: list[str]
    torch_dir: str | None
    torch_path_entry: str | None
    error: str | None
    externally_managed: bool  # PEP 668: EXTERNALLY-MANAGED in the stdlib directory, and not a venv
    pip: bool | None  # whether `import pip` would find it (None: not looked for)


def path_entry(torch_dir: str, path: list[str]) -> str | None:
    """The first entry of `path` whose `torch` is `torch_dir` (None: a meta path finder found it)."""
    wanted = os.path.normcase(os.path.abspath(torch_dir))
    for entry in path:
        if os.path.normcase(os.path.abspath(os.path.join(entry or os.curdir, "torch"))) == wanted:
            return entry
    return None


def _find_torch(path: list[str], found: Info) -> None:
    import importlib.machinery
    import importlib.util  # only to find torch

    saved = sys.path[:]
    sys.path[:] = path
    try:
        spec = importlib.util.find_spec("torch")  # a top-level package: found, not executed
        # For the reinstall advice. The path finder alone: pip is a package on sys.path, and a meta
        # path finder (setuptools' distutils hack) makes the lookup of "pip" cost more than verify.
        found["pip"] = importlib.machinery.PathFinder.find_spec("pip", path) is not None
    except Exception as exc:  # a broken path hook or .pth: report it, do not crash
        found["error"] = f"{type(exc).__name__}: {exc}"
        return
    finally:
        sys.path[:] = saved
    if spec is not None and spec.submodule_search_locations:
        torch_dir = next(iter(spec.submodule_search_locations))
        found["torch_dir"] = torch_dir
        found["torch_path_entry"] = path_entry(torch_dir, path)


def answer(request: dict[str, object]) -> Info:
    """This interpreter's facts, sys.path being already without the launch entry; with "find_torch",
    where `import torch` would come from."""
    search = list(sys.path)
    found: Info = {
        "executable": sys.executable,
        "version": "{}.{}.{}".format(*sys.version_info[:3]),
        "cache_tag": sys.implementation.cache_tag,
        "pycache_prefix": sys.pycache_prefix,
        "path": search,
        "torch_dir": None,
        "torch_path_entry": None,
        "error": None,
        # the stdlib directory is os.py's (sysconfig's "stdlib" path, without importing sysconfig)
        "externally_managed": sys.prefix == sys.base_prefix
        and os.path.isfile(os.path.join(os.path.dirname(os.__file__), "EXTERNALLY-MANAGED")),
        "pip": None,
    }
    if request.get("find_torch"):
        _find_torch(search, found)
    return found


if __name__ == "__main__":
    print(json.dumps(answer(json.load(sys.stdin))))
