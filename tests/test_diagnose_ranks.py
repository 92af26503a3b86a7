"""Ranks by their rendezvous, live on real torch 2.10.0 (tests/scenarios/elsewhere.py): two gloo
ranks a script started with init_method="tcp://127.0.0.1:PORT", rank= and world_size= and no
launcher's variables are one job, as their connections to one store say (issue 60)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from patcher.diagnose.rendezvous import ESTABLISHED, LISTEN, Socket, parse, stores
from tests.conftest import torch_venv
from tests.diagnosing import argv, diagnose_json, diagnose_text, running
from tests.stalling import TAG, children, printed, reaches

SCENARIO = Path(__file__).parent / "scenarios" / "elsewhere.py"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.e2e
def test_script_started_ranks_are_one_job_by_their_store(tmp_path: Path) -> None:
    """Rank 0 in barrier() names rank 1 and the barrier; rank 1 names rank 0; their parent (torch
    loaded, eager) gets the stall's step first, not apply's."""
    python = torch_venv("2.10.0") / "bin" / "python"
    command = [str(python), str(SCENARIO), TAG, "ranks", str(_free_port())]
    with running(command, tmp_path, "ranks") as parent:
        ranks = children(parent.pid, 2)
        by_rank = {argv(pid)[-1]: pid for pid in ranks}
        waiting, odd = by_rank["0"], by_rank["1"]
        reaches(waiting, "barrier", "torch/distributed/distributed_c10d.py")
        reaches(odd, "hold_back", "elsewhere.py")
        printed(tmp_path, "ranks", "rank 1 joined")

        code, report, _ = diagnose_json(str(waiting))
        (first,) = report["processes"]
        assert (code, first["finding"]) == (6, "ranks-out-of-step"), report
        assert first["evidence"]["collective"] == "barrier" and [
            r["pid"] for r in first["evidence"]["odd"]
        ] == [odd], first

        code, report, _ = diagnose_json(str(odd))
        (alone,) = report["processes"]
        assert (code, alone["finding"]) == (6, "rank-awaited"), report
        assert alone["evidence"]["awaited_by"] == [waiting], alone

        text = diagnose_text(str(parent.pid))
        lines = text.stdout.splitlines()
        assert text.returncode == 6 and "apply" not in lines[-1], text.stdout
        assert lines[-1].startswith("Next: ") and f"--pid {odd}" in lines[-1], text.stdout


@pytest.mark.e2e
def test_an_unrelated_process_with_a_socket_is_no_rank(tmp_path: Path) -> None:
    """A torch process in neither a launcher's variables nor a store's connections is judged alone."""
    command = [str(torch_venv("2.10.0") / "bin" / "python"), str(SCENARIO), TAG, "idle"]
    with running(command, tmp_path, "idle") as server:
        printed(tmp_path, "idle", "idle")
        code, report, _ = diagnose_json(str(server.pid))
        (entry,) = report["processes"]
        assert entry["finding"] not in ("rank-awaited", "ranks-out-of-step"), report
        assert code in (0, 1), report


def test_processes_connected_to_one_store_are_one_job_and_others_none() -> None:
    """Rank 0 (PID 10) listens on the store's port and its transport's, rank 1 (11) on its own; each
    connects to the store and to the other's transport. A lone listener (12), a client of a store on
    another host (13) and a process connected to itself alone (14) are in no job."""
    loop, far = "127.0.0.1", "10.0.0.5"
    rows = [
        Socket((loop, 29500), ("0.0.0.0", 0), LISTEN, 1), Socket(("0.0.0.0", 40000), ("0.0.0.0", 0), LISTEN, 2),
        Socket(("0.0.0.0", 40001), ("0.0.0.0", 0), LISTEN, 3), Socket((loop, 5000), (loop, 29500), ESTABLISHED, 4),
        Socket((loop, 5001), (loop, 29500), ESTABLISHED, 5), Socket((loop, 5002), (loop, 40000), ESTABLISHED, 6),
        Socket((loop, 5003), (loop, 40001), ESTABLISHED, 7), Socket(("0.0.0.0", 8000), ("0.0.0.0", 0), LISTEN, 8),
        Socket((loop, 5004), (far, 29500), ESTABLISHED, 9), Socket((loop, 9000), ("0.0.0.0", 0), LISTEN, 10),
        Socket((loop, 5005), (loop, 9000), ESTABLISHED, 11),
    ]  # fmt: skip
    owners = {1: 10, 2: 10, 3: 11, 4: 10, 5: 11, 6: 11, 7: 10, 8: 12, 9: 13, 10: 14, 11: 14}
    assert stores(rows, owners) == {10: "127.0.0.1:29500", 11: "127.0.0.1:29500"}
    mapped = "0000000000000000FFFF00000100007F:90F7 0000000000000000FFFF00000100007F:9E9E"
    (row,) = parse(f"header\n   0: {mapped} 01 0:0 0:0 0 0 0 4242 1 0\n")
    assert row == Socket(("127.0.0.1", 0x90F7), ("127.0.0.1", 0x9E9E), ESTABLISHED, 4242)
