"""From a process's samples and its torch's state to one finding. Pure: tested on recorded dumps.

Eager: `OperatorIssue.operator_str` (torch/_inductor/exc.py) called directly from
`GraphLowering.call_function` (torch/_inductor/graph.py): the text torch < 2.13 builds for a log line
that is filtered out. Through logging (`LazyString.__str__`): a lazy torch building the text because
INFO is on for torch._inductor, which the patch does not make free.
"""

from __future__ import annotations

from typing import Literal

from patcher.core.errors import ExitCode
from patcher.diagnose.model import Finding, Frame, Kind, ProcessFacts, Sample, Stack, TorchFacts

Formatting = Literal["eager", "logging", "other"]
INNERMOST = 5  # frames shown when the process is not formatting
# A start is known to a clock tick (10 ms, rounded down): a change within this of it may predate it.
# Nothing is lost: a process imports graph.py seconds after it starts (torch's import alone takes that).
START_RESOLUTION = 0.05


def _named(frame: Frame, name: str, file: str) -> bool:
    last = frame.name.rsplit(".", 1)[-1]
    return last == name and frame.filename.replace("\\", "/").endswith(file)


def _is_str(frame: Frame) -> bool:
    return frame.name.rsplit(".", 1)[-1] == "__str__"


def formatting(stack: Stack) -> tuple[Formatting, int, int] | None:
    """How operator_str was reached in this stack, the __str__ depth above it, and its index."""
    frames = stack.frames
    for index, frame in enumerate(frames):
        if not _named(frame, "operator_str", "torch/_inductor/exc.py"):
            continue
        depth = sum(1 for inner in frames[:index] if _is_str(inner))
        caller = frames[index + 1] if index + 1 < len(frames) else None
        if caller is not None and _named(caller, "call_function", "torch/_inductor/graph.py"):
            return "eager", depth, index
        if caller is not None and _named(caller, "__str__", "torch/_logging/_internal.py"):
            return "logging", depth, index
        return "other", depth, index
    return None


def _shown(stack: Stack, index: int) -> tuple[Frame, ...]:
    """The innermost frame, operator_str and the two frames that called it."""
    frames = stack.frames
    return (frames[0], *frames[index : index + 3]) if index > 0 else frames[index : index + 3]


def _innermost(samples: list[Sample]) -> tuple[Frame, ...]:
    for sample in reversed(samples):
        stacks = sorted((s for s in sample if s.frames), key=lambda s: s.thread != "MainThread")
        if stacks:
            return stacks[0].frames[:INNERMOST]
    return ()


def _tally(samples: list[Sample], how: Formatting) -> tuple[int, int, tuple[Frame, ...]]:
    """Samples in which some thread formats the text `how`, the deepest chain, and its frames."""
    count, depth = 0, 0
    shown: tuple[Frame, ...] = ()
    for sample in samples:
        found = [(f, s) for s in sample if (f := formatting(s)) is not None and f[0] == how]
        count += bool(found)
        for (_, chain, index), stack in found:
            if chain >= depth:
                depth, shown = chain, _shown(stack, index)
    return count, depth, shown


def restart_needed(process: ProcessFacts, torch: TorchFacts | None) -> bool:
    changed = torch.changed if torch is not None else None
    return process.torch_replaced or (changed is not None and changed > process.started + START_RESOLUTION)


def _kind(eager: int, logging: int, torch: TorchFacts | None, restart: bool) -> tuple[Kind, ExitCode]:
    code = torch.code if torch is not None else None
    if eager:
        return "eager-formatting", ExitCode.EAGER
    if code == ExitCode.EAGER:
        return "eager-torch", ExitCode.EAGER
    if logging:  # the process runs the lazy call: what it imported before a change is gone
        return "info-formatting", ExitCode.OK
    if restart and code == ExitCode.OK:
        return "stale-import", ExitCode.EAGER
    if code == ExitCode.OK:
        return "lazy", ExitCode.OK
    return "unknown-torch", code if code is not None else ExitCode.ENVIRONMENT


def finding_of(process: ProcessFacts, samples: list[Sample], torch: TorchFacts | None) -> Finding:
    eager, eager_depth, eager_frames = _tally(samples, "eager")
    logging, logging_depth, logging_frames = _tally(samples, "logging")
    restart = restart_needed(process, torch)
    kind, code = _kind(eager, logging, torch, restart)
    if kind == "eager-formatting":
        count, depth, frames = eager, eager_depth, eager_frames
    elif kind == "info-formatting":
        count, depth, frames = logging, logging_depth, logging_frames
    else:
        count, depth, frames = 0, 0, _innermost(samples)
    return Finding(kind, code, len(samples), count, depth, frames, restart)
