"""A finding's steps as data, each with where it runs, for each place diagnose stands (pure: the
recorded FileBaton wait of tests/data, judged and rendered); and the one bound on a read that waits
on a file system."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from patcher.diagnose import locks, procs, render
from patcher.diagnose.model import Hidden, Mount, Position, Reach, Start
from patcher.diagnose.steps import Step, Where
from tests.diagnosing import LOCK, WORDS, evidence, judged, waiting_lock

# diagnose exec'd into the container of the waiting PID 1 (its PID and mount namespaces), as root
EXEC = Reach(
    same_mounts=True, mount_rights=False, pid_one_here=True, own_pid_namespace=True, container="3f2a9c1b7d4e",
    pod=None, position=Position.EXEC,
)  # fmt: skip
INIT = Start(1, "/srv", ("/venv/bin/python", "server.py"), (("TORCH_EXTENSIONS_DIR", "/tmp/run/ext"),), True)
DOCS = Path(__file__).resolve().parent.parent / "docs" / "diagnose.md"


def test_exec_d_into_the_container_of_a_waiting_pid_1_removes_here_then_restarts_from_the_host() -> None:
    """No start beside the PID 1 that still waits: the removal here, then its runtime's restart."""
    d = judged("jit-lock-wait", evidence(lock=waiting_lock(LOCK, LOCK, 75.0, ()), start=INIT, reach=EXEC))
    assert d.finding.kind == "jit-lock-stale"
    assert render.steps_of(d, WORDS) == (
        Step(f"rm -- {LOCK}"),
        Step("docker restart 3f2a9c1b7d4e", Where.HOST),
    )
    assert render.next_step(d, WORDS) == f"rm -- {LOCK}"
    assert render.step_lines(d, WORDS) == ("Next (the host or orchestrator): docker restart 3f2a9c1b7d4e",)


@pytest.mark.parametrize(
    ("hidden", "reach", "step"),
    [
        pytest.param(("unreadable", "not-root"), EXEC, Step("torch-lazylog diagnose 4242", Where.HERE_AS_ROOT),
                     id="another-user"),
        pytest.param(("pid-namespace",), EXEC, Step("torch-lazylog diagnose", Where.NODE_ROOT), id="namespace"),
        pytest.param(("pid-namespace",), EXEC, Step(
            "torch-lazylog diagnose $(docker inspect -f '{{.State.Pid}}' 3f2a9c1b7d4e)", Where.NODE_ROOT),
            id="namespace-pid-1"),
    ],
)  # fmt: skip
def test_a_lock_not_proven_left_behind_gets_the_read_that_can_prove_it_never_a_removal(
    hidden: tuple[Hidden, ...], reach: Reach, step: Step
) -> None:
    lock = waiting_lock(LOCK, LOCK, 75.0, (), seen=False, not_in_view=hidden, unread=1)
    start = INIT if "inspect" in step.run else None
    d = judged("jit-lock-wait", evidence(lock=lock, start=start, reach=reach))
    assert d.finding.kind == "jit-lock-unseen"
    assert render.steps_of(d, WORDS) == (step,) and render.next_step(d, WORDS) is None
    said = render.paragraph(d, WORDS)
    assert "Do not remove" in said and "rm " not in said
    if "unreadable" in hidden:
        assert "1 process could not be read" in said and "does not run as root" in said


def test_the_docs_list_every_place_a_step_runs_and_every_reason_a_holder_is_not_in_view() -> None:
    text = DOCS.read_text()
    section = text[text.index("## Where it stands") : text.index("## What it says")]
    assert {w.value for w in Where} <= set(re.findall(r"`([a-z ]+)`", section))
    assert set(Hidden.__args__) <= set(re.findall(r"`([a-z-]+)`", section))  # type: ignore[attr-defined]
    assert {p.value for p in Position if p is not Position.OTHER} <= set(re.findall(r"`([a-z-]+)`", section))


def test_a_read_that_does_not_return_is_not_read_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stat on a dead mount never returns: the read is left to its thread, the caller told."""
    monkeypatch.setattr(procs, "BOUND", 0.05)
    never = threading.Event()
    with pytest.raises(OSError, match="not read in time"):
        procs.bounded(never.wait)
    never.set()
    assert procs.bounded(lambda: 42) == 42
    with pytest.raises(FileNotFoundError):
        procs.bounded(lambda: Path("/nonexistent/file").read_bytes())


@pytest.mark.parametrize(
    ("options", "hides"),
    [
        ("rw", False),
        ("rw,hidepid=0", False),
        ("rw,hidepid=2", True),
        ("rw,hidepid=invisible,subset=pid", True),
    ],
)
def test_a_reader_not_root_misses_processes_only_where_proc_hides_them(options: str, hides: bool) -> None:
    """Another user's processes are listed, and counted unreadable, unless /proc's hidepid hides them."""
    mountinfo = f"1 0 8:1 / / rw - ext4 /dev/root rw\n22 1 0:21 / /proc rw,relatime - proc proc {options}\n"
    assert locks.hides_others(mountinfo) is hides
    assert locks.hides_others("1 0 8:1 / / rw - ext4 /dev/root rw\n") is True


def test_a_file_not_read_in_time_or_on_no_mount_or_on_other_hosts_is_never_in_view() -> None:
    """Whatever the reader's rights: a lock file that did not answer, one whose mount could not be
    read, and one on a network filesystem are each a reason, named, that its holders are not proven gone."""
    assert {"not-read-in-time", "mount"} <= set(locks.out_of_view(None, 0, late=True))
    nfs = Mount("/home", "nfs4", "server:/export")
    assert "other-hosts" in locks.out_of_view(nfs, 0, late=False)
    assert "other-hosts" not in locks.out_of_view(Mount("/", "overlay", "overlay"), 0, late=False)
    assert not locks.all_in_view(nfs) and not locks.all_in_view(None)
