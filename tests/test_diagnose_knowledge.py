"""What diagnose knows of other projects is one table (patches/diagnose_knowledge.json): each row
names the releases it was read from, and a new lock class is one row, read by the code that matches
frames (pure: a made-up dump and table, milliseconds)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patcher.diagnose import claims, knowledge, locks, procs
from patcher.diagnose.model import Frame, Launch, ProcessFacts, Stack
from patcher.install import definitions

WAIT = "/venv/lib/python3/site-packages/filelock/_core/_acquire.py"


def _waiter(cls: str) -> Stack:
    """A thread in filelock 4's acquire loop, `self` an object of `cls` (as py-spy's --locals shows)."""
    frame = Frame("LockAcquisition._poll_until_acquired", WAIT, 177, (("self", f"<{cls} at 0x7f>"),))
    return Stack("MainThread", (frame, Frame("strict", "/srv/elsewhere.py", 32, ())))


@pytest.fixture
def table() -> dict[str, object]:
    """The shipped table, as data a test may change (the shipped one stays as loaded)."""
    data: dict[str, object] = json.loads(definitions.text(knowledge.NAME))
    return data


def _use(data: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = knowledge.parse(json.dumps(data))
    monkeypatch.setattr(knowledge, "load", lambda: parsed)


def test_every_row_names_the_releases_it_was_read_from() -> None:
    data = json.loads(definitions.text(knowledge.NAME))
    rows = [*data["locks"], *data["waits"], data["strict_claims"], *data["launchers"], *data["runtimes"]]
    assert rows and all(row["read_from"] for row in rows)
    known = knowledge.load()
    assert {k.protocol for k in known.locks} == {"baton", "soft", "strict", "kernel"}
    assert any("StrictSoftFileLock" in k.classes for k in known.locks)
    assert procs.launch_of({"RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}).master == (
        "127.0.0.1:29500"
    )


def test_a_row_without_its_releases_or_of_no_protocol_is_refused(table: dict[str, object]) -> None:
    rows = table["locks"]
    assert isinstance(rows, list)
    rows[0] = {k: v for k, v in rows[0].items() if k != "read_from"}
    with pytest.raises(knowledge.Malformed, match="read_from"):
        knowledge.parse(json.dumps(table))
    rows[0] = rows[1] | {"protocol": "sqlite"}
    with pytest.raises(knowledge.Malformed, match="unknown protocol"):
        knowledge.parse(json.dumps(table))


def test_a_new_filelock_class_is_one_row(table: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock class no row names waits in filelock's loop: a lock of unknown protocol (never at rest);
    one row makes it a soft lock the code reads as every SoftFileLock."""
    waiter = _waiter("ReadWriteSoftFileLock")
    assert locks.protocol_of(waiter) is None
    assert claims._wait_of(waiter) == ("unknown", waiter.frames[0])
    rows = table["locks"]
    assert isinstance(rows, list)
    rows.insert(0, {"protocol": "soft", "project": "filelock", "read_from": ["4.9.0"], "file":
                    "filelock/_core/_acquire.py", "functions": ["_poll_until_acquired"], "classes": ["ReadWriteSoftFileLock"]})  # fmt: skip
    _use(table, monkeypatch)
    found = locks.protocol_of(waiter)
    assert found is not None and found[0].protocol == "soft" and found[0].read_from == ("4.9.0",)
    assert claims._wait_of(waiter) is None  # read by locks, as every soft lock


def test_a_strict_soft_file_lock_is_named_by_its_row() -> None:
    waiter = _waiter("StrictSoftFileLock")
    found = locks.protocol_of(waiter)
    assert found is not None and found[0].protocol == "strict"
    assert claims._wait_of(waiter) == ("strict", waiter.frames[0])


def _this_process() -> ProcessFacts:
    return ProcessFacts(os.getpid(), "python x", "/venv/bin/python", 0.0, "", None, None, False, None, None,
                        True, 1, Launch(None, None, None, None, None))  # fmt: skip


def _loop(cls: str, lock: Path) -> Frame:
    """filelock 4's acquire loop's frame as a dump with --locals shows it, waiting on `lock`."""
    return (
        _waiter(cls).frames[0]._replace(locals=(("self", f"<{cls} at 0x7f>"), ("lock_filename", f'"{lock}"')))
    )


def _claim(directory: Path, name: str, pid: int, host: str) -> None:
    record = f"filelock-strict-v1\n{'0' * 32}\n{pid}\n{host.encode().hex()}\n1\n"
    (directory / f"held-v1-{name}.claim").write_text(record)


def test_a_strict_locks_holders_are_its_claims_pids(tmp_path: Path) -> None:
    """A claim of a live PID on this host is a holder; of a PID no process is, gone (the wait never
    ends on its own); of another host, a holder diagnose cannot prove gone. Pure but for the
    claims' files (made here) and one listing of /proc."""
    lock = tmp_path / "model.lock"
    lock.touch()
    claims_dir = tmp_path / "model.lock.filelock" / "claims"
    claims_dir.mkdir(parents=True)
    table = procs.read()
    gone = max(table.processes) + 100000
    process = _this_process()
    waiter = Stack("MainThread", (_loop("StrictSoftFileLock", lock),))
    _claim(claims_dir, "a", gone, os.uname().nodename)
    found = claims.waited(process, [(waiter,)], table)
    assert found is not None and (found.protocol, found.holders, found.claims) == ("strict", (), (gone,))
    _claim(claims_dir, "b", os.getpid(), os.uname().nodename)
    _claim(claims_dir, "c", 7, "elsewhere")
    found = claims.waited(process, [(waiter,)], table)
    assert found is not None and [h.pid for h in found.holders] == [os.getpid(), 7]
    assert "on host elsewhere" in found.holders[1].command and found.claims == (gone,)


def test_a_soft_lock_waiter_caught_inside_one_try_is_read_from_its_loop(tmp_path: Path) -> None:
    """filelock's loop calls a dozen functions a round: a dump may catch the waiter inside one try
    (its innermost frame `_acquire`, not the loop's), as the last dump did in a CI run under load.
    The lock is read from the loop's frame all the same; a thread that never sleeps in the loop
    (stuck inside a try, on a mount that does not answer) is not read as waiting on it."""
    lock = tmp_path / "model.lock"
    lock.touch()
    process = _this_process()
    loop = _loop("SoftFileLock", lock)
    sleeping = Stack("MainThread", (loop,))
    trying = Stack("MainThread", (Frame("SoftFileLock._acquire", WAIT.replace("_core/_acquire", "_soft"), 40, ()),
                                  loop._replace(line=158)))  # fmt: skip
    table = procs.read()
    found = locks.waited(process, [(sleeping,), (sleeping,), (trying,)], table, [])
    assert found is not None and (found.protocol, found.path, found.holders) == ("soft", str(lock), ())
    assert found.waiting is not None and found.waiting.name == "LockAcquisition._poll_until_acquired"
    assert locks.waited(process, [(trying,), (trying,), (trying,)], table, []) is None
