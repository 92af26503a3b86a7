""".ci/disk.py, which gives the scheduled tier's runner its size: it samples what given trees and the
Docker engine hold while a run goes on, and prints the peak as .ci/run's last line."""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.runner_independent

ROOT = Path(__file__).resolve().parent.parent
DISK = ROOT / ".ci" / "disk.py"


def _until(log: Path, tree: Path, seen: Callable[[int], bool]) -> None:
    """Wait for the watcher's next sample of `tree` that `seen` accepts (a sample takes the engine's
    `docker system df` too: seconds on a loaded machine)."""
    start = len(log.read_text().splitlines()) if log.exists() else 0
    for _ in range(600):
        lines = log.read_text().splitlines()[start:] if log.exists() else []
        if any(seen(json.loads(line)["bytes"][str(tree)]) for line in lines):
            return
        time.sleep(0.1)
    raise AssertionError(f"no such sample of {tree} in a minute")


def test_the_peak_is_the_largest_sample_of_a_tree_that_grew_and_shrank(tmp_path: Path) -> None:
    tree, log = tmp_path / "cache", tmp_path / "disk.log"
    tree.mkdir()
    watcher = subprocess.Popen([sys.executable, str(DISK), "watch", str(log), "--every", "0.2", str(tree)])
    try:
        _until(log, tree, lambda taken: taken < 1_000_000)
        (tree / "wheel").write_bytes(b"\1" * 30_000_000)
        (tree / "link").hardlink_to(tree / "wheel")  # one file, counted once
        _until(log, tree, lambda taken: taken >= 30_000_000)
        (tree / "link").unlink()
        (tree / "wheel").unlink()
        _until(log, tree, lambda taken: taken < 1_000_000)
    finally:
        watcher.send_signal(signal.SIGTERM)
        assert watcher.wait(timeout=120) == 0
    samples = [json.loads(line)["bytes"][str(tree)] for line in log.read_text().splitlines()]
    assert len(samples) >= 3 and samples[-1] < 1_000_000, samples
    assert 30_000_000 <= max(samples) < 31_000_000, samples
    done = subprocess.run(
        [sys.executable, str(DISK), "peak", str(log)], capture_output=True, text=True, check=True
    )
    (line,) = done.stdout.splitlines()
    assert re.fullmatch(r"disk: peak \d+\.\d GB at \d+ s \(.*cache 0\.0.* GB; \d+ samples\)", line), line


def test_dockers_sizes_are_read_in_its_decimal_units() -> None:
    spec = importlib.util.spec_from_file_location("ci_disk", DISK)
    assert spec and spec.loader
    disk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(disk)
    assert disk.docker_size("15.98GB") == 15_980_000_000
    assert disk.docker_size("1.348GB (100%)") == 1_348_000_000
    assert disk.docker_size("512kB") == 512_000 and disk.docker_size("0B") == 0
    with pytest.raises(ValueError, match="not a size"):
        disk.docker_size("lots")


def test_ci_run_prints_its_time_then_its_peak_disk_last() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    cleanup = re.search(r"^cleanup\(\) \{\n(.*?)^\}", run, re.S | re.M)
    assert cleanup, "the EXIT trap's cleanup"
    lines = [line.strip() for line in cleanup[1].splitlines() if line.strip()]
    assert lines[-2:] == ['echo "ci: $(( $(date +%s) - start )) s"', "python3 .ci/disk.py peak .ci-disk.log"]
    assert "python3 .ci/disk.py watch .ci-disk.log" in run
