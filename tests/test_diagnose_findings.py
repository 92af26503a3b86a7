"""diagnose's findings as data, judged on recorded py-spy dumps of the real stalls (torch 2.10.0 on the
CPU, tests/scenarios/stalls.py; file paths shortened to /venv, /usr/lib/python3 and /app): a pure
function of the samples and the evidence read, milliseconds, no live process."""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path
from typing import Any, get_args

import pytest

from patcher.core.exitcodes import ExitCode
from patcher.core.report import Advice
from patcher.diagnose import findings, judge, procs, render
from patcher.diagnose.model import (
    Cpu,
    FindingKind,
    Frame,
    Holder,
    Launch,
    Lock,
    Mount,
    Reach,
    Stack,
    Start,
    Unreadable,
    Workers,
)
from tests.diagnosing import (
    EAGER_TORCH,
    LAZY_TORCH,
    LOCK,
    NO_LAUNCH,
    NOTHING_READ,
    RULES,
    WORDS,
    evidence,
    judged,
    process_facts,
    recorded,
    report,
    waiting_lock,
)

DATA = Path(__file__).parent / "data" / "diagnose"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "diagnose.md"
EAGER, LAZY = EAGER_TORCH, LAZY_TORCH
BUSY, IDLE = Cpu(0.4, 0.5), Cpu(0.0, 0.5)


def test_every_finding_has_one_id_one_kind_and_a_section_in_the_docs() -> None:
    rules = findings.load()
    ids = [r.id for r in rules.findings]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"TL-D\d{3}", i) for i in ids)
    assert sorted(r.kind for r in rules.findings) == sorted(get_args(FindingKind))
    headings = re.findall(r"^### (TL-D\d{3}) ", DOCS.read_text(), re.M)
    assert headings == ids  # in the order the engine walks them


def test_every_sentence_and_step_names_only_what_render_knows() -> None:
    d = judged("jit-lock-wait", evidence(lock=waiting_lock(LOCK, LOCK, 5.0, ())))
    known = set(render._fields(d, WORDS))
    for rule in findings.load().findings:
        for template in (rule.said, rule.next or ""):
            named = {name for _, name, _, _ in string.Formatter().parse(template) if name}
            assert named <= known, (rule.id, named - known)


def test_a_lock_read_beside_a_busy_or_formatting_process_is_not_its_finding() -> None:
    """Everything is read before judging; the verdict alone decides that a lock counts only for an
    idle process that is not formatting."""
    lock = waiting_lock(LOCK, LOCK, 5.0, ())
    idle = judge.finding_of(
        process_facts(), [recorded("jit-lock-wait")] * 2, EAGER, evidence(lock=lock, cpu=IDLE), RULES
    )
    assert idle.kind == "jit-lock-stale"
    busy = [recorded("compiling-1"), recorded("compiling-2")]
    assert (
        judge.finding_of(process_facts(), busy, EAGER, evidence(lock=lock, cpu=BUSY), RULES).kind == "moving"
    )
    hang = [recorded("eager-depth26")] * 2
    assert (
        judge.finding_of(process_facts(), hang, EAGER, evidence(lock=lock, cpu=IDLE), RULES).kind
        == "eager-formatting"
    )


NFS = Mount("/home", "nfs4", "filer:/export/home")
START = Start(4242, "/srv/app", ("/venv/bin/python", "serve.py", "--port", "8000"),
              (("TORCH_EXTENSIONS_DIR", "/tmp/run/ext"),), False)  # fmt: skip


