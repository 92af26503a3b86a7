"""The docs' measurement tables, made from the CSVs the benchmarks and CI runs write.

    python -m bench.tables           # writes each table between its markers in docs/
    python -m bench.tables --check   # writes nothing; exit 1 naming each table that differs

Each table sits between `<!-- NAME -->` and `<!-- /NAME -->` in one page (tests/docs.py finds it);
its rows are its CSV's: the latest run, with the conditions the CSV records. tests/test_docs.py
fails while a page shows anything else.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
from collections.abc import Callable
from pathlib import Path

from bench import tool_speed as tool_speed_module
from tests.docs import page_with, text

HERE = Path(__file__).resolve().parent

Rows = list[dict[str, str]]


def rows(name: str) -> Rows:
    return list(csv.DictReader((HERE / name).read_text().splitlines()))


def _table(header: list[str], body: list[list[str]]) -> str:
    lines = [f"| {' | '.join(line)} |" for line in [header, *body]]
    lines.insert(1, "|" + "---|" * len(header))
    return "".join(f"{line}\n" for line in lines)


def compile_time() -> str:
    return _table(
        ["depth", "unpatched (s)", "patched (s)", "limit (s)"],
        [
            [r["depth"], r["unpatched_s"] or "-", r["patched_s"], r["limit_s"]]
            for r in rows("compile_time.csv")
        ],
    )


def compile_time_growth() -> str:
    """How unpatched grows per level of the chain, from depth 20 on, in figures taken from the table."""
    unpatched = [
        (int(r["depth"]), float(r["unpatched_s"])) for r in rows("compile_time.csv") if r["unpatched_s"]
    ]
    deep = [(depth, seconds) for depth, seconds in unpatched if depth >= 20]
    levels = [(later / earlier) ** (1 / (b - a)) for (a, earlier), (b, later) in itertools.pairwise(deep)]
    shown = ", ".join(f"{seconds:.2g} s at {depth}" for depth, seconds in deep)
    return f"{min(levels):.1f}x to {max(levels):.1f}x per level from depth {deep[0][0]} on ({shown})"


def compile_time_summary() -> str:
    """What the compile-time table shows, in figures taken from it."""
    measured = rows("compile_time.csv")
    patched = [float(r["patched_s"]) for r in measured]
    limit = [float(r["limit_s"]) for r in measured]
    ratios = [p / q for p, q in zip(patched, limit, strict=True)]
    depths = [r["depth"] for r in measured]
    return (
        f"{min(patched):.2f} s to {max(patched):.2f} s from depth {depths[0]} to {depths[-1]}. "
        f"Against the limit, patched is {min(ratios):.2f}x to {max(ratios):.2f}x per point; summed over "
        f"the {len(measured)} depths it is {sum(patched) / sum(limit):.2f}x the limit "
        f"({sum(patched):.2f} s against {sum(limit):.2f} s)."
    )


def tool_speed() -> str:
    return _table(
        ["measure", "torch-lazylog (s)", "floor (s)", "ratio", "target"],
        [
            [r["measure"], r["tool_s"], r["floor_s"], f"{r['ratio']}x", f"{r['target']}x"]
            for r in rows("tool_speed.csv")
        ],
    )


def tool_speed_run() -> str:
    """Where and how long the tool-speed table was measured, and whether it meets its targets."""
    measured = rows("tool_speed.csv")
    (where,) = {r["where"] for r in measured}
    (rounds,) = {r["rounds"] for r in measured}
    missed = [r["measure"] for r in measured if float(r["ratio"]) > float(r["target"])]
    verdict = f"over its target: {', '.join(missed)}" if missed else "every ratio within its target"
    return f"{where}; {rounds} rounds; {verdict}"


def verify_target() -> str:
    """verify's target against `python -c pass`, as the benchmark holds it."""
    return f"{tool_speed_module.TARGETS['verify / python -c pass']:g}x"


def diagnose_speed() -> str:
    return _table(["measure", "value"], [[r["measure"], r["value"]] for r in rows("diagnose_speed.csv")])


def diagnose_speed_summary() -> str:
    """The diagnose figures the text quotes, from the same CSV as its table."""
    measured = {r["measure"]: float(r["value"]) for r in rows("diagnose_speed.csv")}
    return (
        f"{measured['diagnose_8_ranks_s']:.1f} s with the defaults, "
        f"{measured['diagnose_8_ranks_5_samples_s']:.1f} s with `--samples 5`; one dump takes "
        f"{measured['dump_s']:g} s"
    )


