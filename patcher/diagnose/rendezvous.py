"""Ranks by their rendezvous, when no launcher's variables say: processes connected to one TCP store
are one job (torch.distributed's init_method="tcp://HOST:PORT" with rank= and world_size=, as
torch.multiprocessing.spawn code and many launch scripts start them). Rank 0 listens on PORT, every
rank connects to it: /proc/PID/net/tcp and tcp6 give the sockets of the process's network namespace
(their ports, states and inodes), and the processes' open files (procs: each fd's device and inode)
say whose each socket is. A process connected to no other's listening socket is no rank.

Pure but for `read`: the tables of /proc/PID/net and one socket of its own, whose device is the one
every socket's inode lives on (nothing is sent or bound).
"""

from __future__ import annotations

import ipaddress
import os
from collections import defaultdict
from typing import NamedTuple

from patcher.diagnose import procs
from patcher.diagnose.model import ProcessFacts
from patcher.diagnose.procs import ProcTable

LISTEN, ESTABLISHED = "0A", "01"  # the kernel's TCP states, as /proc/net/tcp shows them


class Socket(NamedTuple):
    local: tuple[str, int]
    remote: tuple[str, int]
    state: str
    inode: int


def _address(text: str) -> str:
    """An address of /proc/net/tcp(6): hex of the kernel's 32-bit words, each in host order."""
    words = bytes.fromhex(text)
    raw = b"".join(words[i : i + 4][::-1] for i in range(0, len(words), 4))
    address = ipaddress.ip_address(raw)
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped or address)


def parse(text: str) -> list[Socket]:
    """The rows of /proc/net/tcp or tcp6: `sl local rem st ... inode ...`."""
    found = []
    for line in text.splitlines()[1:]:
        words = line.split()
        try:
            (local, lport), (remote, rport) = (w.split(":") for w in words[1:3])
            found.append(
                Socket(
                    (_address(local), int(lport, 16)),
                    (_address(remote), int(rport, 16)),
                    words[3],
                    int(words[9]),
                )
            )
        except (IndexError, ValueError):
            continue
    return found


def stores(rows: list[Socket], owners: dict[int, int]) -> dict[int, str]:
    """Every process connected to another's (or its own) listening socket, by the store it is in:
    the listening socket most processes connect to, of the processes tied by such connections (a
    rank 0 listens on the store's port and on its own transport's; every rank connects to the
    store). `owners`: a socket's inode to its process."""
    listening = {r.local[1]: owners[r.inode] for r in rows if r.state == LISTEN and r.inode in owners}
    local = {r.local[0] for r in rows}
    clients: dict[int, set[int]] = defaultdict(set)  # a listening port: the processes connected to it
    named: dict[int, str] = {}
    for row in rows:
        port, address = row.remote[1], row.remote[0]
        mine = address in local or ipaddress.ip_address(address).is_loopback
        if row.state == ESTABLISHED and row.inode in owners and port in listening and mine:
            clients[port].add(owners[row.inode])
            named.setdefault(port, f"{address}:{port}")
    group = {pid: pid for port in clients for pid in (listening[port], *clients[port])}

    def root(pid: int) -> int:
        while group[pid] != pid:
            pid = group[pid]
        return pid

    for port, connected in clients.items():
        for pid in connected:
            group[root(pid)] = root(listening[port])
    best: dict[int, tuple[int, int]] = {}  # a group: its store's (-processes, port)
    for port, connected in clients.items():
        key, here = root(listening[port]), (-len(connected | {listening[port]}), port)
        best[key] = min(best.get(key, here), here)
    found = {}
    for pid in group:
        port = best[root(pid)][1]
        if len(clients[port] | {listening[port]}) > 1:  # a process connected to itself alone is no job
            found[pid] = named[port]
    return found


def read(table: ProcTable, pids: list[int]) -> dict[int, str]:
    """The store of every process of the network namespaces of `pids` that is in one."""
    device = procs.socket_device()
    if device is None:
        return {}
    owners = {
        ino: seen.pid for seen in table.processes.values() for dev, ino in seen.files or () if dev == device
    }
    found: dict[int, str] = {}
    spaces: set[str] = set()
    for pid in pids:
        try:
            space = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        if space in spaces:
            continue
        spaces.add(space)
        rows = []
        for name in ("tcp", "tcp6"):
            try:
                with open(f"/proc/{pid}/net/{name}", "rb") as file:
                    rows += parse(file.read().decode(errors="replace"))
            except OSError:
                continue
        found |= stores(rows, owners)
    return found


def joined(facts: list[ProcessFacts], table: ProcTable) -> tuple[list[ProcessFacts], list[ProcessFacts]]:
    """The processes with their store where no launcher's variables name a job (nor those of any
    process of that store); and the processes of the same stores not among them, read (their mates,
    as job_of reads a launcher's)."""
    if not facts:
        return facts, []
    found = read(table, [p.pid for p in facts])
    launched = {  # a launcher's job (torchrun's agent hosts its ranks' store): its variables say it
        store
        for pid, store in found.items()
        if pid in table.processes and procs.launch_of(table.processes[pid].env).job
    }
    found = {pid: store for pid, store in found.items() if store not in launched}
    out = [
        p._replace(launch=p.launch._replace(store=found[p.pid]))
        if p.launch.job is None and p.pid in found
        else p
        for p in facts
    ]
    wanted = {p.launch.store for p in out if p.launch.store}
    mine = {p.pid for p in facts}
    mates = []
    for pid, store in found.items():
        seen = table.processes.get(pid)
        if store in wanted and pid not in mine and seen is not None:
            read_ = procs.read_process(seen)
            if isinstance(read_, ProcessFacts) and read_.launch.job is None:
                mates.append(read_._replace(launch=read_.launch._replace(store=store)))
    return out, mates