@pytest.mark.parametrize(
    ("lock", "kind", "step"),
    [
        pytest.param(waiting_lock(LOCK, LOCK, 75.0, ()), "jit-lock-stale", f"kill 4242 && rm -- {LOCK}", id="left-behind"),
        pytest.param(
            waiting_lock(LOCK, LOCK, 75.0, (Holder(77, "python build.py", "S", "hrtimer_nanosleep"),)),
            "jit-lock-held", None, id="held",
        ),
        pytest.param(waiting_lock("", "", None, (), whole=False), "jit-lock-unknown", None, id="path-unknown"),
        pytest.param(waiting_lock(LOCK, LOCK, None, ()), "jit-lock-unknown", None, id="gone-meanwhile"),
        pytest.param(waiting_lock(LOCK, LOCK, 75.0, (), seen=False, mount=NFS), "jit-lock-unseen", None, id="nfs"),
        pytest.param(
            waiting_lock(LOCK, LOCK, 75.0, (Holder(77, "python build.py", "S", "do_sys_poll"),), os="FLOCK",
                  protocol="kernel"),
            "os-lock-held", None, id="flock",
        ),
        pytest.param(waiting_lock(LOCK, LOCK, 75.0, (), protocol="kernel"), "os-lock-unseen", None, id="flock-unseen"),
        pytest.param(waiting_lock(LOCK, LOCK, 75.0, (), protocol="marker"), "marker-wait", None, id="marker"),
        pytest.param(
            waiting_lock(LOCK, LOCK, 75.0, (Holder(77, "python warm.py", "S", "do_sys_poll"),), protocol="marker"),
            "marker-wait", None, id="marker-held",
        ),
        pytest.param(waiting_lock("", "", None, (), whole=False, protocol="marker"), "marker-wait", None,
                     id="marker-unknown"),
        pytest.param(waiting_lock(LOCK, LOCK, 75.0, (), protocol="soft"), "soft-lock-stale", f"rm -- {LOCK}", id="soft"),
        pytest.param(waiting_lock(LOCK, LOCK, 75.0, (), protocol="soft", seen=False, mount=NFS), "jit-lock-unseen", None,
                     id="soft-nfs"),
    ],
)  # fmt: skip
def test_a_lock_wait_is_named_by_what_the_lock_says(lock: Lock, kind: str, step: str | None) -> None:
    d = judged("jit-lock-wait", evidence(lock=lock))
    assert (d.finding.kind, d.finding.code) == (kind, ExitCode.STALLED)
    assert render.next_step(d, WORDS) == step
    said = render.paragraph(d, WORDS)
    assert "waits in FileBaton.wait (torch/utils/file_baton.py:51)" in said
    if kind in ("jit-lock-held", "os-lock-held"):
        assert "by PID 77 (python build.py), sleeping in " in said
        assert "rm " not in said and "Patch the torch" not in said and "Do not remove" in said
    if kind == "jit-lock-stale":
        assert "created 1 min 15 s ago" in said and f"lock {LOCK}," in said and "ImportError" in said
    if kind == "marker-wait":
        assert "cannot tell whether its maker lives" in said and "Do not remove it" in said
    if kind == "os-lock-unseen":
        assert "whose holder is not in view" in said and "never left behind" in said
        assert "no row of /proc/locks names a holder now" in said  # read from the host's PID namespace
    if kind == "jit-lock-unseen":
        assert "on nfs4 filer:/export/home mounted at /home, which other hosts may mount" in said
        assert "on each host that mounts filer:/export/home, `fuser -v" in said and "Do not remove" in said


def test_a_stale_lock_step_stops_removes_and_starts_it_again_as_it_was_started() -> None:
    d = judged("jit-lock-wait", evidence(lock=waiting_lock(LOCK, LOCK, 5.0, ()), start=START))
    assert render.next_step(d, WORDS) == (
        f"kill 4242 && rm -- {LOCK} && cd /srv/app && env TORCH_EXTENSIONS_DIR=/tmp/run/ext "
        "/venv/bin/python serve.py --port 8000"
    )
    rank = judged(
        "jit-lock-wait", evidence(lock=waiting_lock(LOCK, LOCK, 5.0, ()), start=START._replace(pid=40))
    )
    step = render.next_step(rank, WORDS)
    assert step is not None and step.startswith(f"kill 40 && rm -- {LOCK} && cd /srv/app")  # the job
    assert "for a rank, its job: the launcher, PID 40" in render.paragraph(rank, WORDS)
    read_at = f"/proc/4242/root{LOCK}"
    boxed = judged(
        "jit-lock-wait",
        evidence(lock=waiting_lock(LOCK, read_at, 5.0, ()), start=START, reach=MAY_ENTER),
        root="/proc/4242/root",
    )
    # its root is reached through /proc/PID/root only while it lives: the lock goes first, inside
    assert render.next_step(boxed, WORDS) == f"nsenter --target=4242 --mount -- rm -- {LOCK} && kill 4242"
    main = judged("jit-lock-wait", evidence(lock=waiting_lock(LOCK, read_at, 5.0, ()), start=START._replace(init=True),
                                             reach=MAY_ENTER), root="/proc/4242/root")  # fmt: skip
    # a container's main process is its PID 1: SIGTERM without a handler is dropped
    assert (
        render.next_step(main, WORDS) == f"nsenter --target=4242 --mount -- rm -- {LOCK} && kill -KILL 4242"
    )
    assert "its container: start the container again" in render.paragraph(boxed, WORDS)


