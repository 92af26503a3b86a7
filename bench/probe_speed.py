"""What one probe read of a compiling server costs, beside a plain diagnose read, in one run.

    python -m bench.probe_speed            # about two minutes; writes bench/probe_speed.csv

What a user runs: the tool's wheel in a clean venv (bench.tool_speed's Install) with its diagnose
extra's py-spy added, as `pip install 'torch-lazylog[diagnose]'` gives it; and the single file the
docs' HEALTHCHECK and startupProbe run (built from this checkout by `python -m patcher.pyz`), run by
that venv's Python with `-B` as the file's own first line does (py-spy beside it). The server is
tests/scenarios/stalls.py's `compile` (one new function compiled after another, forever) on the
unpatched torch 2.10.0 venv of the test cache, with a fresh Inductor cache: busy on an eager torch,
the case where a probe reads stacks. Once it has compiled its first function, each round runs
`torch-lazylog probe PID`, the single file's `probe PID` and `torch-lazylog diagnose PID` once
each, in the same order; each command's wall time and CPU time (its own and its children's,
py-spy's included, from wait4) are kept, and the table gives the medians side by side with the
issue's targets. The shared venv is
held under the tests' lock, reverted first, so no suite patches it meanwhile.
"""

from __future__ import annotations

import contextlib
import csv
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.tool_speed import ENV, Install
from patcher.diagnose import probe
from tests import realdata

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 15
TARGETS = {"wall_s": 1.0, "cpu_s": 0.15}  # a probe read of a compiling server (issue 61)


def _timed(command: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the command and every child it waited for) and the exit code."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, process.returncode


def _compiling(out: Path, timeout: float = 600) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(line.strip().isdigit() for line in out.read_text().splitlines()):
            return
        time.sleep(1)
    raise SystemExit(f"the compile loop compiled nothing in {timeout:.0f} s: {out.read_text()[-2000:]}")


COMMANDS = ("probe", "probe_single_file", "diagnose")


def measure(install: Install, single: Path, venv: Path, tmp: Path) -> dict[str, list[float]]:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor"), TMPDIR=str(tmp))
    scenario = ROOT / "tests" / "scenarios" / "stalls.py"
    out = tmp / "server.out"
    with out.open("w") as sink:
        server = subprocess.Popen(
            [str(venv / "bin" / "python"), str(scenario), "probe-bench", "compile"],
            env=env,
            stdout=sink,
            stderr=sink,
        )
    times: dict[str, list[float]] = {f"{c}_{m}": [] for c in COMMANDS for m in ("wall_s", "cpu_s")}
    try:
        _compiling(out)
        commands = {
            "probe": [str(install.script), "probe", str(server.pid)],
            "probe_single_file": [str(install.python), "-B", str(single), "probe", str(server.pid)],
            "diagnose": [str(install.script), "diagnose", str(server.pid)],
        }
        for round_ in range(ROUNDS + 1):
            for name, command in commands.items():
                wall, cpu, code = _timed(command)
                if name.startswith("probe") and code != 0:
                    raise SystemExit(f"probe of the compiling server exited {code}")
                if round_:  # the first round untimed
                    times[f"{name}_wall_s"].append(wall)
                    times[f"{name}_cpu_s"].append(cpu)
        return times
    finally:
        for pid in reversed(probe.tree(server.pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        server.wait()


def main() -> None:
    venv = realdata.torch_venv("2.10.0")
    with tempfile.TemporaryDirectory(prefix="torch-lazylog-bench-") as tmp:
        os.chdir(tmp)  # `-c` puts the current directory first on sys.path: never this checkout's patcher/
        install = Install(Path(tmp))
        realdata.pip(["--python", str(install.python), "install", "--quiet", "py-spy>=0.4"], "py-spy")
        single = Path(tmp) / "torch-lazylog"
        subprocess.run([sys.executable, "-B", "-m", "patcher.pyz", str(single)], check=True, cwd=ROOT)
        with realdata.cache_lock("e2e-torch-venvs"):
            revert = [sys.executable, "-m", "patcher", "revert", "--python", str(venv / "bin" / "python")]
            subprocess.run(revert, check=True, capture_output=True)
            times = measure(install, single, venv, Path(tmp))
        where = install.where()
    rows = [
        {
            "measure": measure_,
            **{c: round(statistics.median(times[f"{c}_{measure_}"]), 3) for c in COMMANDS},
            "probe_target": target,
        }
        for measure_, target in TARGETS.items()
    ]
    with (ROOT / "bench" / "probe_speed.csv").open("w", newline="") as sheet:
        writer = csv.DictWriter(sheet, ["measure", *COMMANDS, "probe_target"])
        writer.writeheader()
        writer.writerows(rows)
    print(
        f"{where}; {ROUNDS} rounds; load average {os.getloadavg()[0]:.1f}; {platform.python_version()} runs it"
    )
    for row in rows:
        print(
            f"median {row['measure']}: "
            + ", ".join(f"{c} {row[c]}" for c in COMMANDS)
            + f" (the probe's target {row['probe_target']})"
        )


if __name__ == "__main__":
    main()
