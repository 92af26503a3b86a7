"""How fast the tool is, as a user installs and runs it, against its floors, side by side in one run.

    python -m bench.tool_speed                 # about a minute; writes bench/tool_speed.csv
    python -m bench.tool_speed --importtime    # and the slowest imports of `verify` (-X importtime)
    python -m bench.tool_speed --baseline DIR  # and, in the same rounds, the verify of another checkout

What a user runs, not this checkout: the tool's wheel is built (`pip wheel --no-deps`) and installed
into a venv made for the run from the base interpreter of the one running the benchmark, as the
image's lean step makes it (`venv --without-pip`, filled by `pip --python`): the tool, click and
libcst and nothing else (no pip, no editable finder, no coverage .pth), bytecode compiled as pip
compiles it at install. Every command runs in that venv: the tool as its console script, the floors
with the venv's python:
- `verify` (on the patched tree) against `python -c pass`: verify starts no second interpreter and
  imports neither libcst nor torch;
- one `apply` + one `revert` against the libcst floor: one interpreter start that imports libcst and
  parses graph.py once (no tool can patch with libcst in less).
The target is --torch-dir on a copy of the real torch 2.10.0 tree (graph.py with a timestamp pyc,
version.py, the dist-info with RECORD). Each round runs every command once, in the same order, so
machine drift hits them alike; the table gives medians over the rounds and the median of the
per-round ratios. One untimed round first.

The environment is the caller's less what would make the installed tool run otherwise than it does
for a user: PYTHONDONTWRITEBYTECODE (pip compiled the bytecode; nothing should be recompiled or kept
from being written), PYTHONPYCACHEPREFIX (it would hide pip's pycs), PYTHONPATH, coverage's and the
tool's own variables.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from tests import realdata

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ROUNDS = 25
VERSION = "2.10.0"
# What the engine work aims at (the targets), printed beside the ratios.
TARGETS = {"verify / python -c pass": 10.0, "apply+revert / libcst floor": 1.3}

_DROP = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
_DROP_PREFIXES = ("COVERAGE_", "TORCH_LAZYLOG_", "PYTHONIMPORTTIME", "PYTHONPROFILE")
ENV = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith(_DROP_PREFIXES)}


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False, env=ENV)


def _seconds(command: list[str], expect: int = 0) -> float:
    start = time.perf_counter()
    done = _run(command)
    seconds = time.perf_counter() - start
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return seconds


class Install:
    """The tool as a user has it: its wheel installed into a clean venv made for this run."""

    def __init__(self, work: Path, root: Path = ROOT) -> None:
        dist, self.venv = work / "dist", work / "venv"
        base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        self.base = base if base.exists() else Path(sys.executable)
        realdata.pip(["wheel", "--quiet", "--no-deps", "-w", str(dist), str(root)], "setuptools")
        (wheel,) = dist.glob("torch_lazylog-*.whl")
        # As the image's lean step makes it: a venv without pip, filled by a pip from outside.
        subprocess.run([str(self.base), "-m", "venv", "--without-pip", str(self.venv)], check=True, env=ENV)
        self.python = self.venv / "bin" / "python"
        realdata.pip(
            ["--python", str(self.python), "install", "--quiet", "--no-cache-dir", str(wheel)],
            "click and libcst",
        )
        self.script = self.venv / "bin" / "torch-lazylog"
        self.wheel = wheel.name
        self._check()

    def _check(self) -> None:
        """What makes it a user's install and not this checkout's: the code runs from the venv, and
        pip compiled every module of the tool and its dependencies."""
        probe = "import click, libcst, patcher; print(patcher.__file__)"
        where = _run([str(self.python), "-c", probe]).stdout.strip()
        assert where.startswith(str(self.venv)), f"patcher imported from {where}, not the venv"
        site = next((self.venv / "lib").glob("python3*/site-packages"))
        pth = sorted(p.name for p in site.glob("*.pth"))
        assert not pth, f"startup hooks in the venv: {pth}"
        installed = sorted(p.name.split("-")[0].lower() for p in site.glob("*.dist-info"))
        assert installed == ["click", "libcst", "pyyaml", "torch_lazylog"] or installed == [
            "click", "libcst", "torch_lazylog"], f"the venv holds {installed}"  # fmt: skip
        for package in ("patcher", "click", "libcst"):
            sources = [p for p in (site / package).rglob("*.py")]
            missing = [p for p in sources if not list(p.parent.glob(f"__pycache__/{p.stem}.*.pyc"))]
            assert sources and not missing, f"pip left {len(missing)} {package} modules uncompiled"

    def where(self) -> str:
        version = _run([str(self.python), "-c", "import platform; print(platform.python_version())"])
        return (
            f"the tool's wheel in a clean venv of CPython {version.stdout.strip()}, "
            f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores"
        )


def _tree(install: Install, work: Path) -> Path:
    torch_dir = realdata.release_tree(VERSION, work / "site")
    graph = torch_dir / "_inductor" / "graph.py"
    subprocess.run([str(install.python), "-m", "py_compile", str(graph)], check=True, env=ENV)
    return torch_dir


def measure(
    install: Install, torch_dir: Path, rounds: int, baseline: Install | None = None
) -> dict[str, list[float]]:
    """Each command's seconds per round; with a baseline (another checkout's install), its verify of
    the same patched tree too, as "verify (baseline)", timed right after this one's."""
    python, graph = str(install.python), torch_dir / "_inductor" / "graph.py"
    tool, target = [str(install.script)], ["--torch-dir", str(torch_dir)]
    floor = f"import libcst; libcst.parse_module(open({str(graph)!r}, 'rb').read())"
    times: dict[str, list[float]] = defaultdict(list)
    for index in range(rounds + 1):
        one = {"pass": _seconds([python, "-c", "pass"]), "floor": _seconds([python, "-c", floor])}
        cycle = _seconds([*tool, "apply", *target])
        one["verify"] = _seconds([*tool, "verify", *target])
        if baseline is not None:
            one["verify (baseline)"] = _seconds([str(baseline.script), "verify", *target])
        one["apply+revert"] = cycle + _seconds([*tool, "revert", *target])
        if index:  # the first round is a warm-up
            for name, seconds in one.items():
                times[name].append(seconds)
    return times