MAY_ENTER = Reach(
    same_mounts=False,
    mount_rights=True,
    pid_one_here=False,
    own_pid_namespace=False,
    container=None,
    pod=None,
)
# a debug container sharing only the process's PID namespace, without CAP_SYS_ADMIN
DEBUG = Reach(
    same_mounts=False, mount_rights=False, pid_one_here=True, own_pid_namespace=True, container=None, pod=None
)


@pytest.mark.parametrize(
    ("reach", "init", "step", "said"),
    [
        pytest.param(DEBUG, True, "rm -- /proc/1/root/tmp/run/ext/x/lock",
                     "do not say which container it is", id="debug-container-unknown"),
        pytest.param(DEBUG._replace(container="3f2a9c1b7d4e"), True, "rm -- /proc/1/root/tmp/run/ext/x/lock",
                     "from the host, restart its container with `docker restart 3f2a9c1b7d4e`", id="debug-docker"),
        pytest.param(DEBUG._replace(pod="web-7d4b9"), True, "rm -- /proc/1/root/tmp/run/ext/x/lock",
                     "`kubectl delete pod web-7d4b9`", id="debug-pod"),
        pytest.param(MAY_ENTER._replace(container="3f2a9c1b7d4e"), True,
                     "nsenter --target=1 --mount -- rm -- /tmp/run/ext/x/lock && docker restart 3f2a9c1b7d4e",
                     "its container: start the container again", id="host-docker"),
        pytest.param(DEBUG._replace(pid_one_here=False), False, "rm -- /proc/1/root/tmp/run/ext/x/lock && kill 1",
                     "its container: start the container again", id="debug-not-init"),
    ],
)  # fmt: skip
def test_a_stale_lock_step_runs_where_diagnose_runs(reach: Reach, init: bool, step: str, said: str) -> None:
    """Never `kill -KILL 1` from inside a PID namespace (dropped), never `nsenter --mount` without
    CAP_SYS_ADMIN (EPERM): the lock through /proc/PID/root, the restart by the container's runtime."""
    read_at = f"/proc/1/root{LOCK}"
    lock = waiting_lock(LOCK, read_at, 5.0, ())
    d = judged("jit-lock-wait", evidence(lock=lock, start=START._replace(pid=1, init=init), reach=reach),
                root="/proc/1/root", pid=1)  # fmt: skip
    assert render.next_step(d, WORDS) == step
    assert said in render.paragraph(d, WORDS)
    soft = judged("jit-lock-wait", evidence(lock=lock._replace(protocol="soft"), reach=reach), root="/proc/1/root",
                   pid=1)  # fmt: skip
    assert render.next_step(soft, WORDS) == step.split(" && ")[0]


def test_a_lock_no_process_could_be_checked_against_says_so() -> None:
    d = judged("jit-lock-wait", evidence(lock=waiting_lock(LOCK, LOCK, 5.0, (), unread=2)))
    assert d.finding.kind == "jit-lock-stale" and "2 processes could not be read" in render.paragraph(
        d, WORDS
    )


def _workers(sidecar: int | None, orphans: tuple[int, ...], fx_mode: str | None = None) -> Workers:
    start = Start(
        4242,
        "/app",
        ("/venv/bin/python", "serve.py", "--port", "8000"),
        (("TORCHINDUCTOR_CACHE_DIR", "/c"),),
        False,
    )
    return Workers(sidecar, orphans, fx_mode, "anon_pipe_write", start)


