"""A process that py-spy cannot read because it is stopped (SIGSTOP, Ctrl-Z: /proc/PID/status
`State: T (stopped)`) or traced (strace, a debugger: `TracerPid:` not 0, `t (tracing stop)` while
the tracer holds it): named so, with its tracer, before py-spy is tried. Read only: /proc/PID/status."""

from __future__ import annotations

import time

from patcher.diagnose.model import ProcessFacts, Unreadable
from patcher.diagnose.procs import ProcTable


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            text = file.read(16384).decode(errors="replace")
    except OSError:
        return {}
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


# Another reader's py-spy (a second diagnose, a probe's HEALTHCHECK) holds the process only for the
# moment of its dump: looked at again this many times, this far apart, before it is called traced.
PASSING = (5, 0.1)


def _tracer(status: dict[str, str]) -> int:
    tracer = status.get("TracerPid", "0")
    return int(tracer) if tracer.isdigit() else 0


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", "rb") as file:
            return file.read(64).decode(errors="replace").strip()
    except OSError:
        return ""


def read_by_spy(pid: int) -> bool:
    """Whether another reader's py-spy holds the process at this moment (its dump's attach)."""
    tracer = _tracer(_status(pid))
    return bool(tracer) and _comm(tracer) == "py-spy"


def held(process: ProcessFacts, table: ProcTable) -> Unreadable | None:
    """Unreadable `traced` (its tracer's PID and command line) or `stopped`; None when neither."""
    status = _status(process.pid)
    looks, apart = PASSING
    while looks > 1 and read_by_spy(process.pid):
        time.sleep(apart)
        looks, status = looks - 1, _status(process.pid)
    state, tracer = status.get("State", ""), status.get("TracerPid", "0")
    if tracer.isdigit() and int(tracer):
        seen = table.processes.get(int(tracer))
        what = f"PID {tracer} ({seen.command[:80]})" if seen else f"PID {tracer}"
        holds = ", which holds it stopped" if state[:1] in ("t", "T") else ""
        return Unreadable(process.pid, "traced", process.command, what + holds)
    if state[:1] == "T":
        return Unreadable(process.pid, "stopped", process.command, f"State: {state}")
    return None
