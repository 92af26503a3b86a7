"""What the tool's image step costs: MB added to the image and seconds of a build with no build cache
and the base present, for Dockerfile.rocm and the README's snippet, on the ROCm stand-in base.

    python -m bench.image_step            # about a minute; prints one line per build and a summary

Each build is `docker build --no-cache` (BuildKit, as the tests build) of this checkout on the
`rocm-venv` stand-in of tests/images.py (built first if missing, not timed); the figure is the
median over ROUNDS builds, interleaved. MB added: the image's size less the base's, as the engine
reports them (uncompressed layers: the tool's environment and the patch layer). Each round also builds
the same step again over that image (a derived image repeating the step, issue 27): its seconds,
and the MB it adds over the first step's image (the tool's environment made again; the patch layer
is empty, torch being lazy already).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tests import images

ROUNDS = 5


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
        again: dict[str, list[float]] = {name: [] for name in builds}
        added: dict[str, float] = {}
        added_again: dict[str, float] = {}
        for _ in range(args.rounds):
            for name, (context, dockerfile) in builds.items():
                tag = f"torch-lazylog-bench:{name.split()[0].lower()}"
                seconds[name].append(_build(context, dockerfile, base, tag))
                added[name] = images.image_mb(tag) - base_mb
                again[name].append(_build(context, dockerfile, tag, f"{tag}-again"))
                added_again[name] = images.image_mb(f"{tag}-again") - images.image_mb(tag)
                print(
                    f"{name}: {seconds[name][-1]:.1f} s, {added[name]:.1f} MB added; again over it: "
                    f"{again[name][-1]:.1f} s, {added_again[name]:.1f} MB added",
                    flush=True,
                )
                images.docker("image", "rm", "-f", f"{tag}-again")
        for name in builds:
            images.docker("image", "rm", "-f", f"torch-lazylog-bench:{name.split()[0].lower()}")
    print(f"on {base} ({base_mb:.0f} MB), {args.rounds} builds each, no build cache, the base present:")
    for name in builds:
        values = seconds[name]
        print(
            f"{name}: {added[name]:.1f} MB added; {statistics.median(values):.1f} s median "
            f"({min(values):.1f} to {max(values):.1f} s); again over its own output: "
            f"{added_again[name]:.1f} MB added; {statistics.median(again[name]):.1f} s median "
            f"({min(again[name]):.1f} to {max(again[name]):.1f} s)"
        )


if __name__ == "__main__":
    main()