@pytest.mark.parametrize(
    ("fx_mode", "variables"),
    [
        pytest.param(None, "TORCHINDUCTOR_COMPILE_THREADS=1", id="async-compile-pool"),
        pytest.param(
            "subprocess",
            "TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_FX_COMPILE_MODE=normal",
            id="fx-compile-in-a-subprocess",
        ),
    ],
)
def test_a_pool_whose_sidecar_is_gone_is_named_with_its_orphans_and_a_start_without_it(
    fx_mode: str | None, variables: str
) -> None:
    d = judged("pool-wait", evidence(workers=_workers(None, (11, 12), fx_mode)))
    assert (d.finding.kind, d.finding.code, d.finding.id) == (
        "compile-workers-gone",
        ExitCode.STALLED,
        "TL-D201",
    )
    said, step = render.paragraph(d, WORDS), render.next_step(d, WORDS)
    assert "--parent=4242) is gone" in said and "Left behind by the sidecar: 11 12" in said
    assert ("each graph is compiled in the sidecar" in said) == (fx_mode is not None)
    assert step == (
        f"kill 4242 11 12; cd /app && env TORCHINDUCTOR_CACHE_DIR=/c {variables} /venv/bin/python serve.py --port 8000"
    )


def test_a_write_to_a_gone_sidecar_is_named_as_a_blocked_write() -> None:
    sample = recorded("pool-wait")
    pipe = "/venv/lib/python3/site-packages/torch/_inductor/compile_worker/subproc_pool.py"
    writing = (
        Frame("_send_msg", pipe, 72, ()),
        Frame("SubprocPool._send", pipe, 264, ()),
        Frame("<module>", "/app/x.py", 1, ()),
    )
    (reader,) = [s for s in sample if s.thread == "InductorSubproc"]
    blocked = (Stack("MainThread", writing), reader)
    found = judge.finding_of(
        process_facts(), [blocked] * 3, EAGER, evidence(workers=_workers(None, (11,), "subprocess")), RULES
    )
    assert (found.kind, found.code, found.id) == ("compile-workers-gone-writing", ExitCode.STALLED, "TL-D202")
    d = render.Diagnosed(process_facts(), EAGER, found, False)
    assert "writing a job to the pipe" in render.paragraph(
        d, WORDS
    ) and "anon_pipe_write" in render.paragraph(d, WORDS)
    assert (render.next_step(d, WORDS) or "").startswith("kill 4242 11; cd /app && env ")
    alive = judge.finding_of(
        process_facts(), [blocked] * 3, EAGER, evidence(workers=_workers(99, ()), cpu=IDLE), RULES
    )
    assert alive.kind == "eager-torch"


def test_a_pool_whose_sidecar_lives_is_not_a_stall() -> None:
    d = judged("pool-wait", evidence(workers=_workers(99, ()), cpu=IDLE))
    assert d.finding.kind == "eager-torch" and render.next_step(d, WORDS) != "rm"


def test_the_read_thread_alone_is_an_idle_pool_not_a_wait() -> None:
    (reader,) = [s for s in recorded("pool-wait") if s.thread == "InductorSubproc"]
    elsewhere = recorded("rank-elsewhere")[0]
    read = evidence(workers=_workers(None, ()), cpu=IDLE)
    assert (
        judge.finding_of(process_facts(), [(reader, elsewhere)] * 2, EAGER, read, RULES).kind == "eager-torch"
    )


JOB = Launch(None, "127.0.0.1:29500", 0, 2, None)  # a hand-made launcher's variables: one machine


def _ranks(
    odd: tuple[str, str] = ("rank-elsewhere",) * 2, cpu: Cpu = IDLE, launch: Launch | None = None
) -> list[Any]:
    """Rank 10 in barrier(); process 11, rank 1 of its job unless `launch` says otherwise, sampled in
    `odd`; both children of one parent (a shell), which makes no job."""
    waiting = process_facts(10, 1, launch=JOB)
    other = process_facts(11, 1, launch=JOB._replace(rank=1) if launch is None else launch)
    judged = [
        (
            waiting,
            judge.finding_of(waiting, [recorded("rank-barrier")] * 2, EAGER, evidence(cpu=IDLE), RULES),
        ),
        (other, judge.finding_of(other, [recorded(n) for n in odd], EAGER, evidence(cpu=cpu), RULES)),
    ]
    return judge.with_peers(judged, RULES)


