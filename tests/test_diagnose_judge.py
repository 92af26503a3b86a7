"""diagnose's verdict, a pure function, on a recorded py-spy dump of a real hang (torch 2.10.0, the
custom-op chain at depth 26, unpatched; file paths shortened to /venv and /app) and on stacks cut
from it: milliseconds, no live process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patcher.core.exitcodes import ExitCode
from patcher.core.report import Advice, Report
from patcher.diagnose import judge, render, stacks
from patcher.diagnose.model import Frame, ProcessFacts, Sample, Stack, TorchFacts
from tests.diagnosing import EAGER_TORCH, LAZY_TORCH, NO_LAUNCH, NOTHING_READ, RULES, WORDS, report

DUMP = Path(__file__).parent / "data" / "diagnose" / "eager-depth26.json"
EAGER, LAZY = EAGER_TORCH, LAZY_TORCH
UNKNOWN = TorchFacts(
    Report(
        "verify",
        "unknown",
        False,
        "graph.py is not one torch-lazylog knows",
        ExitCode.REFUSED,
        torch_version=None,
    ),
    100.0,
    False,
    "",
)


def _process(started: float = 200.0, **changes: Any) -> ProcessFacts:
    base = ProcessFacts(4242, "python chain.py", "/venv/bin/python", started, "", "/venv/torch",
                        "/venv/torch", False, None, None, True, 1, NO_LAUNCH)  # fmt: skip
    return base._replace(**changes)


def _recorded() -> Sample:
    return stacks.parse(DUMP.read_text())


def _at(sample: Sample, name: str) -> int:
    (index,) = [i for i, f in enumerate(sample[0].frames) if f.name == name]
    return index


def _with_caller(sample: Sample, caller: Frame) -> Sample:
    """The recorded stack with operator_str's caller replaced (as logging reaches it)."""
    frames = list(sample[0].frames)
    frames[_at(sample, "OperatorIssue.operator_str") + 1] = caller
    return (Stack(sample[0].thread, tuple(frames)),)


def _outside(sample: Sample) -> Sample:
    """The same process a moment before: in call_function, not yet formatting."""
    frames = sample[0].frames
    return (Stack(sample[0].thread, frames[_at(sample, "GraphLowering.call_function") :]),)


def test_the_recorded_hang_is_the_eager_formatting() -> None:
    sample = _recorded()
    found = judge.finding_of(_process(), [sample] * 4 + [_outside(sample)], EAGER, NOTHING_READ, RULES)
    assert (found.kind, found.code, found.samples, found.in_formatting) == ("eager-formatting", 1, 5, 4)
    str_frames = [
        f
        for f in sample[0].frames[: _at(sample, "OperatorIssue.operator_str")]
        if f.name.endswith(".__str__")
    ]
    assert found.depth == len(str_frames) > 20
    names = [f.name for f in found.frames]
    assert names[1:3] == ["OperatorIssue.operator_str", "GraphLowering.call_function"]
    said = render.paragraph(render.Diagnosed(_process(), EAGER, found, False), WORDS)
    assert "4 of 5 samples" in said and f"under {found.depth} nested __str__" in said
    assert "torch/_inductor/exc.py:33" in said and "torch/_inductor/graph.py:1285" in said
    assert (
        render.next_step(render.Diagnosed(_process(), EAGER, found, False), WORDS)
        == "torch-lazylog apply --python /venv/bin/python"
    )


def test_through_logging_it_is_info_on_not_the_eager_bug() -> None:
    lazy_str = Frame(
        "LazyString.__str__", "/venv/lib/python3/site-packages/torch/_logging/_internal.py", 1255, ()
    )
    sample = _with_caller(_recorded(), lazy_str)
    process = _process(torch_logs="+inductor")
    found = judge.finding_of(process, [sample] * 3, LAZY, NOTHING_READ, RULES)
    assert (found.kind, found.code, found.in_formatting) == ("info-formatting", 0, 3)
    said = render.paragraph(render.Diagnosed(process, LAZY, found, False), WORDS)
    assert "TORCH_LOGS=+inductor" in said and "lazy, not free" in said
    assert render.next_step(render.Diagnosed(process, LAZY, found, False), WORDS) is None


def test_operator_str_from_elsewhere_is_not_the_eager_formatting() -> None:
    other = Frame("OperatorIssue.__str__", "/venv/lib/python3/site-packages/torch/_inductor/exc.py", 40, ())
    found = judge.finding_of(_process(), [_with_caller(_recorded(), other)], LAZY, NOTHING_READ, RULES)
    assert (found.kind, found.code, found.in_formatting) == ("lazy", 0, 0)


