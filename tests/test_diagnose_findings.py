"""diagnose's findings as data, judged on recorded py-spy dumps of the real stalls (torch 2.10.0 on the
CPU, tests/scenarios/stalls.py; file paths shortened to /venv, /usr/lib/python3 and /app): a pure
function of the samples and the evidence read, milliseconds, no live process."""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any, get_args

import pytest

from patcher.core.errors import Advice, ExitCode
from patcher.diagnose import findings, procs, render, stacks, verdict
from patcher.diagnose.model import (
    Cpu,
    Evidence,
    Frame,
    Holder,
    Kind,
    Lock,
    ProcessFacts,
    Sample,
    Stack,
    TorchFacts,
    Workers,
)
from tests.diagnosing import EAGER_TORCH, LAZY_TORCH

DATA = Path(__file__).parent / "data" / "diagnose"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "diagnose.md"
EAGER, LAZY = EAGER_TORCH, LAZY_TORCH
LOCK = "/tmp/run/ext/x/lock"  # as the recorded process named it: build_directory + /lock
BUSY, IDLE = Cpu(0.4, 0.5), Cpu(0.0, 0.5)


def _process(pid: int = 4242, parent: int = 1, **changes: Any) -> ProcessFacts:
    base = ProcessFacts(pid, "python stalls.py", "/venv/bin/python", 200.0, "", "/venv/torch", "/venv/torch",
                        False, None, None, parent=parent)  # fmt: skip
    return base._replace(**changes)


def _recorded(name: str) -> Sample:
    if name == "importing-torch":  # `import torch` under way: torch's own modules run, at import
        return _importing()
    return stacks.parse((DATA / f"{name}.json").read_text())


def _importing() -> Sample:
    site = "/venv/lib/python3/site-packages/torch"
    frames = [
        Frame("<module>", f"{site}/_dynamo/variables/builtin.py", 80),
        Frame("_call_with_frames_removed", "<frozen importlib._bootstrap>", 241),
        Frame("_find_and_load", "<frozen importlib._bootstrap>", 1176),
        Frame("<module>", f"{site}/__init__.py", 2100),
        Frame("<module>", "<string>", 1),
    ]
    return (Stack("MainThread", tuple(frames)),)


def _judged(
    name: str, read: Evidence = verdict.NOTHING_READ, torch: TorchFacts = EAGER, **process: Any
) -> render.Diagnosed:
    samples = [_recorded(name)] * 3
    found = verdict.finding_of(_process(**process), samples, torch, read)
    return render.Diagnosed(_process(**process), torch, found)


def test_every_finding_has_one_id_one_kind_and_a_section_in_the_docs() -> None:
    rules = findings.load()
    ids = [r.id for r in rules.findings]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"TL-D\d{3}", i) for i in ids)
    assert sorted(r.kind for r in rules.findings) == sorted(get_args(Kind))
    headings = re.findall(r"^### (TL-D\d{3}) ", DOCS.read_text(), re.M)
    assert headings == ids  # in the order the engine walks them


def test_every_sentence_and_step_names_only_what_render_knows() -> None:
    d = _judged("jit-lock-wait", Evidence(lock=Lock(LOCK, LOCK, 5.0, ())))
    known = set(render._fields(d))
    for rule in findings.load().findings:
        for template in (rule.said, rule.next or ""):
            named = {name for _, name, _, _ in string.Formatter().parse(template) if name}
            assert named <= known, (rule.id, named - known)


def test_the_recorded_wait_names_its_lock_from_the_frames_locals() -> None:
    assert findings.lock_named(_recorded("jit-lock-wait"), findings.load()) == (
        "/tmp/run/ext/x",
        False,
        "lock",
    )
    assert verdict.wanted([_recorded("jit-lock-wait")], findings.load()) == {"lock"}