def test_ranks_out_of_step_name_the_odd_rank_and_where_it_is() -> None:
    first, _ = _ranks()
    assert (first.kind, first.code, first.id) == ("ranks-out-of-step", ExitCode.STALLED, "TL-D301")
    assert first.peers is not None and first.peers.collective == "barrier" and first.peers.waiting == (10,)
    assert [(r.pid, r.kind) for r in first.peers.odd] == [(11, "eager-torch")]
    said = render.paragraph(render.Diagnosed(process_facts(10), EAGER, first, False), WORDS)
    assert (
        "waits in the collective barrier for ranks of its job on this machine that are not in one: " in said
    )
    assert "PID 11 (rank 1), eager-torch, in hold_back (stalls.py:50)" in said


def test_the_rank_its_job_waits_for_is_the_stall_and_its_eager_torch_the_second_finding() -> None:
    first, odd = _ranks()
    assert (odd.kind, odd.code, odd.id, odd.awaited_by) == (
        "rank-awaited",
        ExitCode.STALLED,
        "TL-D304",
        (10,),
    )
    rank = render.Diagnosed(process_facts(11), EAGER, odd, False)
    said = render.paragraph(rank, WORDS)
    assert "is the rank its job waits for: PIDs 10 wait in the collective barrier" in said
    assert "and it is in none, but in innermost frames hold_back (stalls.py:50)" in said
    assert render.next_step(rank, WORDS) == "py-spy dump --locals --pid 11"
    apply = "torch-lazylog apply --python /venv/bin/python"
    assert said.endswith(f"patch it before it starts again: `{apply}`.") and "TL-D501" in said
    assert render.entry(rank, WORDS)["second"] == {
        "finding": "eager-torch",
        "id": "TL-D501",
        "exit_code": 1,
        "next": apply,
    }
    waiting = render.Diagnosed(process_facts(10), EAGER, first, False)
    report_ = report([waiting, rank])  # the eager torch on disk comes second
    assert report_.code == ExitCode.STALLED and report_.next == Advice("py-spy dump --locals --pid 11")
    lazy = render.Diagnosed(process_facts(11), LAZY, odd, False)
    assert render.then_step(lazy, WORDS) is None and "TL-D501" not in render.paragraph(lazy, WORDS)


def test_ranks_of_one_launch_are_one_job_whatever_their_parents() -> None:
    run = Launch("job-7", "10.0.0.1:29500", 0, 4, None)
    waiting = process_facts(10, 1, launch=run)
    other = process_facts(11, 2, launch=run._replace(rank=1))
    stranger = process_facts(12, 1, launch=Launch("job-8", None, 0, 2, None))
    samples = {10: "rank-barrier", 11: "rank-elsewhere", 12: "rank-elsewhere"}
    judged = [
        (p, judge.finding_of(p, [recorded(samples[p.pid])] * 2, LAZY, evidence(cpu=IDLE), RULES))
        for p in (waiting, other, stranger)
    ]
    first, odd, third = judge.with_peers(judged, RULES)
    assert first.kind == "ranks-out-of-step" and [r.pid for r in first.peers.odd] == [11]  # type: ignore[union-attr]
    assert first.peers is not None and first.peers.absent == (2, 3)
    said = render.paragraph(render.Diagnosed(waiting, LAZY, first, False), WORDS)
    assert "PID 11 (rank 1), eager-torch" not in said and "PID 11 (rank 1), lazy, in " in said
    assert (odd.kind, third.kind, third.awaited_by) == ("rank-awaited", "lazy", ())


