"""Starts that sit silently for reasons other than the eager formatting, on real torch, on the CPU.

`python stalls.py TAG WHAT [ARG...]`, run by path in a torch venv's interpreter (imports nothing of
this checkout); TAG is an argument only, so a test can find its processes.

  lock SOURCE     cpp_extension.load("x", sources=[SOURCE]) (answer.cpp beside this file): with
                  $TORCH_EXTENSIONS_DIR/x/lock already there, it waits in FileBaton.wait before any
                  compiler is needed; prints `ready: x.answer() = 42` once built and loaded (after a
                  wait, torch < 2.14 imports without building: ImportError when nothing was built)
  hold LOCK       torch's FileBaton takes LOCK and keeps it (the fd stays open): a build in progress
  vendored DIR WHERE  with torch loaded, DIR's package `batonkit` (a copy of FileBaton under another
                  name, as aiter ships one) builds in WHERE: waits while WHERE/build.lock is there
  flock LOCK      filelock's FileLock takes LOCK (an flock) and keeps it; prints `held`
  flocked LOCK    with torch loaded, filelock's FileLock waits for LOCK (its acquire loop polls)
  flock-blocked LOCK  with torch loaded, fcntl.flock(LOCK_EX) waits for LOCK in the kernel
  baton LOCK      torch's FileBaton takes LOCK and keeps it, printing `acquired`; while LOCK is there,
                  prints `waiting` and waits in FileBaton.wait (then ends, as torch's waiter does)
  mark FILE       creates FILE and closes it (a download or warm-up marker), prints `marked`, lives on
  marker FILE     with torch loaded, waits in a `while os.path.exists(FILE)` loop (no lock protocol)
  soft LOCK       with torch loaded, filelock's SoftFileLock takes LOCK (waiting while another holds
                  it or an empty marker of an older filelock is there), prints `acquired`, lives on
  gate HOW ROOT   with torch loaded, Gate (a copy of FileBaton's protocol) takes ROOT's lock whose
                  path comes from HOW: `derived` (an attribute __init__ derives from its argument),
                  `method` (a method's return), `late` (an attribute set outside __init__); waits
                  while it is there, else prints `acquired` and keeps it
  ranks PORT      a launcher without torch starting two gloo ranks on 127.0.0.1:PORT, with torchrun's
                  variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE): rank 0 waits in barrier(),
                  rank 1 sits in hold_back()
  workers         Inductor's SubprocPool(2) with one long job; prints the sidecar's PID, then waits on
                  the job's result
  compile         compiles one new function after another, forever, printing a count after each
  fallback        a torch.compile'd function called with a new shape each time past Dynamo's
                  recompile limit (1), so it runs eagerly, forever; prints `eager` once it does
  fx GO OPS       torch.compile in TORCHINDUCTOR_FX_COMPILE_MODE (subprocess: each graph compiled in
                  Inductor's sidecar); compiles one function and prints `sidecar PID` (or `no sidecar`),
                  then, once the file GO exists, compiles a function of OPS operations and prints
                  `compiled`: with the sidecar killed meanwhile, a small graph waits on its future
                  forever, a large one (40 operations: about 110 kB pickled) blocks writing to the
                  sidecar's pipe (64 KiB, never read)
"""

import os
import subprocess
import sys
import time
from collections.abc import Callable


def lock(source: str) -> None:
    from torch.utils import cpp_extension

    print("loading", flush=True)
    module = cpp_extension.load("x", sources=[source])
    print(f"ready: x.answer() = {module.answer()}", flush=True)


def hold(path: str) -> None:
    from torch.utils.file_baton import FileBaton

    baton = FileBaton(path)
    assert baton.try_acquire(), f"{path} is taken"
    print("held", flush=True)
    time.sleep(3600)


def vendored(directory: str, where: str) -> None:
    import torch  # noqa: F401  (a server has torch loaded)

    sys.path.insert(0, directory)
    from batonkit.jit import build  # type: ignore[import-not-found]

    print("building", flush=True)
    build(where)


def flock(path: str, wait: bool) -> None:
    import importlib

    filelock = importlib.import_module("filelock")  # torch's own dependency, in the torch venv
    if wait:
        import torch  # noqa: F401

        print("waiting", flush=True)
    taken = filelock.FileLock(path)  # kept: a lock object collected releases its lock
    taken.acquire()
    print("held", flush=True)
    time.sleep(3600)


def flock_blocked(path: str) -> None:
    import fcntl

    import torch  # noqa: F401

    with open(path, "a") as file:
        print("waiting", flush=True)
        fcntl.flock(file, fcntl.LOCK_EX)
        print("held", flush=True)


def baton(path: str) -> None:
    from torch.utils.file_baton import FileBaton

    taken = FileBaton(path)
    if taken.try_acquire():
        print("acquired", flush=True)
        time.sleep(3600)
    print("waiting", flush=True)
    taken.wait()


def mark(path: str) -> None:
    open(path, "w").close()
    print("marked", flush=True)
    time.sleep(3600)


def marker(path: str) -> None:
    import torch  # noqa: F401

    print("waiting", flush=True)
    while os.path.exists(path):
        time.sleep(0.1)
    print("gone", flush=True)