@pytest.mark.parametrize(
    ("lock", "kind", "step"),
    [
        pytest.param(Lock(LOCK, LOCK, 75.0, ()), "jit-lock-stale", f"rm -- {LOCK}", id="left-behind"),
        pytest.param(
            Lock(LOCK, LOCK, 75.0, (Holder(77, "python build.py", "S", "hrtimer_nanosleep"),)),
            "jit-lock-held", None, id="held",
        ),
        pytest.param(Lock("", "", None, (), whole=False), "jit-lock-unknown", None, id="path-unknown"),
        pytest.param(Lock(LOCK, LOCK, None, ()), "jit-lock-unknown", None, id="gone-meanwhile"),
    ],
)  # fmt: skip
def test_a_jit_lock_wait_is_named_by_what_the_lock_says(lock: Lock, kind: str, step: str | None) -> None:
    d = _judged("jit-lock-wait", Evidence(lock=lock))
    assert (d.finding.kind, d.finding.code) == (kind, ExitCode.STALLED)
    assert render.next_step(d) == step
    said = render.paragraph(d)
    assert "waits in FileBaton.wait (torch/utils/file_baton.py:51)" in said
    if kind == "jit-lock-held":
        assert "held open by PID 77 (python build.py), sleeping in hrtimer_nanosleep" in said
        assert "rm " not in said and "Patch the torch" not in said
    if kind == "jit-lock-stale":
        assert "created 1 min 15 s ago" in said and f"lock {LOCK}," in said


def test_a_lock_no_process_could_be_checked_against_says_so() -> None:
    d = _judged("jit-lock-wait", Evidence(lock=Lock(LOCK, LOCK, 5.0, (), unread=2)))
    assert d.finding.kind == "jit-lock-stale" and "2 processes could not be read" in render.paragraph(d)


def test_a_path_py_spy_cut_short_is_completed_only_when_one_file_fits(tmp_path: Path) -> None:
    cut = Frame("_jit_compile", "/venv/lib/python3/site-packages/torch/utils/cpp_extension.py", 2225,
                (("build_directory", f'"{tmp_path}/ext/lo..."'),))  # fmt: skip
    sample = (Stack("MainThread", (cut,)),)
    assert findings.lock_named(sample, findings.load()) == (f"{tmp_path}/ext/lo", True, "lock")
    (tmp_path / "ext" / "long_name").mkdir(parents=True)
    process = _process(root="")
    assert not procs.lock_of(process, sample, findings.load()).whole  # no lock file in it yet
    (tmp_path / "ext" / "long_name" / "lock").touch()
    found = procs.lock_of(process, sample, findings.load())
    assert found.whole and found.path == f"{tmp_path}/ext/long_name/lock" and found.holders == ()
    (tmp_path / "ext" / "longer" / "lock").mkdir(parents=True)  # two fit: none is chosen
    assert not procs.lock_of(process, sample, findings.load()).whole


def test_a_pool_whose_sidecar_is_gone_is_named_with_its_orphans_and_the_variable() -> None:
    d = _judged("pool-wait", Evidence(workers=Workers(None, (11, 12))))
    assert (d.finding.kind, d.finding.code, d.finding.id) == (
        "compile-workers-gone",
        ExitCode.STALLED,
        "TL-D201",
    )
    said, step = render.paragraph(d), render.next_step(d)
    assert "--parent=4242) is gone" in said and "--parent=4242: 11 12" in said
    assert (
        step is not None and "TORCHINDUCTOR_COMPILE_THREADS=1" in step and step.startswith("kill 4242 11 12,")
    )


def test_a_pool_whose_sidecar_lives_is_not_a_stall() -> None:
    d = _judged("pool-wait", Evidence(workers=Workers(99, ()), cpu=IDLE))
    assert d.finding.kind == "eager-torch" and render.next_step(d) != "rm"


def test_the_read_thread_alone_is_an_idle_pool_not_a_wait() -> None:
    (reader,) = [s for s in _recorded("pool-wait") if s.thread == "InductorSubproc"]
    elsewhere = _recorded("rank-elsewhere")[0]
    assert verdict.wanted([(reader, elsewhere)], findings.load()) == set()