def test_a_rank_read_alone_names_its_collective_and_its_absent_ranks() -> None:
    alone = process_facts(10, 1, launch=Launch(None, "10.0.0.1:29500", 0, 2, None))
    (found,) = judge.with_peers(
        [
            (
                alone,
                judge.finding_of(alone, [recorded("rank-barrier")] * 2, LAZY, evidence(cpu=IDLE), RULES),
            )
        ],
        RULES,
    )
    assert (found.kind, found.code, found.id) == ("in-collective", ExitCode.OK, "TL-D303")
    said = render.paragraph(render.Diagnosed(alone, LAZY, found, False), WORDS)
    assert "waits in the collective barrier, and so does every other rank of its job" in said
    assert "rank 1 of its WORLD_SIZE no process on this machine is" in said
    read = render.entry(render.Diagnosed(alone, LAZY, found, False), WORDS)["evidence"]
    assert isinstance(read, dict) and read["collective"] == "barrier" and read["absent_ranks"] == [1]


def test_ranks_waiting_for_a_busy_rank_are_progress() -> None:
    first, odd = _ranks(("compiling-1", "compiling-2"), BUSY)
    assert odd.kind == "moving" and (first.kind, first.code) == ("ranks-waiting-for-progress", ExitCode.OK)


def test_a_process_without_the_jobs_variables_is_never_a_rank() -> None:
    """Issue 53, case 5: ranks started by a shell loop (a world of 5 on this machine, rank 4 never
    came up) beside an idle torch process of the same shell: that process is not named; the ranks'
    finding says rank 4 is no process on this machine, and it is a stall (exit 6)."""
    world = JOB._replace(world_size=5)
    ranks = [process_facts(10 + r, 1, launch=world._replace(rank=r)) for r in range(4)]
    exporter = process_facts(20, 1)  # same parent, no launcher's variables
    judged = [
        (p, judge.finding_of(p, [recorded("rank-barrier")] * 2, LAZY, evidence(cpu=IDLE), RULES))
        for p in ranks
    ]
    judged.append(
        (
            exporter,
            judge.finding_of(exporter, [recorded("rank-elsewhere")] * 2, LAZY, evidence(cpu=IDLE), RULES),
        )
    )
    *found, other = judge.with_peers(judged, RULES)
    assert {(f.kind, f.code, f.id) for f in found} == {("rank-absent", ExitCode.STALLED, "TL-D305")}
    assert (other.kind, other.awaited_by) == ("lazy", ())
    said = render.paragraph(render.Diagnosed(ranks[0], LAZY, found[0], False), WORDS)
    assert "for rank 4 of its job, which no process on this machine is" in said and "PID 20" not in said
    assert judge.decide([*found, other], [], RULES)[1] == ExitCode.STALLED
    elsewhere = world._replace(master="10.0.0.1:29500")  # the rendezvous on another host: rank 4 may be there
    remote = [p._replace(launch=elsewhere._replace(rank=p.launch.rank)) for p in ranks]
    judged = [
        (p, judge.finding_of(p, [recorded("rank-barrier")] * 2, LAZY, evidence(cpu=IDLE), RULES))
        for p in remote
    ]
    assert {f.kind for f in judge.with_peers(judged, RULES)} == {"in-collective"}


def test_a_process_of_the_same_parent_is_not_the_rank_a_job_waits_for() -> None:
    first, other = _ranks(launch=NO_LAUNCH)  # the same parent, but no launcher's variables: no rank
    assert (first.kind, first.code, first.id) == ("rank-absent", ExitCode.STALLED, "TL-D305")
    assert first.peers is not None and first.peers.absent == (1,) and first.peers.odd == ()
    assert (other.kind, other.awaited_by) == ("eager-torch", ())


