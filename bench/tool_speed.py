"""How fast the tool is against its floors, side by side in one run, on a real torch 2.10.0 tree.

    python -m bench.tool_speed            # about a minute; writes bench/tool_speed.csv

Each round runs every command once, in the same order, so machine drift hits them alike; the table
gives medians over ROUNDS rounds and the median per-round ratio for the two targets:
- verify (on the patched tree) against `python -c pass`: verify starts no second interpreter and
  imports neither libcst nor torch;
- one apply + revert cycle against the libcst floor: one interpreter start that imports libcst and
  parses graph.py once (no tool can patch with libcst in less).
Both commands run in the interpreter running the benchmark, with --torch-dir on a copy of the real
release tree (graph.py, version.py, the dist-info with RECORD) and a timestamp pyc of graph.py, and
with the tool's own bytecode compiled, as a pip install leaves it.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests import realdata

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ROUNDS = 25
VERSION = "2.10.0"


# As installed by pip, the tool and libcst have their bytecode; a PYTHONDONTWRITEBYTECODE=1 in the
# environment would make every command recompile the tool's modules, which no installed tool does.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _seconds(command: list[str], expect: int | None = 0) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=ENV)
    seconds = time.perf_counter() - start
    if expect is not None and done.returncode != expect:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr}")
    return seconds


def measure(rounds: int) -> dict[str, list[float]]:
    work = Path(tempfile.mkdtemp(prefix="torch-lazylog-bench-"))
    torch_dir = realdata.release_tree(VERSION, work / "site")
    graph = torch_dir / "_inductor" / "graph.py"
    subprocess.run([sys.executable, "-m", "py_compile", str(graph)], check=True)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "patcher"), str(ROOT / "patches")], check=True
    )
    tool = [sys.executable, "-m", "patcher"]
    target = ["--torch-dir", str(torch_dir)]
    floor = f"import libcst; libcst.parse_module(open({str(graph)!r}, 'rb').read())"
    times: dict[str, list[float]] = {"pass": [], "verify": [], "floor": [], "apply+revert": []}
    for _ in range(rounds):
        times["pass"].append(_seconds([sys.executable, "-c", "pass"]))
        times["floor"].append(_seconds([sys.executable, "-c", floor]))
        cycle = _seconds([*tool, "apply", *target])
        times["verify"].append(_seconds([*tool, "verify", *target]))
        cycle += _seconds([*tool, "revert", *target])
        times["apply+revert"].append(cycle)
    return times


def rows(times: dict[str, list[float]]) -> list[dict[str, object]]:
    """Medians of each command, and the median of the per-round ratios (each round's commands ran
    back to back, so a ratio within a round is the least disturbed by the machine's drift)."""
    median = {name: statistics.median(values) for name, values in times.items()}
    table = []
    for measure, tool, floor in (
        ("verify / python -c pass", "verify", "pass"),
        ("apply+revert / libcst floor", "apply+revert", "floor"),
    ):
        ratios = [t / f for t, f in zip(times[tool], times[floor], strict=True)]
        table.append(
            {"measure": measure, "tool_s": round(median[tool], 4), "floor_s": round(median[floor], 4),
             "ratio": round(statistics.median(ratios), 2), "rounds": len(ratios)}
        )  # fmt: skip
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--output", type=Path, default=HERE / "tool_speed.csv")
    args = parser.parse_args()
    table = rows(measure(args.rounds))
    with open(args.output, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    for row in table:
        print(row)


if __name__ == "__main__":
    main()