def _ranks(odd: tuple[str, str] = ("rank-elsewhere",) * 2, cpu: Cpu = IDLE, parent: int = 1) -> list[Any]:
    """Rank 10 in barrier(); rank 11, its sibling unless `parent` says otherwise, sampled in `odd`."""
    waiting, other = _process(10, 1), _process(11, parent)
    judged = [
        (waiting, verdict.finding_of(waiting, [_recorded("rank-barrier")] * 2, EAGER, Evidence(cpu=IDLE))),
        (other, verdict.finding_of(other, [_recorded(n) for n in odd], EAGER, Evidence(cpu=cpu))),
    ]
    return verdict.with_peers(judged)


def test_ranks_out_of_step_name_the_odd_rank_and_where_it_is() -> None:
    first, odd = _ranks()
    assert (first.kind, first.code, first.id) == ("ranks-out-of-step", ExitCode.STALLED, "TL-D301")
    assert first.peers is not None and first.peers.collective == "barrier" and first.peers.waiting == (10,)
    assert [(r.pid, r.kind) for r in first.peers.odd] == [(11, "eager-torch")]
    said = render.paragraph(render.Diagnosed(_process(10), EAGER, first))
    assert "waits in the collective barrier for ranks that are not in one: PID 11 (eager-torch) in " in said
    assert "hold_back (stalls.py:50)" in said
    assert odd.awaited_by == (10,)
    assert "wait for it in a collective: PIDs 10" in render.paragraph(
        render.Diagnosed(_process(11), EAGER, odd)
    )


def test_ranks_waiting_for_a_busy_rank_are_progress() -> None:
    first, odd = _ranks(("compiling-1", "compiling-2"), BUSY)
    assert odd.kind == "moving" and (first.kind, first.code) == ("ranks-waiting-for-progress", ExitCode.OK)


def test_a_rank_in_a_collective_without_odd_siblings_is_not_a_stall() -> None:
    first, other = _ranks(parent=2)  # not siblings: another server's process
    assert (first.kind, first.code, first.id) == ("in-collective", ExitCode.OK, "TL-D303")
    assert other.awaited_by == ()


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
def test_busy_and_moving_is_progress_exit_0(names: list[str], cpu: Cpu, kind: str) -> None:
    found = verdict.finding_of(_process(), [_recorded(n) for n in names], EAGER, Evidence(cpu=cpu))
    assert found.kind == kind
    if kind == "moving":
        assert found.code == ExitCode.OK and found.phase and found.id == "TL-D401"
        d = render.Diagnosed(_process(), EAGER, found)
        assert render.next_step(d) is None and "0.40 s of CPU in 0.50 s" in render.paragraph(d)
        assert found.phase == "Inductor compiling (get_patched_config_dict)"


def test_a_lazy_idle_process_is_exit_0() -> None:
    found = verdict.finding_of(_process(), [_recorded("rank-elsewhere")] * 2, LAZY, Evidence(cpu=IDLE))
    assert (found.kind, found.code, found.id) == ("lazy", ExitCode.OK, "TL-D503")


def test_the_eager_formatting_outranks_a_stall_and_a_stall_outranks_the_rest() -> None:
    eager = render.Diagnosed(
        _process(1), EAGER, verdict.finding_of(_process(1), [_recorded("eager-depth26")], EAGER)
    )
    stale = _judged("jit-lock-wait", Evidence(lock=Lock(LOCK, LOCK, 5.0, ())), LAZY, pid=2)
    lazy = _judged("rank-elsewhere", Evidence(cpu=IDLE), LAZY, pid=3)
    assert render.report([lazy, stale], []).code == ExitCode.STALLED
    assert render.report([lazy, stale], []).next == Advice(f"rm -- {LOCK}")
    assert render.report([stale, eager], []).code == ExitCode.EAGER


def test_every_entry_names_its_finding_id_and_evidence() -> None:
    d = _judged("pool-wait", Evidence(workers=Workers(None, (11,))))
    entry = render.entry(d)
    assert list(entry) == list(render.ENTRY_FIELDS) and entry["id"] == "TL-D201"
    assert entry["evidence"] == {
        "waiting_in": [{"name": "Future.result", "line": 451, "filename": "/usr/lib/python3/concurrent/futures/_base.py"}],
        "sidecar": None, "orphans": [11],
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
