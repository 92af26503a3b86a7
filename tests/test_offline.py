"""Without the package registry, tests that need real data skip locally and fail under CI=true,
each with one sentence naming what could not be fetched, never with pip's raw output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# One test per kind of registry step: a release wheel, a torch venv, the tool's dependencies for
# another interpreter, and building the checkout's wheel (setuptools).
AFFECTED = [
    "tests/test_roundtrip.py::test_eager_release_round_trip[2.10.0]",
    "tests/test_e2e.py::test_real_torch_2_13_is_natively_lazy",
    "tests/test_fingerprints.py::test_the_tool_runs_on_other_pythons[0]",
    "tests/test_packaging.py::test_wheel_ships_the_patch_definitions_and_nothing_else",
]
SENTENCE = re.compile(r"could not fetch [^\n]+ from the package registry: [^\n]+")


def _offline_pytest(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "CI"))}
    env |= {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(empty),
        "PIP_CONFIG_FILE": os.devnull,
        "TORCH_LAZYLOG_CACHE": str(tmp_path / "cache"),
        "CI": "true" if ci else "",
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rsfE", "-p", "no:cacheprovider", "-m", "", *AFFECTED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("ci", [False, True], ids=["local", "ci"])
def test_without_the_registry_real_data_tests_skip_locally_and_fail_under_ci(
    ci: bool, tmp_path: Path
) -> None:
    done = _offline_pytest(tmp_path, ci)
    summary = [line for line in done.stdout.splitlines() if line.startswith(("SKIPPED", "FAILED", "ERROR"))]
    assert len(summary) == len(AFFECTED), done.stdout[-3000:]
    for line in summary:
        assert line.startswith(("FAILED", "ERROR") if ci else "SKIPPED"), line
        assert SENTENCE.search(line), line
    assert "Traceback" not in done.stdout and "pip._internal" not in done.stdout
    assert done.returncode == (1 if ci else 0), done.stdout[-3000:]
