"""Compile time of the fan-in-2 custom-op chain against depth, on real torch, three variants side by side.

    python -m bench.compile_time            # torch 2.10.0 venv from the test cache, ~10 minutes

- unpatched: torch as released (graph.py eager);
- patched:   after `torch-lazylog apply`;
- limit:     unpatched torch with OperatorIssue.operator_str replaced by a function returning "" (the
             cost floor: the text is never built).
Each (variant, depth) point runs in a fresh interpreter: one untimed warm-up compile, then RUNS timed
cold compiles of the model (fresh custom ops each, so Inductor lowers them anew); the median is kept.
Variants alternate per depth so that machine drift hits them alike. Writes bench/compile_time.csv,
bench/compile_time.png. The tool's own speed is bench/tool_speed.py.
"""

from __future__ import annotations

import argparse
import csv
import json
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
UNPATCHED_DEPTHS = [10, 12, 14, 16, 18, 20, 21, 22, 23]
DEPTHS = [*UNPATCHED_DEPTHS, 26, 30, 40]


def _tool(venv: Path, *args: str) -> None:
    """This checkout's torch-lazylog, aimed at the venv's interpreter (nothing is installed there)."""
    command = [sys.executable, "-m", "patcher", *args, "--python", str(venv / "bin" / "python")]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"torch-lazylog {' '.join(args)} failed: {done.stdout}{done.stderr}")


def _median(venv: Path, depth: int, runs: int, limit: bool) -> float:
    """bench/probe_runs.py in the venv, with a throw-away Inductor cache."""
    with tempfile.TemporaryDirectory(prefix="torch-lazylog-bench-") as cache:
        env = dict(
            os.environ, TORCHINDUCTOR_CACHE_DIR=f"{cache}/inductor", TRITON_CACHE_DIR=f"{cache}/triton"
        )
        env |= {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0", "TMPDIR": cache}
        params = json.dumps({"depth": depth, "repeat": runs, "limit": limit})
        command = [str(venv / "bin" / "python"), str(HERE / "probe_runs.py"), params]
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cache)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return float(statistics.median(json.loads(done.stdout.splitlines()[-1])["seconds"]))


def compile_times(venv: Path, runs: int, depths: list[int], unpatched: list[int]) -> list[dict[str, object]]:
    rows = []
    _tool(venv, "revert")
    for depth in depths:
        row: dict[str, object] = {"depth": depth, "unpatched_s": "", "patched_s": "", "limit_s": ""}
        if depth in unpatched:
            row["unpatched_s"] = round(_median(venv, depth, runs, limit=False), 3)
        row["limit_s"] = round(_median(venv, depth, runs, limit=True), 3)
        _tool(venv, "apply")
        row["patched_s"] = round(_median(venv, depth, runs, limit=False), 3)
        _tool(venv, "revert")
        print(row, flush=True)
        rows.append(row)
    return rows


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict[str, object]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for key, label, style in [
        ("unpatched_s", "unpatched (eager operator_str)", "o-"),
        ("patched_s", "patched (torch-lazylog apply)", "s-"),
        ("limit_s", "limit (operator_str never called)", "x--"),
    ]:
        points = [(float(str(r["depth"])), float(str(r[key]))) for r in rows if r[key] != ""]
        ax.plot([p[0] for p in points], [p[1] for p in points], style, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("chain depth (custom op applied with fan-in 2)")
    ax.set_ylabel("compile time, median of 3 (s, log scale)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--version", default="2.10.0", help="torch release (a cached test venv is used or built)"
    )
    parser.add_argument("--runs", type=int, default=3, help="timed compiles per point (median kept)")
    parser.add_argument("--depths", default=",".join(map(str, DEPTHS)), help="depths for patched and limit")
    parser.add_argument("--unpatched-depths", default=",".join(map(str, UNPATCHED_DEPTHS)))
    parser.add_argument("--out", type=Path, default=HERE, help="where the CSV and PNG files go")
    args = parser.parse_args()
    venv = realdata.torch_venv(args.version)
    started = time.perf_counter()
    rows = compile_times(
        venv,
        args.runs,
        [int(d) for d in args.depths.split(",")],
        [int(d) for d in args.unpatched_depths.split(",")],
    )
    _write(args.out / "compile_time.csv", rows)
    plot(
        rows, args.out / "compile_time.png", f"torch {args.version}, CPU: compile time of the custom-op chain"
    )
    print(f"done in {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