@pytest.mark.parametrize(
    ("torch", "started", "kind", "code"),
    [
        pytest.param(EAGER, 200.0, "eager-torch", 1, id="eager-torch-elsewhere"),
        pytest.param(LAZY, 200.0, "lazy", 0, id="lazy"),
        pytest.param(LAZY, 50.0, "stale-import", 1, id="patched-after-start"),
        pytest.param(UNKNOWN, 200.0, "unknown-torch", 3, id="unknown-torch"),
    ],
)
def test_not_formatting_names_where_it_is(torch: TorchFacts, started: float, kind: str, code: int) -> None:
    sample = _outside(_recorded())
    found = judge.finding_of(_process(started), [sample, sample], torch, NOTHING_READ, RULES)
    assert (found.kind, found.code, found.in_formatting, found.depth) == (kind, code, 0, 0)
    assert found.frames == sample[0].frames[: judge.INNERMOST]
    said = render.paragraph(render.Diagnosed(_process(started), torch, found, False), WORDS)
    assert "GraphLowering.call_function (torch/_inductor/graph.py:1285)" in said
    assert ("restart it" in said) == (started < 100.0)


def test_in_the_formatting_after_apply_says_restart() -> None:
    found = judge.finding_of(_process(50.0), [_recorded()], LAZY, NOTHING_READ, RULES)
    assert (found.kind, found.code, found.restart) == ("eager-formatting", 1, True)
    d = render.Diagnosed(_process(50.0), LAZY, found, False)
    assert "restart it" in render.paragraph(d, WORDS) and render.next_step(d, WORDS) is None


def test_a_torch_replaced_under_the_process_says_restart() -> None:
    found = judge.finding_of(
        _process(torch_replaced=True), [_outside(_recorded())], LAZY, NOTHING_READ, RULES
    )
    assert (found.kind, found.restart) == ("stale-import", True)


def test_the_run_reports_the_most_severe_code() -> None:
    eager = render.Diagnosed(
        _process(), EAGER, judge.finding_of(_process(), [_recorded()], EAGER, NOTHING_READ, RULES), False
    )
    lazy = render.Diagnosed(
        _process(pid=7),
        LAZY,
        judge.finding_of(_process(pid=7), [_outside(_recorded())], LAZY, NOTHING_READ, RULES),
        False,
    )
    said = report([lazy, eager])
    assert said.code == 1 and said.next == Advice("torch-lazylog apply --python /venv/bin/python")
    assert said.message.count("PID ") == 2
    assert report([lazy]).code == 0


def test_the_apply_it_names_is_run_as_the_tool_was() -> None:
    """From the single file (no `torch-lazylog` command), the apply is the file run by its Python."""
    eager = render.Diagnosed(
        _process(), EAGER, judge.finding_of(_process(), [_recorded()], EAGER, NOTHING_READ, RULES), False
    )
    program = "python3 -B /mnt/torch-lazylog.pyz"
    line = f"{program} apply --python /venv/bin/python"
    words = WORDS._replace(program=program)
    assert render.next_step(eager, words) == line
    assert render.entry(eager, words)["next"] == line and report([eager], words=words).next == Advice(line)


def test_links_are_followed_inside_the_process_root(tmp_path: Path) -> None:
    from patcher.diagnose.procs import resolved

    (tmp_path / "opt" / "cpython" / "bin").mkdir(parents=True)
    (tmp_path / "opt" / "cpython" / "bin" / "python3.12").touch()
    (tmp_path / "opt" / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "opt" / "venv" / "bin" / "python3").symlink_to("/opt/cpython/bin/python3.12")  # absolute
    (tmp_path / "opt" / "venv" / "bin" / "python").symlink_to("python3")  # relative
    root = str(tmp_path)
    assert resolved(root, "/opt/venv/bin/python") == "/opt/cpython/bin/python3.12"
    assert resolved(root, "/opt/venv/bin/../bin/python3") == "/opt/cpython/bin/python3.12"
    (tmp_path / "loop").symlink_to("/loop")
    assert resolved(root, "/loop/x").startswith("/loop")


def test_every_process_entry_has_the_same_fields() -> None:
    from patcher.diagnose.model import Unreadable

    found = render.Diagnosed(
        _process(), EAGER, judge.finding_of(_process(), [_recorded()], EAGER, NOTHING_READ, RULES), False
    )
    unread = render.unreadable_entry(Unreadable(7, "rights", "python serve.py", "memory map"), WORDS)
    assert list(render.entry(found, WORDS)) == list(unread) == list(render.ENTRY_FIELDS)
    assert unread["finding"] is None and unread["frames"] == [] and unread["exit_code"] == 4


def test_a_long_command_line_is_cut_between_words() -> None:
    """A server's command line in a sentence: whole words and an ellipsis, never half a word (a
    first word too long on its own is the one cut inside)."""
    from patcher.diagnose.render import shown

    argv = [
        "/opt/venv/bin/python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/Llama-3-70B-Instruct",
    ]
    line = shown(argv, limit=60)
    assert line == "/opt/venv/bin/python -m sglang.launch_server --model-path \u2026", line
    assert shown(["/opt/" + "x" * 100], limit=20) == "/opt/" + "x" * 14 + "\u2026"
    assert shown(["python", "  a\n", "b"]) == "python a b"
