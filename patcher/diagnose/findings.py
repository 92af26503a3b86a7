"""diagnose's one table (patches/diagnose_findings.json, shipped as patcher/patches/): each kind of
finding with its ID, exit code, severity, sentence and step, the frames that match it and the evidence
it reads; each reason a process could not be read with its exit code and sentence. Parsed into typed
declarations that judge, render and the JSON read; matching a stack against them is pure."""

from __future__ import annotations

import functools
import json
from typing import Any, NamedTuple

from patcher.core.exitcodes import ExitCode
from patcher.diagnose.model import FindingKind, Frame, Problem, Stack
from patcher.install import definitions

NAME = "diagnose_findings.json"
TORCH_CODE = "TORCH"  # the code of the loaded torch's state (verify's)


class FramePattern(NamedTuple):
    files: tuple[str, ...]  # a file's path from its package on; one ending in "/" is a directory
    functions: tuple[str, ...]  # the function's own name (py-spy qualifies it on 3.11+); "*": any

    def matches(self, frame: Frame) -> bool:
        name = frame.name.rsplit(".", 1)[-1]
        return ("*" in self.functions or name in self.functions) and any(
            in_file(frame.filename, f) for f in self.files
        )


ThreadPattern = tuple[FramePattern, ...]  # every one present in one thread's stack


class Declaration(NamedTuple):
    """One kind of finding as the table declares it."""

    id: str
    kind: FindingKind
    code: ExitCode | None  # None: the loaded torch's (verify's) code
    first: bool  # outranks every exit code: the hang torch-lazylog fixes, seen in the act
    said: str
    next: str | None
    threads: tuple[ThreadPattern, ...]  # empty: judged by code (`judged`)
    evidence: str | None  # "lock", "workers" or "peers"
    when: tuple[tuple[str, bool], ...]
    judged: str | None  # "formatting", "progress", "torch" or "peers"
    ends: bool = True  # the state ends on its own (a probe's exit 0); False: only a person ends it

    @property
    def waits_on_lock(self) -> bool:
        """A lock's finding: matched by what the code does, not by its frames (patcher/diagnose/locks.py)."""
        return self.evidence == "lock" and not self.threads


class Unread(NamedTuple):
    """A reason a process could not be read, as the table declares it."""

    code: ExitCode  # OK: a note, which changes no exit code
    said: dict[str, str]  # the sentence, by the reader's rights where they decide it ("any" otherwise)


class Phase(NamedTuple):
    frame: FramePattern
    phase: str  # may name `{function}`


class Catalog(NamedTuple):
    findings: tuple[Declaration, ...]
    unread: dict[Problem, Unread]
    severity: tuple[ExitCode, ...]  # the exit codes, most severe first: the run's exit is the first met
    helpers: tuple[str, ...]  # a command line naming one of these is a helper of its parent
    phases: tuple[Phase, ...]
    importing: tuple[FramePattern, ...]  # a stack with one of these imports: busy, but not compiling

    def by_kind(self, kind: str) -> Declaration:
        return next(r for r in self.findings if r.kind == kind)

    def matched(self) -> tuple[Declaration, ...]:
        return tuple(r for r in self.findings if r.threads)


def in_file(filename: str, pattern: str) -> bool:
    path = "/" + filename.replace("\\", "/")
    return f"/{pattern}" in path if pattern.endswith("/") else path.endswith(f"/{pattern}")


def _frame(data: dict[str, Any]) -> FramePattern:
    files, functions = data["file"], data["function"]
    return FramePattern(
        tuple([files] if isinstance(files, str) else files),
        tuple([functions] if isinstance(functions, str) else functions),
    )


def _declared(data: dict[str, Any]) -> Declaration:
    return Declaration(
        id=data["id"],
        kind=data["kind"],
        code=None if data["code"] == TORCH_CODE else ExitCode[data["code"]],
        first=data.get("first", False),
        said=data["said"],
        next=data.get("next"),
        threads=tuple(tuple(map(_frame, thread)) for thread in data.get("threads", [])),
        evidence=data.get("evidence"),
        when=tuple(data.get("when", {}).items()),
        judged=data.get("judged"),
        ends=data["ends"],
    )


def parse(text: str) -> Catalog:
    data = json.loads(text)
    return Catalog(
        findings=tuple(map(_declared, data["findings"])),
        unread={
            why: Unread(ExitCode[u["code"]], u["said"] if isinstance(u["said"], dict) else {"any": u["said"]})
            for why, u in data["unread"].items()
        },
        severity=tuple(ExitCode[code] for code in data["severity"]),
        helpers=tuple(data["helpers"]),
        phases=tuple(Phase(_frame(p), p["phase"]) for p in data["phases"]),
        importing=tuple(map(_frame, data["importing"])),
    )


@functools.cache
def load() -> Catalog:
    return parse(definitions.text(NAME))


def thread_matches(stack: Stack, pattern: ThreadPattern) -> bool:
    return all(any(p.matches(frame) for frame in stack.frames) for p in pattern)


def sample_matches(sample: tuple[Stack, ...], declared: Declaration) -> bool:
    return bool(declared.threads) and all(any(thread_matches(s, t) for s in sample) for t in declared.threads)


def waiting_frame(sample: tuple[Stack, ...], declared: Declaration) -> Frame | None:
    """Where the process waits: the outermost frame the first thread pattern names (the caller that
    decided to wait: `AsyncCompile.wait` over `Future.result`)."""
    for stack in sample:
        if declared.threads and thread_matches(stack, declared.threads[0]):
            return [f for f in stack.frames if any(p.matches(f) for p in declared.threads[0])][-1]
    return None
