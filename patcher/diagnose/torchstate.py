"""The torch a process loaded, read as verify reads a `--torch-dir` tree: from its bytes alone.

The process's interpreter is never run (from the host it may not even run): the pycs are judged for
the cache tag of the Python whose site directory holds torch, and a hash-based pyc's source hash is
computed here.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from patcher.core.errors import LazylogError
from patcher.core.exitcodes import ExitCode
from patcher.core.installed import Interpreter, Target
from patcher.core.report import Report
from patcher.core.spec import PatchSpec
from patcher.diagnose.model import ProcessFacts, TorchFacts
from patcher.install.locate import dist_version, find_dist_info, read_torch_version

_VERSION = re.compile(r"/python(3)\.(\d+)t?/(?:site|dist)-packages/torch$")


def cache_tag(torch_dir: str) -> str | None:
    """cpython-3XX from the site directory torch lives in (`.../lib/python3.12/site-packages`)."""
    match = _VERSION.search(torch_dir)
    return f"cpython-{match[1]}{match[2]}" if match else sys.implementation.cache_tag


def target(process: ProcessFacts, spec: PatchSpec) -> Target:
    assert process.torch_dir is not None and process.torch_seen_at is not None
    directory = Path(process.torch_seen_at)
    dist_info = find_dist_info(directory, spec)
    distribution = dist_version(dist_info)
    reader = Interpreter(
        executable=sys.executable,
        version=".".join(map(str, sys.version_info[:3])),
        cache_tag=cache_tag(process.torch_dir),
        pycache_prefix=process.pycache_prefix,
    )  # nothing is compiled: a hash-based pyc's source hash is computed here, with its own magic number
    return Target(
        interpreter=reader,
        torch_dir=directory,
        graph_py=directory / spec.file,
        dist_info=dist_info,
        torch_version=read_torch_version(directory, distribution),
        dist_version=distribution,
        owner=process.interpreter,
    )


def read_torch(process: ProcessFacts, spec: PatchSpec, locked: set[tuple[int, int]]) -> TorchFacts:
    """verify's reading of the torch it loaded, without taking the install's lock (a stopped apply
    would hold diagnose forever); `locked`: the (st_dev, st_ino) of the files /proc/locks shows
    locked, so a reading taken while an apply or revert held the torch directory says so."""
    from patcher.install import reading

    changed, version, held = None, None, False
    try:
        st = os.stat(process.torch_seen_at or "")
        held = (st.st_dev, st.st_ino) in locked
        found = target(process, spec)
        version, changed = found.torch_version, os.stat(found.graph_py).st_ctime
        report = reading.verify_unlocked(found, spec)
    except LazylogError as exc:
        return TorchFacts(
            Report("verify", exc.state, False, exc.text(), exc.code, torch_version=version), changed, held, ""
        )
    except OSError as exc:  # render says it, with the file it could not read
        failed = Report("verify", "unknown", False, "", ExitCode.ENVIRONMENT)
        return TorchFacts(failed, None, held, f"{exc.strerror or exc}")
    return TorchFacts(report, changed, held, "")
