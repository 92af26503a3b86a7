"""What diagnose says: one paragraph per process, its JSON entry, and the one report of the run."""

from __future__ import annotations

import shlex
from typing import NamedTuple

from patcher.core.errors import Advice, ExitCode
from patcher.core.report import JsonValue, Report
from patcher.diagnose.model import Finding, Frame, ProcessFacts, TorchFacts
from patcher.diagnose.procs import Unreadable

# The most severe first: a process in the eager formatting is the answer, whatever else failed.
PRIORITY = (ExitCode.EAGER, ExitCode.ENVIRONMENT, ExitCode.REFUSED, ExitCode.USAGE, ExitCode.OK)


class Diagnosed(NamedTuple):
    process: ProcessFacts
    torch: TorchFacts
    finding: Finding
    exited: bool = False  # it ended while sampled: the finding is of the samples taken before


def _chain(frames: tuple[Frame, ...]) -> str:
    return " < ".join(f.where() for f in frames)


def _who(process: ProcessFacts) -> str:
    where = f", in a container: read through {process.root}" if process.container else ""
    return f"PID {process.pid} ({process.command[:120]}{where})"


def _formatting(d: Diagnosed) -> str:
    f = d.finding
    inner = f.frames[0].where() if f.depth else "none"
    called = _chain(f.frames[-3:-1]) if len(f.frames) >= 3 else _chain(f.frames)
    return (
        f"{f.in_formatting} of {f.samples} samples in {called}, under {f.depth} nested __str__ frames "
        f"(innermost: {inner})"
    )


def _where(d: Diagnosed) -> str:
    frames = d.finding.frames
    return f"innermost frames {_chain(frames)}" if frames else "no Python frames"


def _torch(d: Diagnosed) -> str:
    """verify's sentence on the torch it loaded (which names its version and directory)."""
    return f"the torch it loaded: {d.torch.message.rstrip('.')}"


def _restart(d: Diagnosed) -> str:
    if not d.finding.restart:
        return ""
    return (
        " torch's graph.py changed after this process started: it may still run what it imported "
        "before, so restart it."
    )


SAID = {
    "eager-formatting": "is in the eager formatting of the implicit-fallback text, the hang torch-lazylog "
    "fixes: {formatting}",
    "eager-torch": "is not formatting the text now ({where}), but the next deep graph it compiles can hang",
    "stale-import": "is not formatting the text now ({where})",
    "info-formatting": "builds the implicit-fallback text through logging: {formatting}. INFO is on for "
    "torch._inductor (TORCH_LOGS={logs}), so the text is built because it is emitted: the patch makes it "
    "lazy, not free; turn INFO off for torch._inductor (unset TORCH_LOGS, or take inductor out of it)",
    "lazy": "is not in the implicit-fallback formatting ({where})",
    "unknown-torch": "is not in the implicit-fallback formatting ({where})",
}


def next_step(d: Diagnosed, program: str = "torch-lazylog") -> str | None:
    """apply for the process's own interpreter, when its torch on disk is eager and it is; for the
    torch directory it loaded when that interpreter alone does not import it (PYTHONPATH, a user
    site, an editable install). `program` is how the user runs the tool (the console script, or the
    single file with its Python)."""
    if d.finding.code != ExitCode.EAGER or d.torch.code != ExitCode.EAGER:
        return None
    if not d.process.owns_torch and d.process.torch_dir is not None:
        return f"{program} apply --torch-dir {shlex.quote(d.process.torch_dir)}"
    return f"{program} apply --python {shlex.quote(d.process.interpreter)}"


def _advice(d: Diagnosed) -> str:
    if next_step(d) is None:
        return ""
    inside = " inside its container (docker exec, or the image's build step)" if d.process.container else ""
    torch = (
        f"the torch of {d.process.interpreter}"
        if d.process.owns_torch
        else f"the torch it loaded, {d.process.torch_dir}, which {d.process.interpreter} alone does not import"
    )
    return (
        f" Patch {torch}{inside}, then restart the process: a running process keeps the graph.py it imported."
    )


def paragraph(d: Diagnosed) -> str:
    said = SAID[d.finding.kind].format(
        formatting=_formatting(d) if d.finding.in_formatting else "",
        where=_where(d),
        logs=d.process.torch_logs or "unset",
    )
    return f"{_who(d.process)} {said}; {_torch(d)}.{_exited(d)}{_restart(d)}{_advice(d)}"


def _exited(d: Diagnosed) -> str:
    if not d.exited:
        return ""
    return f" It exited while it was sampled, after {d.finding.samples} sample(s)."


def _frames(frames: tuple[Frame, ...]) -> JsonValue:
    return [{"name": f.name, "filename": f.filename, "line": f.line} for f in frames]


ENTRY_FIELDS = (
    "pid", "exit_code", "finding", "message", "next", "command_line", "interpreter", "container", "torch_dir",
    "torch_dir_read_at", "torch_version", "state", "samples", "in_formatting", "str_depth", "frames", "restart",
)  # fmt: skip


def entry(d: Diagnosed, program: str = "torch-lazylog") -> dict[str, JsonValue]:
    p, f = d.process, d.finding
    return {
        "pid": p.pid,
        "exit_code": int(f.code),
        "finding": f.kind,
        "message": paragraph(d),
        "next": next_step(d, program),
        "command_line": p.command,
        "interpreter": p.interpreter,
        "container": p.container,
        "torch_dir": p.torch_dir,
        "torch_dir_read_at": p.torch_seen_at,
        "torch_version": d.torch.version,
        "state": d.torch.state,
        "samples": f.samples,
        "in_formatting": f.in_formatting,
        "str_depth": f.depth,
        "frames": _frames(f.frames),
        "restart": f.restart,
    }


def unreadable_entry(u: Unreadable) -> dict[str, JsonValue]:
    """The same fields, null where nothing was read (the frames an empty list)."""
    fields: dict[str, JsonValue] = dict.fromkeys(ENTRY_FIELDS)
    return fields | {"pid": u.pid, "exit_code": int(u.code), "message": u.message, "frames": []}


def code_of(codes: list[ExitCode]) -> ExitCode:
    return next((c for c in PRIORITY if c in codes), ExitCode.OK)


def report(found: list[Diagnosed], problems: list[Unreadable], program: str = "torch-lazylog") -> Report:
    """The run's one report: every process's paragraph, the code of the most severe."""
    code = code_of([d.finding.code for d in found] + [u.code for u in problems])
    first = next((d for d in found if d.finding.code == code), found[0] if found else None)
    lines = [paragraph(d) for d in found] + [u.message.rstrip(".") + "." for u in problems]
    text = "\n".join(lines)
    if first is None:
        return Report("diagnose", "unknown", False, text, code)
    state = first.torch.state
    shared = first.torch if len({d.process.torch_seen_at for d in found}) == 1 else None
    return Report(
        "diagnose",
        state,
        False,
        text,
        code,
        next=Advice(shown)
        if (shown := next((n for d in found if (n := next_step(d, program))), None))
        else None,
        torch_version=first.torch.version,
        torch_dir=first.process.torch_seen_at,
        graph_py=f"{first.process.torch_seen_at}/_inductor/graph.py",
        sha256=shared.sha256 if shared else None,
        release=shared.release if shared else None,
        match=shared.match if shared else None,
    )