def soft(path: str) -> None:
    import importlib

    import torch  # noqa: F401

    filelock = importlib.import_module("filelock")
    taken = filelock.SoftFileLock(path)  # kept: a lock object collected releases its lock
    print("waiting", flush=True)
    taken.acquire()
    print("acquired", flush=True)
    time.sleep(3600)


class Gate:
    """FileBaton's protocol (a file created exclusively, its fd kept open until it is removed), its
    lock's path built three other ways."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.derived = os.path.join(root, "derived.lock")
        self.fd: int | None = None

    def method(self) -> str:
        return os.path.join(self.root, "method.lock")

    def settle(self) -> None:
        self.late = self.root + "/late.lock"

    def try_acquire(self, path: str) -> bool:
        try:
            self.fd = os.open(path, os.O_CREAT | os.O_EXCL)
            return True
        except FileExistsError:
            return False

    def wait_derived(self) -> None:
        while os.path.exists(self.derived):
            time.sleep(0.1)

    def wait_method(self) -> None:
        while os.path.exists(self.method()):
            time.sleep(0.1)

    def wait_late(self) -> None:
        while os.path.exists(self.late):
            time.sleep(0.1)


def gate(how: str, root: str) -> None:
    import torch  # noqa: F401

    door = Gate(root)
    door.settle()
    path = {"derived": door.derived, "method": door.method(), "late": door.late}[how]
    if door.try_acquire(path):
        print("acquired", flush=True)
        time.sleep(3600)
    print("waiting", flush=True)
    getattr(door, f"wait_{how}")()


def ranks(port: str) -> int:
    """Two ranks as torchrun starts them: the rendezvous and each rank in their environment."""
    job = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2"}
    children = [
        subprocess.Popen(
            [sys.executable, __file__, sys.argv[1], "rank", port, str(r)],
            env=dict(os.environ, **job, RANK=str(r), LOCAL_RANK=str(r)),
        )
        for r in (0, 1)
    ]
    return max(child.wait() for child in children)


def hold_back() -> None:
    time.sleep(3600)  # a rank elsewhere: a cache miss, a lock, a slow load


def rank(port: str, number: int) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="env://")
    print(f"rank {number} joined", flush=True)
    if number == 0:
        dist.barrier()
    else:
        hold_back()


def workers() -> None:
    from torch._inductor.compile_worker.subproc_pool import SubprocPool

    pool = SubprocPool(2)
    future = pool.submit(time.sleep, 3600)
    print(f"sidecar {pool.process.pid} ", flush=True)
    future.result()


def compile_forever() -> None:
    import torch

    x = torch.randn(64)
    count = 0
    while True:
        count += 1
        scope: dict[str, object] = {}
        source = f"def f(x):\n    return torch.sin(x) * {count} + torch.cos(x * {count + 1})\n"
        exec(source, {"torch": torch}, scope)
        torch.compile(scope["f"])(x)
        print(count, flush=True)


def fallback() -> None:
    import torch
    import torch._dynamo.config

    torch._dynamo.config.recompile_limit = 1
    step = torch.compile(lambda x: (x @ x.T).relu().sum(), dynamic=False)
    size, shown = 64, False
    while True:
        size = size % 256 + 1
        step(torch.randn(size, 512))
        if size > 3 and not shown:
            print("eager", flush=True)
            shown = True


def fx(go: str, ops: int) -> None:
    import torch

    x = torch.randn(64)
    torch.compile(lambda x: torch.sin(x) * 2 + torch.cos(x))(x)
    pools = [c for c in _children() if "compile_worker" in c[1]]
    print(f"sidecar {pools[0][0]}" if pools else "no sidecar", flush=True)
    while not os.path.exists(go):
        time.sleep(0.1)
    body = "".join(f"    x = torch.sin(x) * {i} + x\n" for i in range(ops))
    scope: dict[str, object] = {}
    exec(f"def g(x):\n{body}    return x\n", {"torch": torch}, scope)
    torch.compile(scope["g"])(x)
    print("compiled", flush=True)


def _children() -> list[tuple[int, str]]:
    """This process's children: their PIDs and command lines."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as line:
                command = line.read().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid():
            found.append((int(entry), command))
    return found


# Each scenario by its name: its arguments as given on the command line.
SCENARIOS: dict[str, Callable[[list[str]], object]] = {
    "lock": lambda args: lock(args[0]),
    "hold": lambda args: hold(args[0]),
    "vendored": lambda args: vendored(args[0], args[1]),
    "flock-blocked": lambda args: flock_blocked(args[0]),
    "flock": lambda args: flock(args[0], wait=False),
    "flocked": lambda args: flock(args[0], wait=True),
    "baton": lambda args: baton(args[0]),
    "mark": lambda args: mark(args[0]),
    "marker": lambda args: marker(args[0]),
    "soft": lambda args: soft(args[0]),
    "gate": lambda args: gate(args[0], args[1]),
    "ranks": lambda args: ranks(args[0]),
    "rank": lambda args: rank(args[0], int(args[1])),
    "workers": lambda args: workers(),
    "compile": lambda args: compile_forever(),
    "fallback": lambda args: fallback(),
    "fx": lambda args: fx(args[0], int(args[1])),
}


def main(argv: list[str]) -> int:
    code = SCENARIOS[argv[2]](argv[3:])
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
