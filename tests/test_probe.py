"""probe's decision on recorded facts (no process, milliseconds), its table and its page."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from patcher.cli.app import cli
from patcher.core.exitcodes import ExitCode
from patcher.core.report import Report
from patcher.diagnose import findings, probe
from patcher.diagnose.model import Cpu, Frame, Launch, ProcessFacts, Sample, Stack, TorchFacts, Unreadable
from tests.docs import block

SITE = "/opt/venv/lib/python3/site-packages"  # a target's, in its container: no interpreter's version
PROCESS = ProcessFacts(
    pid=1, command="/opt/venv/bin/python server.py", interpreter="/opt/venv/bin/python", started=0.0, root="",
    torch_dir=f"{SITE}/torch", torch_seen_at=f"{SITE}/torch", torch_replaced=False, torch_logs=None,
    pycache_prefix=None, owns_torch=True, parent=0, launch=Launch(None, None, None, None, None),
)  # fmt: skip
EAGER = TorchFacts(Report("verify", "pristine", False, "", ExitCode.EAGER), None, False, "")
LAZY = TorchFacts(Report("verify", "patched", False, "", ExitCode.OK), None, False, "")
BUSY = probe.Busy(Cpu(0.25, 0.25), 2, 25)
IDLE = probe.Busy(Cpu(0.01, 0.25), 1, 1)


def _frame(name: str, file: str) -> Frame:
    return Frame(name, f"{SITE}/{file}", 1, ())


FORMATTING: Sample = (
    Stack(
        "MainThread",
        (
            _frame("ExternKernel.__str__", "torch/_inductor/ir.py"),
            _frame("ExternKernel.__str__", "torch/_inductor/ir.py"),
            _frame("OperatorIssue.operator_str", "torch/_inductor/exc.py"),
            _frame("GraphLowering.call_function", "torch/_inductor/graph.py"),
        ),
    ),
)
COMPILING: Sample = (Stack("MainThread", (_frame("CppCodeCache.load", "torch/_inductor/codecache.py"),)),)


def _judged(
    busy: probe.Busy, torch: TorchFacts, samples: list[Sample] | None, unread: str = ""
) -> probe.Answer | None:
    facts = probe.Probe(1, PROCESS, torch, busy, samples, unread)
    return probe.answer_of(facts, "torch-lazylog", findings.load())


@pytest.mark.parametrize(
    ("ends", "code", "unread", "expected"),
    [
        pytest.param(False, ExitCode.EAGER, False, ("stuck", ExitCode.EAGER), id="eager-formatting-stuck"),
        pytest.param(False, ExitCode.STALLED, False, ("stuck", ExitCode.STALLED), id="stale-lock-stuck"),
        pytest.param(False, ExitCode.OK, False, ("stuck", ExitCode.STALLED), id="stuck-is-never-0"),
        pytest.param(True, ExitCode.EAGER, False, ("warning", ExitCode.OK), id="eager-torch-moving"),
        pytest.param(True, ExitCode.STALLED, False, ("warning", ExitCode.OK), id="held-lock-waits"),
        pytest.param(True, ExitCode.OK, True, ("warning", ExitCode.OK), id="stacks-unread"),
        pytest.param(True, ExitCode.OK, False, ("ok", ExitCode.OK), id="lazy-moving"),
    ],
)
def test_only_what_does_not_end_is_non_zero(
    ends: bool, code: ExitCode, unread: bool, expected: tuple[str, ExitCode]
) -> None:
    assert probe.status_of(ends, code, unread) == expected


def test_every_dump_in_the_eager_formatting_is_stuck_and_names_the_fix() -> None:
    answer = _judged(BUSY, EAGER, [FORMATTING, FORMATTING])
    assert answer is not None and answer.status == "stuck" and answer.code == ExitCode.EAGER
    first = answer.lines()[0]
    assert first.startswith("stuck: PID 1: TL-D001 in the eager formatting"), first
    assert first.endswith("; torch-lazylog apply --python /opt/venv/bin/python, then restart it"), first
    assert "2 nested __str__" in first


@pytest.mark.parametrize(
    "samples", [[COMPILING, COMPILING], [FORMATTING, COMPILING]], ids=["compiling", "formatting-once"]
)
def test_a_compile_on_an_eager_torch_is_progress_with_a_warning(samples: list[Sample]) -> None:
    answer = _judged(BUSY, EAGER, samples)
    assert answer is not None and (answer.status, answer.code, answer.id) == (
        "warning",
        ExitCode.OK,
        "TL-D401",
    )
    assert "apply --python /opt/venv/bin/python" in answer.step


def test_busy_on_a_lazy_torch_is_ok_without_stacks() -> None:
    answer = _judged(BUSY, LAZY, None)
    assert answer is not None and (answer.status, answer.code, answer.step) == ("ok", ExitCode.OK, "")
    assert re.fullmatch(
        r"ok: PID 1: TL-D401 busy and moving \(0\.25 s of CPU in 0\.25 s over 2 process\(es\)\)",
        answer.lines()[0],
    )


def test_unread_stacks_answer_from_proc_and_say_so() -> None:
    answer = _judged(BUSY, EAGER, None, "Permission denied (no ptrace rights over it)")
    assert answer is not None and answer.code == ExitCode.OK and answer.status == "warning"
    assert answer.lines()[1].startswith("The stacks could not be read: Permission denied")


def test_idle_is_left_to_diagnoses_whole_reading() -> None:
    assert _judged(IDLE, EAGER, None) is None


def test_a_missing_process_is_non_zero() -> None:
    facts = probe.Probe(7, Unreadable(7, "missing", ""), None, IDLE, None, "")
    answer = probe.answer_of(facts, "torch-lazylog", findings.load())
    assert answer is not None and answer.code != ExitCode.OK and answer.lines()[0].startswith("stuck: PID 7:")


def test_every_finding_says_whether_it_ends_and_the_page_lists_the_table() -> None:
    catalog = findings.load()
    stuck = {f.kind for f in catalog.findings if not f.ends}
    assert stuck == {
        "eager-formatting", "jit-lock-stale", "soft-lock-stale", "compile-workers-gone",
        "compile-workers-gone-writing", "rank-absent", "strict-lock-orphaned",
    }  # fmt: skip
    rows = re.findall(r"^\| (TL-D\d+) \| ([a-z-]+) \| (yes|no: stuck) \|$", block("probe-ends"), re.M)
    assert rows == [(f.id, f.kind, "yes" if f.ends else "no: stuck") for f in catalog.findings]


def test_the_command_line_refuses_a_word_and_a_gone_pid() -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["probe", "abc"]).exit_code == ExitCode.USAGE
    gone = runner.invoke(cli, ["probe", "4194304"])  # above the kernel's largest PID
    assert gone.exit_code != 0 and gone.output.startswith("stuck: PID 4194304:"), gone.output


def test_a_small_slice_of_a_shared_node_is_progress_and_none_is_not() -> None:
    """Two clock ticks in the interval (far below diagnose's busy share) are a compile moving on a node
    whose cores others share; a waiter sleeping in the kernel uses none and is read whole."""
    slow = _judged(probe.Busy(Cpu(0.02, 0.25), 1, 2), LAZY, None)
    assert slow is not None and slow.status == "ok" and slow.id == "TL-D401"
    assert _judged(probe.Busy(Cpu(0.0, 0.25), 1, 0), LAZY, None) is None


def test_past_its_deadline_it_answers_with_what_it_read_never_later() -> None:
    """A read that cannot finish in time (here: no time at all, on a live process of this machine)
    answers at its deadline, exit 0 and a warning that says so: a probe never runs past its own bound."""
    import os
    import subprocess
    import sys

    from patcher.install import definitions

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        answer = probe.probe(sleeper.pid, definitions.load(), "torch-lazylog", 0.0)
        assert (answer.status, answer.code) == ("warning", ExitCode.OK), answer
        assert answer.lines()[0].startswith(f"warning: PID {sleeper.pid}: not judged in time"), answer
        assert "deadline" in answer.lines()[1] and os.path.exists(f"/proc/{sleeper.pid}")
    finally:
        sleeper.kill()
        sleeper.wait()
