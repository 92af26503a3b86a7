"""diagnose from a Python other than the server's: a hash-based pyc is judged with its own Python's key.

A server's torch patched by apply, its graph.py's bytecode hash-based (unchecked at -O0, checked at
-O1, as uv or SOURCE_DATE_EPOCH make it), read by the tool run under every other CPython on this
machine. The source hash of a hash-based pyc is keyed by the magic number of the Python that wrote it
(and is SipHash-2-4 before 3.11, SipHash-1-3 from it): hashed with the reader's own key, every such
pyc reads stale, and a stale unchecked one would read as eager.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests import realdata
from tests.conftest import torch_venv
from tests.diagnosing import diagnose_json
from tests.helpers import ROOT, venv_tool

TAG = "diagnose-other-python"  # an argument that marks this suite's processes

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("shared_torch_venvs")]

HASH_PYCS = """
import importlib.util, py_compile, sys
graph = sys.argv[1]
for level, mode in ((0, py_compile.PycInvalidationMode.UNCHECKED_HASH), (1, py_compile.PycInvalidationMode.CHECKED_HASH)):
    py_compile.compile(graph, importlib.util.cache_from_source(graph, optimization=level or ""),
                       doraise=True, optimize=level, invalidation_mode=mode)
"""


def _others() -> list[Path]:
    others = realdata.other_pythons()
    if not others and realdata.IN_CI:
        pytest.fail("this machine has no CPython besides the one running the tests")
    return others or [Path("none")]


def test_a_patched_torch_with_hash_pycs_reads_lazy_from_every_other_python(tmp_path: Path) -> None:
    venv = torch_venv("2.10.0")
    python = venv / "bin" / "python"
    (graph,) = venv.glob("lib/python3.*/site-packages/torch/_inductor/graph.py")
    cache = graph.parent / "__pycache__"
    kept = {p: p.read_bytes() for p in cache.glob("graph.*")}
    assert venv_tool(venv, "revert")[0] == 0  # an interrupted run elsewhere may have left it patched
    server = None
    try:
        subprocess.run([str(python), "-c", HASH_PYCS, str(graph)], check=True)
        code, report = venv_tool(venv, "apply")
        assert code == 0 and report["state"] == "patched", report
        assert {"unchecked-hash", "checked-hash"} <= {p["mode"] for p in report["pycs"]}, report
        ready = tmp_path / "ready"
        server = subprocess.Popen(
            [str(python), "-c", f"import torch, pathlib, time; pathlib.Path({str(ready)!r}).touch(); time.sleep(600)", TAG],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert server.poll() is None and time.monotonic() < deadline, "the server never imported torch"
            time.sleep(0.2)
        for other in _others():
            if other.name == "none":
                pytest.skip("this machine has no CPython besides the one running the tests")
            tool = realdata.deps_venv(other, [*realdata.tool_dependencies(), "py-spy>=0.4"])
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            code, report, _ = diagnose_json(str(server.pid), python=tool / "bin" / "python", env=env)
            (entry,) = report["processes"]
            assert (code, entry["finding"], entry["state"]) == (0, "lazy", "patched"), (other.name, report)
    finally:
        if server is not None:
            server.kill()
            server.wait(timeout=30)
        assert venv_tool(venv, "revert")[0] == 0
        for stale in set(cache.glob("graph.*")) - set(kept):
            stale.unlink()
        for path, data in kept.items():  # the venv's own pycs, as pip wrote them
            path.write_bytes(data)
