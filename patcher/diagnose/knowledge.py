"""What diagnose knows of other projects, as data (patches/diagnose_knowledge.json, shipped beside
the findings' table): the lock protocols and the frames that wait on them, the variables a launcher
puts in a rank's environment, and how a runtime or orchestrator names a container. Each row carries
the releases it was read from. Parsed and checked once; a malformed table fails loudly here, never
as a silent miss in a judge."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, NamedTuple, get_args

from patcher.diagnose.model import Protocol
from patcher.install import definitions

NAME = "diagnose_knowledge.json"


class KnownWait(NamedTuple):
    """A lock's waiting frame: its file (the end of its path), its functions, and the class of the
    object that waits (py-spy shows `self` as `<CLASS at 0x...>`; () for any)."""

    protocol: Protocol
    file: str
    functions: tuple[str, ...]
    classes: tuple[str, ...] = ()
    project: str = ""
    read_from: tuple[str, ...] = ()


class LockWait(NamedTuple):
    """A frame that waits on a lock whatever its class: a wait there no KnownWait names is a lock of
    unknown protocol."""

    file: str
    functions: tuple[str, ...]


class Claims(NamedTuple):
    """Where filelock's StrictSoftFileLock keeps its claims, and the lines of a claim's record."""

    directory: str  # `{lock}` is the lock's path
    magic: str  # how a claim's record starts
    magic_line: int
    pid_line: int
    hostname_hex_line: int


class Launcher(NamedTuple):
    """The variables a launcher puts in each rank's environment."""

    name: str
    run_id: str
    master_addr: str
    master_port: str
    rank: str
    world_size: str
    local_world_size: str


class Runtime(NamedTuple):
    """How a runtime or orchestrator names a container: a pattern of its cgroup (its ID in group 1,
    kept to `id_length`), a file it puts in the container's root with a hostname pattern, a variable
    it sets."""

    name: str
    cgroup: re.Pattern[str] | None
    id_length: int
    file: str | None
    hostname: re.Pattern[str] | None
    variable: str | None


class Knowledge(NamedTuple):
    locks: tuple[KnownWait, ...]
    waits: tuple[LockWait, ...]
    claims: Claims
    launchers: tuple[Launcher, ...]
    runtimes: dict[str, Runtime]


class Malformed(ValueError):
    """The table breaks its own shape (a row without its versions, an unknown protocol)."""


def _versions(row: dict[str, Any], what: str) -> tuple[str, ...]:
    found = row.get("read_from")
    if not isinstance(found, list) or not found or not all(isinstance(v, str) and v for v in found):
        raise Malformed(f"{what}: every row names the releases it was read from (read_from)")
    return tuple(found)


def _lock(row: dict[str, Any]) -> KnownWait:
    if row.get("protocol") not in get_args(Protocol):
        raise Malformed(f"locks: unknown protocol {row.get('protocol')!r} in {row}")
    return KnownWait(
        row["protocol"], row["file"], tuple(row["functions"]), tuple(row.get("classes", ())), row["project"],
        _versions(row, "locks"),
    )  # fmt: skip


def _runtime(row: dict[str, Any]) -> Runtime:
    _versions(row, "runtimes")
    pattern = row.get("cgroup")
    named = row.get("hostname")
    return Runtime(
        row["name"], re.compile(pattern) if pattern else None, int(row.get("id_length", 0)), row.get("file"),
        re.compile(named) if named else None, row.get("variable"),
    )  # fmt: skip


def parse(text: str) -> Knowledge:
    data = json.loads(text)
    launchers = []
    for row in data["launchers"]:
        _versions(row, "launchers")
        launchers.append(Launcher(*(row[f] for f in Launcher._fields)))
    claims = data["strict_claims"]
    _versions(claims, "strict_claims")
    waits = []
    for row in data["waits"]:
        _versions(row, "waits")
        waits.append(LockWait(row["file"], tuple(row["functions"])))
    runtimes = {r.name: r for r in map(_runtime, data["runtimes"])}
    if not {"docker", "kubernetes"} <= set(runtimes) or not launchers:
        raise Malformed("runtimes: docker and kubernetes are named; launchers: one at least")
    return Knowledge(
        tuple(map(_lock, data["locks"])),
        tuple(waits),
        Claims(*(claims[f] for f in Claims._fields)),
        tuple(launchers),
        runtimes,
    )


@functools.cache
def load() -> Knowledge:
    return parse(definitions.text(NAME))