def probe_speed() -> str:
    return _table(
        ["measure", "probe", "probe, single file", "diagnose", "probe's target"],
        [
            [r["measure"], r["probe"], r["probe_single_file"], r["diagnose"], r["probe_target"]]
            for r in rows("probe_speed.csv")
        ],
    )


def image_step() -> str:
    return _table(
        ["build", "lines added", "MB added", "beyond the patch (MB)", "median (s)", "fastest to slowest (s)", "builds"],
        [
            [r["build"], r["lines"], r["added_mb"], r["beyond_patch_mb"], r["median_s"],
             f"{r['min_s']} to {r['max_s']}", r["rounds"]]
            for r in rows("image_step.csv")
        ],
    )  # fmt: skip


def image_unrun() -> str:
    return _table(
        ["way", "median (s)", "fastest to slowest (s)", "peak memory (MB)", "rounds"],
        [
            [r["way"], r["median_s"], f"{r['min_s']} to {r['max_s']}", r["peak_mb"], r["rounds"]]
            for r in rows("image_unrun.csv")
        ],
    )


def latest_ci_runs() -> Rows:
    """The last row of each measure with each state of the caches (rows are appended in order)."""
    latest: dict[tuple[str, str], dict[str, str]] = {}
    for r in rows("ci_runs.csv"):
        latest[(r["measure"], r["caches"])] = r
    return list(latest.values())


def ci_runs() -> str:
    """The latest of each measure; how each was taken (what else ran, by whose clock) is its CSV row's note."""
    return _table(
        ["measure", "value", "caches", "date", "commit"],
        [[r["measure"], r["value"], r["caches"], r["date"], r["commit"]] for r in latest_ci_runs()],
    )


def merge_time() -> str:
    """The merge tier alone, warm, as ci_runs.csv last measured it: its wall and its CPU time."""
    latest = {r["measure"]: r["value"] for r in latest_ci_runs()}
    wall, cpu = int(latest["merge_s"]), int(latest["merge_cpu_s"])
    return f"{wall} s here, warm ({wall // 60} min {wall % 60} s; {cpu} s of CPU time; how it was taken: the CSV's note)"


def first_command() -> str:
    """The README's first command on a fresh clone, as ci_runs.csv last measured it."""
    (value,) = [r["value"] for r in latest_ci_runs() if r["measure"] == "first_command_s"]
    return f"{value} s"


def step_mb() -> str:
    """What the README's step adds to an image, as image_step.csv measured it."""
    (added,) = [r["added_mb"] for r in rows("image_step.csv") if r["build"] == "README block"]
    return f"about {round(float(added))} MB"


TABLES: dict[str, Callable[[], str]] = {
    "compile-time": compile_time,
    "compile-time-growth": compile_time_growth,
    "compile-time-summary": compile_time_summary,
    "tool-speed": tool_speed,
    "tool-speed-run": tool_speed_run,
    "verify-target": verify_target,
    "diagnose-speed": diagnose_speed,
    "diagnose-speed-summary": diagnose_speed_summary,
    "probe-speed": probe_speed,
    "image-step": image_step,
    "image-unrun-speed": image_unrun,
    "ci-runs": ci_runs,
    "first-command": first_command,
    "merge-time": merge_time,
    "step-mb": step_mb,
}


def shown(name: str, page: str) -> str:
    """What `page` holds between the markers of `name`."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    return page[page.index(start) + len(start) : page.index(end)]


def written(name: str, page: str) -> str:
    """`page` with the generated `name` between its markers: a table on lines of its own, a figure inline."""
    made = TABLES[name]()
    inside = f"\n{made}" if made.endswith("\n") else made
    return page.replace(
        f"<!-- {name} -->{shown(name, page)}<!-- /{name} -->", f"<!-- {name} -->{inside}<!-- /{name} -->"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs")
    args = parser.parse_args()
    stale = []
    for name in TABLES:
        path = page_with(name)
        before = text(path)
        after = written(name, before)
        if after != before:
            stale.append(f"{path.name}: {name}")
            if not args.check:
                path.write_text(after, encoding="utf-8")
    for line in stale:
        print(("differs from its CSV: " if args.check else "wrote ") + line)
    sys.exit(1 if stale and args.check else 0)


if __name__ == "__main__":
    main()
