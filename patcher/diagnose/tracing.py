"""A process that py-spy cannot read because it is stopped (SIGSTOP, Ctrl-Z: /proc/PID/status
`State: T (stopped)`) or traced (strace, a debugger: `TracerPid:` not 0, `t (tracing stop)` while
the tracer holds it): named so, with its tracer, before py-spy is tried. Read only: /proc/PID/status."""

from __future__ import annotations

from patcher.diagnose.model import ProcessFacts, Unreadable
from patcher.diagnose.procs import ProcTable


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            text = file.read(16384).decode(errors="replace")
    except OSError:
        return {}
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def held(process: ProcessFacts, table: ProcTable) -> Unreadable | None:
    """Unreadable `traced` (its tracer's PID and command line) or `stopped`; None when neither."""
    status = _status(process.pid)
    state, tracer = status.get("State", ""), status.get("TracerPid", "0")
    if tracer.isdigit() and int(tracer):
        seen = table.processes.get(int(tracer))
        what = f"PID {tracer} ({seen.command[:80]})" if seen else f"PID {tracer}"
        holds = ", which holds it stopped" if state[:1] in ("t", "T") else ""
        return Unreadable(process.pid, "traced", process.command, what + holds)
    if state[:1] == "T":
        return Unreadable(process.pid, "stopped", process.command, f"State: {state}")
    return None
