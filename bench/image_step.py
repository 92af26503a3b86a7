"""What the tool's image step costs: MB added to the image and seconds of a build with no build cache
and the base present, for Dockerfile.rocm and the README's snippet, on the ROCm stand-in base.

    python -m bench.image_step            # about a minute; prints one line per build and a summary

and writes the summary to bench/image_step.csv (one row a build: MB added, median, fastest and
slowest seconds, the rounds, the base, the day), which docs/images.md shows and tests/test_docs.py
compares with it.

Each build is `docker build --no-cache` (BuildKit, as the tests build) of this checkout on the
`rocm-venv` stand-in of tests/images.py (built first if missing, not timed); the figure is the
median over ROUNDS builds, interleaved. MB added: the image's size less the base's, as the engine
reports them (uncompressed layers: the tool's environment and the patch layer).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import statistics
import tempfile
import time
from pathlib import Path

from tests import images

ROUNDS = 5
CSV = Path(__file__).resolve().parent / "image_step.csv"
FIELDS = ("build", "added_mb", "median_s", "min_s", "max_s", "rounds", "base", "date")


def _build(context: Path, dockerfile: str, base: str, tag: str) -> float:
    start = time.perf_counter()
    done = images.docker(
        "build", "--network=host", "--progress=plain", "--no-cache", "-f", str(context / dockerfile),
        "--build-arg", f"BASE_IMAGE={base}", "-t", tag, str(context), env=images.BUILDKIT,
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
    with tempfile.TemporaryDirectory(prefix="torch-lazylog-image-step-") as work:
        builds = {
            "Dockerfile.rocm": (images.tool_context(Path(work) / "rocm"), "Dockerfile.rocm"),
            "README snippet": (images.snippet_context(Path(work) / "snippet"), "Dockerfile"),
        }
        seconds: dict[str, list[float]] = {name: [] for name in builds}
        added: dict[str, float] = {}
        for _ in range(args.rounds):
            for name, (context, dockerfile) in builds.items():
                tag = f"torch-lazylog-bench:{name.split()[0].lower()}"
                seconds[name].append(_build(context, dockerfile, base, tag))
                added[name] = images.image_mb(tag) - base_mb
                print(f"{name}: {seconds[name][-1]:.1f} s, {added[name]:.1f} MB added", flush=True)
        for name in builds:
            images.docker("image", "rm", "-f", f"torch-lazylog-bench:{name.split()[0].lower()}")
    print(f"on {base} ({base_mb:.0f} MB), {args.rounds} builds each, no build cache, the base present:")
    rows = []
    for name in builds:
        values = seconds[name]
        row = {
            "build": name,
            "added_mb": f"{added[name]:.1f}",
            "median_s": f"{statistics.median(values):.1f}",
            "min_s": f"{min(values):.1f}",
            "max_s": f"{max(values):.1f}",
            "rounds": str(args.rounds),
            "base": base,
            "date": datetime.date.today().isoformat(),
        }
        rows.append(row)
        print(
            f"{name}: {row['added_mb']} MB added; {row['median_s']} s median ({row['min_s']} to {row['max_s']} s)"
        )
    with CSV.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"written: {CSV}")


if __name__ == "__main__":
    main()