@pytest.mark.parametrize(
    ("names", "cpu", "kind"),
    [
        pytest.param(["compiling-1", "compiling-2"], BUSY, "moving", id="busy-and-changing"),
        pytest.param(["compiling-1", "compiling-1"], BUSY, "moving", id="busy-in-a-compile-phase"),
        pytest.param(["compiling-1", "compiling-2"], IDLE, "eager-torch", id="idle"),
        pytest.param(["rank-elsewhere", "rank-elsewhere"], BUSY, "eager-torch", id="busy-but-not-moving"),
        pytest.param(["eager-depth26", "eager-depth26"], BUSY, "eager-formatting", id="the-eager-hang-first"),
        pytest.param(
            ["importing-torch", "importing-torch"], BUSY, "eager-torch", id="importing-is-not-compiling"
        ),
    ],
)
def test_busy_and_moving_is_progress_with_its_torchs_code(names: list[str], cpu: Cpu, kind: str) -> None:
    """Busy or idle between two compiles, a server on an eager torch gets one exit code and one step
    (the torch's: apply), whichever a read catches; on a lazy torch, 0 and no step."""
    found = judge.finding_of(process_facts(), [recorded(n) for n in names], EAGER, evidence(cpu=cpu), RULES)
    assert found.kind == kind and found.code == ExitCode.EAGER
    idle = judge.finding_of(process_facts(), [recorded(names[0])] * 2, EAGER, evidence(cpu=IDLE), RULES)
    d, other = (
        render.Diagnosed(process_facts(), EAGER, found, False),
        render.Diagnosed(process_facts(), EAGER, idle, False),
    )
    assert render.next_step(d, WORDS) == render.next_step(other, WORDS)
    if kind == "moving":
        assert found.phase and found.id == "TL-D401"
        assert "0.40 s of CPU in 0.50 s" in render.paragraph(d, WORDS)
        assert render.next_step(d, WORDS) == "torch-lazylog apply --python /venv/bin/python"
        assert found.phase == "Inductor compiling (get_patched_config_dict)"
        lazy = judge.finding_of(process_facts(), [recorded(n) for n in names], LAZY, evidence(cpu=cpu), RULES)
        assert (lazy.kind, lazy.code) == ("moving", ExitCode.OK)
        assert render.next_step(render.Diagnosed(process_facts(), LAZY, lazy, False), WORDS) is None


def test_a_lazy_idle_process_is_exit_0() -> None:
    found = judge.finding_of(
        process_facts(), [recorded("rank-elsewhere")] * 2, LAZY, evidence(cpu=IDLE), RULES
    )
    assert (found.kind, found.code, found.id) == ("lazy", ExitCode.OK, "TL-D503")


def test_the_eager_formatting_outranks_a_stall_and_a_stall_outranks_the_rest() -> None:
    eager = render.Diagnosed(
        process_facts(1),
        EAGER,
        judge.finding_of(process_facts(1), [recorded("eager-depth26")], EAGER, NOTHING_READ, RULES),
        False,
    )
    stale = judged("jit-lock-wait", evidence(lock=waiting_lock(LOCK, LOCK, 5.0, ())), LAZY, pid=2)
    lazy = judged("rank-elsewhere", evidence(cpu=IDLE), LAZY, pid=3)
    assert report([lazy, stale]).code == ExitCode.STALLED
    assert report([lazy, stale]).next == Advice(f"kill 2 && rm -- {LOCK}")
    assert report([stale, eager]).code == ExitCode.EAGER


def test_every_entry_names_its_finding_id_and_evidence() -> None:
    d = judged("pool-wait", evidence(workers=_workers(None, (11,))))
    entry = render.entry(d, WORDS)
    assert list(entry) == list(render.ENTRY_FIELDS) and entry["id"] == "TL-D201"
    assert entry["evidence"] == {
        "waiting_in": [{"name": "Future.result", "line": 451, "filename": "/usr/lib/python3/concurrent/futures/_base.py"}],
        "sidecar": None, "orphans": [11], "fx_compile_mode": None, "wchan": "anon_pipe_write",
    }  # fmt: skip


