"""The disk a run of .ci/run takes, sampled while it runs: what a runner of the scheduled tier needs
(docs/development.md, "The scheduled tier's runner").

    python3 .ci/disk.py watch LOG [--every SECONDS] PATH...   sample until ended (SIGTERM)
    python3 .ci/disk.py peak LOG                              print `disk: peak N GB` and its parts

A sample is the bytes the given paths hold (the torch cache, the venvs, pytest's temporary trees; each
file once, by its blocks, hard links counted once) and the Docker engine's images, containers, volumes
and build cache (`docker system df`), one JSON line per sample in LOG."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

UNITS = {"B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
GB = 10**9


def docker_size(text: str) -> int:
    """`docker system df`'s sizes (decimal units: "15.98GB", "512kB", "0B")."""
    match = re.fullmatch(r"([\d.]+)\s*([kKMGT]?B)", text.split(" (")[0].strip())
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match[1]) * UNITS[match[2]])


def docker_bytes() -> int:
    try:
        done = subprocess.run(
            ["docker", "system", "df", "--format", "{{json .}}"], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if done.returncode != 0:
        return 0
    return sum(docker_size(json.loads(line)["Size"]) for line in done.stdout.splitlines() if line.strip())


def tree_bytes(root: Path) -> int:
    seen: set[tuple[int, int]] = set()
    total = 0
    for directory, _, files in os.walk(root, onerror=lambda _: None):
        for name in [".", *files]:
            try:
                stat = os.lstat(os.path.join(directory, name))
            except OSError:
                continue  # gone between the listing and the stat
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * 512
    return total


def sample(paths: list[Path]) -> dict[str, int]:
    taken = {str(path): tree_bytes(path) for path in paths if path.exists()}
    taken["docker"] = docker_bytes()
    return taken


def watch(log: Path, every: float, paths: list[Path]) -> None:
    stop = False

    def ended(_signal: int, _frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, ended)
    start = time.monotonic()
    with log.open("a", encoding="utf-8") as out:
        while not stop:
            taken = sample(paths)
            out.write(json.dumps({"at": round(time.monotonic() - start), "bytes": taken}) + "\n")
            out.flush()
            deadline = time.monotonic() + every
            while not stop and time.monotonic() < deadline:
                time.sleep(min(1.0, every))


def peak(log: Path) -> str:
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    samples = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not samples:
        return "disk: peak unknown GB (no sample)"
    top = max(samples, key=lambda s: sum(s["bytes"].values()))
    parts = ", ".join(f"{Path(k).name or k} {v / GB:.1f}" for k, v in sorted(top["bytes"].items()))
    return (
        f"disk: peak {sum(top['bytes'].values()) / GB:.1f} GB at {top['at']} s "
        f"({parts} GB; {len(samples)} samples)"
    )


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "peak":
        print(peak(Path(argv[1])))
        return 0
    if len(argv) >= 2 and argv[0] == "watch":
        rest, every = argv[2:], 60.0
        if rest[:1] == ["--every"]:
            every, rest = float(rest[1]), rest[2:]
        watch(Path(argv[1]), every, [Path(p) for p in rest])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
