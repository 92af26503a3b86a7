"""What the image step costs a user, the earlier version's form beside this one's, in one run: the
lines a user adds to their Dockerfile, the MB the image grows by (and beyond the patch itself), and
the seconds of a build with no build cache and the base present, on the ROCm stand-in base.

    python -m bench.image_step            # a few minutes; prints one line per build and a summary

and writes the summary to bench/image_step.csv (one row a form: lines, MB added, MB beyond the
patch, median, fastest and slowest seconds, the rounds, the base, the day), which docs/images.md
shows and tests/test_docs.py compares with it.

Each form is built as its user builds it: the earlier one (tests/data/earlier_step.dockerfile, the
README's block before the tool image) with this checkout's wheel built beforehand into dist/, as its
README had the user do; the README's block with the tool image made beforehand by the README's
command (tests/images.py, not timed). Each build is `docker build --no-cache` (BuildKit) on the
`rocm-venv` stand-in, interleaved; the figure is the median over ROUNDS builds. MB added: the image's
size less the base's, as the engine reports them (uncompressed layers); beyond the patch: less the
files the patch rewrites or adds (graph.py, its pyc, RECORD, the undo record), which every form adds.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import statistics
import tempfile
import time
from pathlib import Path

from tests import images, realdata
from tests.helpers import checkout_copy, readme_snippet

ROUNDS = 5
CSV = Path(__file__).resolve().parent / "image_step.csv"
FIELDS = (
    "build",
    "lines",
    "added_mb",
    "beyond_patch_mb",
    "median_s",
    "min_s",
    "max_s",
    "rounds",
    "base",
    "date",
)
EARLIER = Path(__file__).resolve().parent.parent / "tests" / "data" / "earlier_step.dockerfile"
SITE = "/opt/venv/lib/python3*/site-packages"


def _lines(step: str) -> int:
    """The Dockerfile lines a user adds: every line but comments and blank ones."""
    return sum(1 for line in step.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def _context(work: Path, step: str, wheel: bool) -> Path:
    context = images.snippet_context(work, step)
    if wheel:  # the earlier form's wheel, built beforehand from this checkout, as its README said
        source = checkout_copy(work.parent / f"{work.name}-checkout")
        realdata.pip(
            ["wheel", "--quiet", "--no-deps", "-w", str(context / "dist"), str(source)], "setuptools"
        )
    return context


def _build(context: Path, base: str, tag: str) -> float:
    start = time.perf_counter()
    done = images.docker(
        "build", "--network=host", "--progress=plain", "--no-cache", "--build-arg", f"BASE_IMAGE={base}",
        "-t", tag, str(context), env=images.BUILDKIT,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    base = images.rocm_base()
    base_mb = images.image_mb(base)
    earlier_step = EARLIER.read_text()
    forms = {
        "earlier form (its own environment)": (earlier_step, True),
        "README block": (readme_snippet(), False),
    }
    seconds: dict[str, list[float]] = {name: [] for name in forms}
    added: dict[str, float] = {}
    beyond: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="torch-lazylog-image-step-") as work, images.tool_named():
        contexts = {
            name: _context(Path(work) / f"form{i}", *form) for i, (name, form) in enumerate(forms.items())
        }
        for _ in range(args.rounds):
            for i, name in enumerate(forms):
                tag = f"torch-lazylog-bench:form{i}"
                seconds[name].append(_build(contexts[name], base, tag))
                added[name] = images.image_mb(tag) - base_mb
                beyond[name] = added[name] - images.patch_bytes(tag, SITE) / 1e6
                print(f"{name}: {seconds[name][-1]:.1f} s, {added[name]:.1f} MB added", flush=True)
        for i in range(len(forms)):
            images.docker("image", "rm", "-f", f"torch-lazylog-bench:form{i}")
    print(f"on {base} ({base_mb:.0f} MB), {args.rounds} builds each, no build cache, the base present:")
    rows = []
    for name, (step, _) in forms.items():
        values = seconds[name]
        row = {
            "build": name,
            "lines": str(_lines(step)),
            "added_mb": f"{added[name]:.1f}",
            "beyond_patch_mb": f"{beyond[name]:.2f}",
            "median_s": f"{statistics.median(values):.1f}",
            "min_s": f"{min(values):.1f}",
            "max_s": f"{max(values):.1f}",
            "rounds": str(args.rounds),
            "base": base,
            "date": datetime.date.today().isoformat(),
        }
        rows.append(row)
        print(
            f"{name}: {row['lines']} lines, {row['added_mb']} MB added ({row['beyond_patch_mb']} beyond the patch);"
            f" {row['median_s']} s median ({row['min_s']} to {row['max_s']} s)"
        )
    with CSV.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"written: {CSV}")


if __name__ == "__main__":
    main()
