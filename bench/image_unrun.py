"""verify --image against a pull and a run, side by side in one run, on the 2.10.0 stand-in base
(about 7.6 GB, a real torch and its pycs) patched by the README's step, from a registry on loopback:

    python -m bench.image_unrun            # tens of minutes; prints one line a round and a summary

and writes the summary to bench/image_unrun.csv (one row a way: median, fastest and slowest seconds,
peak memory in MB, its rounds, the base, the day), which docs/verify-image.md shows and
tests/test_docs.py compares with it.

What a user runs: the tool's wheel with its `image` extra in a clean venv (bench.tool_speed's
Install), as `pip install 'torch-lazylog[image]'` gives it. Each round, interleaved:
- `torch-lazylog verify --json --image docker://...` with no engine reachable (its peak memory: its
  own maximum resident set, from wait4);
- a machine meeting the image: a second Docker engine started for the round with nothing in it (its
  own data root, socket, bridge and containerd; untimed), then, timed, `docker pull` of the same reference
  and `docker run --rm IMAGE torch-lazylog verify --json` (its peak memory: the resident sets of that
  engine's processes, sampled every 0.1 s during the pull, less before it, plus the verify in the
  container's own maximum); the engine is stopped and its data root removed after the round.
The registry is Debian's docker-registry, started here (the tests' helper); the image is pushed to it
once by skopeo beforehand, not timed. An empty engine is the one honest pull: an engine that built or
pulled the base already holds its layers (and knows the registry's blobs after one pull), so its
pull downloads or writes none of them.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from bench.tool_speed import Install
from patcher.diagnose.probe import tree
from tests import images, realdata
from tests.helpers import readme_snippet
from tests.test_image_unrun import registry

ROUNDS = 3
CSV = Path(__file__).resolve().parent / "image_unrun.csv"
FIELDS = ("way", "median_s", "min_s", "max_s", "peak_mb", "rounds", "base", "date")
WAYS = ("verify --image", "docker pull + run, empty engine")
# verify in the container, with its own peak resident set printed after its JSON.
IN_CONTAINER = (
    "import resource, subprocess, sys; "
    "code = subprocess.run(['torch-lazylog', 'verify', '--json']).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(code)"
)
NO_ENGINE = "unix:///nonexistent/docker.sock"


def _rss_kb(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


class _Sampler(threading.Thread):
    """The resident set of a process and those below it, sampled until stopped: its peak above
    where it started."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.start_kb = _rss_kb(tree(pid))
        self.peak_kb = self.start_kb
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak_kb = max(self.peak_kb, _rss_kb(tree(self.pid)))


@contextlib.contextmanager
def empty_engine(work: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """A second dockerd with nothing in it: its own data root, exec root (its own containerd),
    socket and bridge, no iptables rules; yields its PID and the environment that reaches it.
    Stopped and its data root removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="engine-", dir=work))
    socket_path = root / "docker.sock"
    env = {"DOCKER_HOST": f"unix://{socket_path}"}
    # A bridge of its own: with --bridge=none dockerd deletes the host's docker0, the other engine's.
    bridge = f"tlbench{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", "name", bridge, "type", "bridge"], check=True)
    with (root / "dockerd.log").open("w") as log:
        engine = subprocess.Popen(
            ["dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
             "--pidfile", str(root / "dockerd.pid"), "--host", env["DOCKER_HOST"],
             f"--bridge={bridge}", "--iptables=false", "--ip-masq=false"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while images.docker("info", "--format", "{{.ServerVersion}}", env=env, timeout=30).returncode:
            assert engine.poll() is None, (root / "dockerd.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the empty engine did not answer in 120 s"
            time.sleep(0.5)
        yield engine.pid, env
    finally:
        engine.terminate()
        engine.wait(timeout=120)
        subprocess.run(["ip", "link", "delete", bridge], check=True)
        shutil.rmtree(root)


def unrun(script: Path, reference: str) -> tuple[float, float]:
    """Seconds and peak MB of `verify --image`, with no engine reachable."""
    start = time.monotonic()
    process = subprocess.Popen(
        [str(script), "verify", "--json", "--image", reference],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "DOCKER_HOST": NO_ENGINE},
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0, f"verify --image {reference} exited {process.returncode}"
    return time.monotonic() - start, usage.ru_maxrss / 1024


def pulled(name: str, work: Path) -> tuple[float, float]:
    """Seconds and peak MB of `docker pull` into an empty engine and verify run in the image."""
    with empty_engine(work) as (pid, env):
        sampler = _Sampler(pid)
        sampler.start()
        start = time.monotonic()
        done = images.docker("pull", "-q", name, env=env, timeout=3600)
        sampler.done.set()
        sampler.join()
        assert done.returncode == 0, done.stderr
        ran = images.docker(
            "run", "--rm", "--network=none", name, "python3", "-c", IN_CONTAINER, env=env, timeout=600
        )
        seconds = time.monotonic() - start
    assert ran.returncode == 0, ran.stderr
    container_kb = int(ran.stdout.splitlines()[-1])
    return seconds, (sampler.peak_kb - sampler.start_kb + container_kb) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    rounds = parser.parse_args().rounds
    base = images.rocm_base()
    patched = f"torch-lazylog-bench:unrun-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="torch-lazylog-bench-") as temporary, images.tool_named():
        work = Path(temporary)
        os.chdir(work)  # `-c` puts the current directory first on sys.path: never this checkout's patcher/
        install = Install(work)
        wheel = work / "dist" / install.wheel
        realdata.pip(["--python", str(install.python), "install", "--quiet", f"{wheel}[image]"], "oras")
        context = work / "context"
        context.mkdir()
        (context / "Dockerfile").write_text(f"FROM {base}\n{readme_snippet()}")
        built = images.docker("build", "-t", patched, str(context), env=images.BUILDKIT)
        assert built.returncode == 0, built.stderr
        try:
            with registry(work) as host:
                name = f"{host}/standin:patched"
                pushed = subprocess.run(
                    ["skopeo", "copy", "--dest-tls-verify=false", "--dest-compress-level=1",
                     f"docker-daemon:{patched}", f"docker://{name}"],
                    capture_output=True, text=True,
                )  # fmt: skip
                assert pushed.returncode == 0, pushed.stderr
                images.docker("image", "rm", "-f", patched, timeout=600)  # the registry holds it now
                results: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
                for number in range(rounds):
                    results[WAYS[0]].append(unrun(install.script, f"docker://{name}"))
                    results[WAYS[1]].append(pulled(name, work))
                    print(
                        f"round {number + 1}: "
                        + "; ".join(f"{k} {v[-1][0]:.1f} s, {v[-1][1]:.0f} MB" for k, v in results.items())
                    )
        finally:
            images.docker("image", "rm", "-f", patched, timeout=600)
        where = install.where()
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
    print(f"{where}; load average {os.getloadavg()[0]:.1f}")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
