"""How long diagnose takes to name the hang in a server of 8 ranks, as a user runs it.

    python -m bench.diagnose_speed            # a few minutes; writes bench/diagnose_speed.csv

A parent without torch starts 8 ranks of tests/scenarios/chain.py (the custom-op chain at depth 26)
on the unpatched torch 2.10.0 venv of the test cache, each with a fresh Inductor cache; once py-spy
shows every rank in the eager formatting, it times one `py-spy dump --json` of a rank (median of
15) and `torch-lazylog diagnose PARENT --json` whole, a fresh interpreter each time, with its
defaults (3 samples 0.1 s apart) and with `--samples 5` (median of 5 each; each must exit 1 and
name all 8 ranks), and the load average then. Then every rank is killed. The
shared venv is held under the tests' lock, so no suite patches it meanwhile.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from patcher.diagnose import judge, procs, stacks
from tests import realdata

ROOT = Path(__file__).resolve().parent.parent
RANKS, DEPTH = 8, 26


def _formatting(spy: str, pid: int) -> bool:
    try:
        sample = stacks.dump(spy, pid)
    except stacks.Failed:
        return False
    return any((f := judge.formatting(s)) is not None and f[0] == "eager" for s in sample)


def _ranks(parent: int, spy: str, timeout: float = 900) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ranks = procs.read().below(parent)
        if len(ranks) == RANKS and all(_formatting(spy, r) for r in ranks):
            return ranks
        time.sleep(2)
    raise SystemExit(f"the {RANKS} ranks did not all reach the eager formatting in {timeout:.0f} s")


def _timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def _diagnosed(parent: int, extra: list[str]) -> float:
    seconds, done = _timed([sys.executable, "-m", "patcher", "diagnose", str(parent), "--json", *extra])
    report = json.loads(done.stdout)
    assert done.returncode == 1 and len(report["processes"]) == RANKS, done.stdout[-2000:]
    return seconds


def measure(venv: Path, tmp: Path) -> dict[str, float]:
    spy = stacks.find()
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor"), TMPDIR=str(tmp))
    scenario = ROOT / "tests" / "scenarios" / "chain.py"
    command = [str(venv / "bin" / "python"), str(scenario), "bench", str(DEPTH), "--ranks", str(RANKS)]
    parent = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ranks = _ranks(parent.pid, spy)
        dumps = [_timed([spy, "dump", "--json", "--pid", str(ranks[0])])[0] for _ in range(15)]
        result = {"dump_s": statistics.median(dumps)}
        for name, extra in (("diagnose_8_ranks_s", []), ("diagnose_8_ranks_5_samples_s", ["--samples", "5"])):
            result[name] = statistics.median(_diagnosed(parent.pid, extra) for _ in range(5))
        result["load_average_1min"] = os.getloadavg()[0]
        return result
    finally:
        for pid in [*procs.read().below(parent.pid), parent.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        parent.wait()


def main() -> None:
    venv = realdata.torch_venv("2.10.0")
    with realdata.cache_lock("e2e-torch-venvs"), tempfile.TemporaryDirectory() as tmp:
        revert = [sys.executable, "-m", "patcher", "revert", "--python", str(venv / "bin" / "python")]
        subprocess.run(revert, check=True, capture_output=True)
        result = measure(venv, Path(tmp))
    rows = [{"measure": name, "value": round(value, 3)} for name, value in result.items()]
    with (ROOT / "bench" / "diagnose_speed.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, ["measure", "value"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores")
    for row in rows:
        print(f"{row['measure']}: {row['value']}")


if __name__ == "__main__":
    main()