def test_the_findings_are_read_from_the_package_in_a_zip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The single file packs patches/ as patcher/patches/: no directory there, importlib.resources reads it."""
    import importlib
    import sys
    import zipfile

    import patcher

    text = (Path(__file__).resolve().parent.parent / "patches" / findings.NAME).read_text(encoding="utf-8")
    archive = tmp_path / "packed.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("patcher/patches/__init__.py", "")
        out.writestr(f"patcher/patches/{findings.NAME}", text.replace("TL-D001", "TL-D001-zipped"))
    monkeypatch.delitem(sys.modules, "patcher.patches", raising=False)
    monkeypatch.setattr(patcher, "__path__", [f"{archive}/patcher"])
    monkeypatch.delattr(patcher, "patches", raising=False)
    findings.load.cache_clear()
    try:
        assert str(archive) in (importlib.import_module("patcher.patches").__file__ or "")
        assert findings.load().findings[0].id == "TL-D001-zipped"
    finally:
        findings.load.cache_clear()


def test_the_deciding_process_gives_the_top_level_step_and_torch() -> None:
    """A recorded eager hang beside a stale lock: the hang decides (exit 1), so its apply is the one
    step, not the lock's (first in PID order); the torch is the deciding process's, as it names it."""
    stale = judged("jit-lock-wait", evidence(lock=waiting_lock(LOCK, LOCK, 5.0, ())), LAZY, pid=2)
    hang = judged("eager-depth26", NOTHING_READ, EAGER, pid=3, root="/proc/3/root",
                   torch_dir="/opt/venv/torch", torch_seen_at="/proc/3/root/opt/venv/torch")  # fmt: skip
    said = report([stale, hang])
    assert said.code == ExitCode.EAGER and said.state == "pristine"
    assert said.next == Advice("torch-lazylog apply --python /venv/bin/python")
    assert (said.torch_dir, said.graph_py) == ("/opt/venv/torch", "/opt/venv/torch/_inductor/graph.py")
    assert render.entry(hang, WORDS)["torch_dir"] == said.torch_dir
    lazy = judged("rank-elsewhere", evidence(cpu=IDLE), LAZY, pid=1)
    assert report([lazy, stale]).next == Advice(f"kill 2 && rm -- {LOCK}")  # 6 decides over 0


def test_a_missing_pid_beside_a_process_read_is_a_problem_not_the_message() -> None:
    lazy = judged("rank-elsewhere", evidence(cpu=IDLE), LAZY, pid=1)
    gone = Unreadable(7, "missing", "")
    said = report([lazy], [gone])
    assert said.code == ExitCode.USAGE and said.next is None
    assert said.message == render.paragraph(lazy, WORDS)
    assert said.problems == ("Expected a running process 7, found none: pass the server's PID.",)
    eager = judged("rank-elsewhere", evidence(cpu=IDLE), EAGER, pid=1)
    assert report([eager], [gone]).code == ExitCode.EAGER
    ended = Unreadable(8, "exited", "python serve.py")  # a note: it changes no exit code
    assert report([lazy], [ended]).code == ExitCode.OK and report([lazy], [ended]).problems == ()
    assert report([lazy], [ended]).message.endswith("nothing of it is judged, and it changes no exit code.")


def test_a_recompile_limit_fallback_running_eagerly_is_moving_but_not_tracing() -> None:
    """Recorded on torch 2.10.0 past Dynamo's recompile limit (tests/scenarios/stalls.py fallback):
    the function runs as Python under Dynamo's frame wrapper, busy; progress, in the phase it is in."""
    samples = [recorded("recompile-fallback-1"), recorded("recompile-fallback-2")]
    found = judge.finding_of(process_facts(), samples, EAGER, evidence(cpu=BUSY), RULES)
    assert (found.kind, found.code) == ("moving", ExitCode.EAGER)  # the torch's code: it runs an eager torch
    assert found.phase is not None and found.phase.startswith(
        "running a torch.compile'd function, not compiling it"
    )
    assert "compile_wrapper" in found.phase and "tracing" not in found.phase
    tracing = recorded("compiling-1")
    assert "Dynamo tracing" not in (judge.phase_of([tracing], RULES) or "Dynamo tracing (x)")


def test_diagnose_names_none_of_the_packages_other_types() -> None:
    """One meaning per name: core's `Kind` (what graph.py is) and `Rule` (the state table's verdict),
    pathlib's `Path` and a rank (RANK's number) are not diagnose's names for its own types."""
    package = Path(procs.__file__).parent
    defined = set()
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.col_offset == 0:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined |= {t.id for t in targets if isinstance(t, ast.Name)}
    assert defined & {"Kind", "Rule", "Rules", "Path", "Rank"} == set()
    assert {"FindingKind", "Declaration", "Catalog", "Spelling", "Peer"} <= defined
