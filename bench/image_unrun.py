"""verify --image against a pull and a run, side by side in one run, on the 2.10.0 stand-in base
(about 7.6 GB, a real torch and its pycs) patched by the README's step, from a registry on loopback:

    python -m bench.image_unrun            # minutes; prints one line a round and a summary

and writes the summary to bench/image_unrun.csv (one row a way: median, fastest and slowest seconds,
peak memory in MB, its rounds, the base, the day), which docs/verify-image.md shows and
tests/test_docs.py compares with it.

Each round, interleaved: `torch-lazylog verify --json --image docker://...` (its peak memory: its own
maximum resident set, from wait4), then `docker pull` of the same reference and `docker run --rm IMAGE
torch-lazylog verify --json` (its peak memory: the engine's, dockerd's and containerd's resident sets
sampled every 0.1 s during the pull less before it, plus the verify in the container's own maximum),
and the pulled image removed. The registry is Debian's docker-registry, started here (the tests'
helper); the image is pushed to it once by skopeo beforehand, not timed, and the built image removed
(the engine would find it by its config's digest and pull nothing). The engine holds the base's
layers (it built it): the first pull downloads and decompresses every layer but writes none it has
(on an empty engine a pull also writes them); after it the engine knows which of its layers the
registry's blobs are, so a pull again downloads none: those rounds are the "again" row.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests import images
from tests.helpers import readme_snippet
from tests.test_image_unrun import registry

ROUNDS = 3
CSV = Path(__file__).resolve().parent / "image_unrun.csv"
FIELDS = ("way", "median_s", "min_s", "max_s", "peak_mb", "rounds", "base", "date")
ENGINE = ("dockerd", "containerd")
# After its first pull the engine knows which of its layers the registry's blobs are, and a pull
# again downloads none: the first round's pull is the one a machine meeting the image pays.
WAYS = ("verify --image", "docker pull + run, first", "docker pull + run, again")
# verify in the container, with its own peak resident set printed after its JSON.
IN_CONTAINER = (
    "import resource, subprocess, sys; "
    "code = subprocess.run(['torch-lazylog', 'verify', '--json']).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(code)"
)


def _rss_kb(names: tuple[str, ...]) -> int:
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Name", "").strip() in names and "VmRSS" in fields:
            total += int(fields["VmRSS"].split()[0])
    return total


class _Sampler(threading.Thread):
    """The engine's resident set, sampled until stopped: its peak above where it started."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.start_kb = _rss_kb(ENGINE)
        self.peak_kb = self.start_kb
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak_kb = max(self.peak_kb, _rss_kb(ENGINE))


def unrun(reference: str) -> tuple[float, float]:
    """Seconds and peak MB of `verify --image`."""
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "patcher", "verify", "--json", "--image", reference],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0, f"verify --image {reference} exited {process.returncode}"
    return time.monotonic() - start, usage.ru_maxrss / 1024


def pulled(name: str) -> tuple[float, float]:
    """Seconds and peak MB of `docker pull` and verify run in the pulled image; the image removed."""
    sampler = _Sampler()
    sampler.start()
    start = time.monotonic()
    done = images.docker("pull", "-q", name, timeout=3600)
    sampler.done.set()
    sampler.join()
    assert done.returncode == 0, done.stderr
    ran = images.docker("run", "--rm", "--network=none", name, "python3", "-c", IN_CONTAINER, timeout=600)
    seconds = time.monotonic() - start
    images.docker("image", "rm", name, timeout=600)
    assert ran.returncode == 0, ran.stderr
    container_kb = int(ran.stdout.splitlines()[-1])
    return seconds, (sampler.peak_kb - sampler.start_kb + container_kb) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    rounds = parser.parse_args().rounds
    base = images.rocm_base()
    patched = f"torch-lazylog-bench:unrun-{os.getpid()}"
    with tempfile.TemporaryDirectory() as work, images.tool_named():
        context = Path(work) / "context"
        context.mkdir()
        (context / "Dockerfile").write_text(f"FROM {base}\n{readme_snippet()}")
        built = images.docker("build", "-t", patched, str(context), env=images.BUILDKIT)
        assert built.returncode == 0, built.stderr
        try:
            with registry(Path(work)) as host:
                name = f"{host}/standin:patched"
                pushed = subprocess.run(
                    ["skopeo", "copy", "--dest-tls-verify=false", "--dest-compress-level=1",
                     f"docker-daemon:{patched}", f"docker://{name}"],
                    capture_output=True, text=True,
                )  # fmt: skip
                assert pushed.returncode == 0, pushed.stderr
                # The engine would find the built image by its config's digest and pull no layer.
                images.docker("image", "rm", "-f", patched, timeout=600)
                results: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
                for number in range(rounds):
                    results[WAYS[0]].append(unrun(f"docker://{name}"))
                    results[WAYS[1] if number == 0 else WAYS[2]].append(pulled(name))
                    print(
                        f"round {number + 1}: "
                        + "; ".join(
                            f"{k} {v[-1][0]:.1f} s, {v[-1][1]:.0f} MB" for k, v in results.items() if v
                        )
                    )
        finally:
            images.docker("image", "rm", "-f", patched, timeout=600)
    day = datetime.date.today().isoformat()
    rows = [
        {
            "way": way,
            "median_s": f"{statistics.median(s for s, _ in got):.1f}",
            "min_s": f"{min(s for s, _ in got):.1f}",
            "max_s": f"{max(s for s, _ in got):.1f}",
            "peak_mb": f"{max(m for _, m in got):.0f}",
            "rounds": str(len(got)),
            "base": base,
            "date": day,
        }
        for way, got in results.items()
        if got
    ]
    with CSV.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
