"""Waits diagnose reads from what others ship or do, on real torch, on the CPU (issue 60).

`python elsewhere.py TAG WHAT [ARG...]`, run by path in a torch venv's interpreter (imports nothing of
this checkout); TAG is an argument only, so a test can find its processes.

  strict LOCK     with torch loaded, filelock's StrictSoftFileLock takes LOCK (waiting while another
                  holds it), prints `acquired`, lives on
  idle            with torch loaded, prints `idle` and sleeps (a server to stop or to trace)
  shared DIR      takes DIR's flock shared, as `verify` takes the torch directory's, prints `held`
  ranks PORT      a parent with torch loaded starting two gloo ranks that meet at
                  init_method="tcp://127.0.0.1:PORT" with rank= and world_size= and no launcher's
                  variables: rank 0 waits in barrier(), rank 1 sits in hold_back()
"""

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Callable

LAUNCHERS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


def strict(path: str) -> None:
    import importlib

    import torch  # noqa: F401

    filelock = importlib.import_module("filelock")
    taken = filelock.StrictSoftFileLock(path)  # kept: a lock object collected releases its lock
    print("waiting", flush=True)
    taken.acquire()
    print("acquired", flush=True)
    time.sleep(3600)


def idle() -> None:
    import torch  # noqa: F401

    print("idle", flush=True)
    time.sleep(3600)


def shared(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    print("held", flush=True)
    time.sleep(3600)


def ranks(port: str) -> int:
    import torch  # noqa: F401  (the parent a script runs: torch loaded, as torch.multiprocessing's is)

    env = {k: v for k, v in os.environ.items() if k not in LAUNCHERS}
    children = [
        subprocess.Popen([sys.executable, __file__, sys.argv[1], "rank", port, str(r)], env=env)
        for r in (0, 1)
    ]
    print("started", flush=True)
    return max(child.wait() for child in children)


def hold_back() -> None:
    time.sleep(3600)  # a rank elsewhere: a cache miss, a lock, a slow load


def rank(port: str, number: int) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=number, world_size=2)
    print(f"rank {number} joined", flush=True)
    if number == 0:
        dist.barrier()
    else:
        hold_back()


SCENARIOS: dict[str, Callable[[list[str]], object]] = {
    "strict": lambda args: strict(args[0]),
    "idle": lambda args: idle(),
    "shared": lambda args: shared(args[0]),
    "ranks": lambda args: ranks(args[0]),
    "rank": lambda args: rank(args[0], int(args[1])),
}


def main(argv: list[str]) -> int:
    code = SCENARIOS[argv[2]](argv[3:])
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