def rows(times: dict[str, list[float]], where: str) -> list[dict[str, object]]:
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
             "ratio": round(statistics.median(ratios), 2), "target": TARGETS[measure],
             "rounds": len(ratios), "where": where}
        )  # fmt: skip
    return table


def compared(times: dict[str, list[float]], baseline: Path) -> str:
    """verify of this checkout and of the baseline, each against `python -c pass` of the same rounds."""
    lines = []
    for name, label in (("verify (baseline)", str(baseline)), ("verify", "this checkout")):
        ratios = [t / f for t, f in zip(times[name], times["pass"], strict=True)]
        lines.append(
            f"verify of {label}: {statistics.median(times[name]):.4f} s, "
            f"{statistics.median(ratios):.2f}x python -c pass (median of {len(ratios)} rounds)"
        )
    return "\n".join(lines)


_IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)\s*$")


def importtime(install: Install, torch_dir: Path, runs: int = 7, top: int = 20) -> str:
    """`verify`'s imports under -X importtime in the venv: per module the median self and cumulative
    microseconds over `runs` starts, the `top` slowest by self time, and the top-level imports."""
    selfs: dict[str, list[int]] = defaultdict(list)
    cumulative: dict[str, list[int]] = defaultdict(list)
    level: dict[str, int] = {}
    parent: dict[str, str] = {}
    totals = []
    target = ["--torch-dir", str(torch_dir)]
    _seconds([str(install.script), "apply", *target])  # verify is timed on the patched tree
    for _ in range(runs):
        # The console script run by the interpreter its shebang names, with -X importtime.
        start = time.perf_counter()
        done = _run([str(install.python), "-X", "importtime", str(install.script), "verify", *target])
        totals.append(time.perf_counter() - start)
        assert done.returncode == 0, done.stderr[-2000:]
        # The output lists each import after its children; read backwards, a module's importer is
        # the last one seen a level up.
        above: dict[int, str] = {}
        for line in reversed(done.stderr.splitlines()):
            match = _IMPORTTIME.match(line)
            if match:
                name, depth = match[4], (len(match[3]) - 1) // 2
                selfs[name].append(int(match[1]))
                cumulative[name].append(int(match[2]))
                level[name], above[depth] = depth, name
                parent.setdefault(name, above.get(depth - 1, "-"))
    _seconds([str(install.script), "revert", *target])
    med = {name: (statistics.median(selfs[name]), statistics.median(cumulative[name])) for name in selfs}
    out = [
        f"verify: {statistics.median(totals) * 1000:.1f} ms wall (median of {runs}); "
        f"{len(med)} modules imported, {sum(s for s, _ in med.values()) / 1000:.1f} ms in imports",
        f"slowest {top} by self time (us, median):",
        *(f"  {s:>8.0f} self {c:>8.0f} cumulative  {name}  (imported by {parent[name]})" for name, (s, c)
          in sorted(med.items(), key=lambda kv: -kv[1][0])[:top]),
        "top-level imports by cumulative time (us, median):",
        *(f"  {c:>8.0f}  {name}" for name, (_, c) in
          sorted(med.items(), key=lambda kv: -kv[1][1]) if level[name] == 0 and c >= 500),
    ]  # fmt: skip
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--output", type=Path, default=HERE / "tool_speed.csv")
    parser.add_argument("--importtime", action="store_true", help="also print verify's slowest imports")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. `git worktree` of main): its verify, same rounds",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="torch-lazylog-bench-") as work:
        # Every command starts here: `-c` puts the current directory first on sys.path, and this
        # checkout's own patcher/ must never be what runs.
        os.chdir(work)
        install = Install(Path(work))
        baseline = Install(Path(work) / "baseline", args.baseline.resolve()) if args.baseline else None
        torch_dir = _tree(install, Path(work))
        where = install.where()
        print(f"measured: {where}")
        times = measure(install, torch_dir, args.rounds, baseline)
        table = rows(times, where)
        if baseline is not None:
            print(compared(times, args.baseline))
        if args.importtime:
            print(importtime(install, torch_dir))
    with open(args.output, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    for row in table:
        verdict = "meets" if float(str(row["ratio"])) <= float(str(row["target"])) else "misses"
        print(
            f"{row['measure']}: {row['tool_s']} s / {row['floor_s']} s = {row['ratio']}x "
            f"({verdict} the {row['target']}x target; median of {row['rounds']} rounds)"
        )


if __name__ == "__main__":
    main()
