"""`verify --runtime`'s verdict from what the probe found: a check that could not run is not a check
that failed, and a failed check is said first. The probe itself runs on real torch in the e2e tests;
here its answer is given, on a real 2.10.0 tree patched by the tool."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from patcher.install import locate, runtime

CHECKS = ["compiled_result_correct", "not_formatted_when_filtered", "info_text_identical"]


def _answer(graph: Path, failed: tuple[str, ...] = (), unable: str | None = None) -> dict[str, Any]:
    checks = [{"name": name, "passed": name not in failed, "detail": f"{name} detail"} for name in CHECKS]
    return {"checks": [] if unable else checks, "error": None, "unable": unable, "graph_py": str(graph)}


def _verify(
    answer: dict[str, Any], torch_dir: Path, run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, dict[str, Any]]:
    monkeypatch.setattr(runtime, "probe", lambda *args, **kwargs: answer)
    found = locate.locate  # a tree with an owner, as a venv's torch has: the probe runs there
    monkeypatch.setattr(locate, "locate", lambda *args: found(*args)._replace(owner=sys.executable))
    result = run("verify", "--runtime", "--torch-dir", str(torch_dir), "--json")
    report: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, report


@pytest.fixture
def patched(release: Callable[[str], Path], run: Callable[..., Result]) -> Path:
    torch_dir = release("2.10.0")
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    return torch_dir


def test_all_checks_passing_keep_the_static_verdict(
    patched: Path, run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, report = _verify(_answer(patched / "_inductor" / "graph.py"), patched, run, monkeypatch)
    assert (code, report["state"]) == (0, "patched"), report
    assert report["message"].endswith("4 checks passed on Inductor's real path.")


def test_a_check_the_environment_switched_off_is_an_environment_error(
    patched: Path, run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    why = "TORCH_COMPILE_DISABLE=1 in the environment switches torch.compile off"
    code, report = _verify(_answer(patched / "_inductor" / "graph.py", unable=why), patched, run, monkeypatch)
    assert code == 4, report
    assert report["state"] == "patched" and report["checks"] == []  # nothing failed: it did not run
    assert report["message"].startswith("Expected the runtime check to exercise Inductor's")
    assert f"but {why}, so it could not run" in report["message"]
    assert f"`torch-lazylog verify --torch-dir {patched}` for the static check" in report["message"]


def test_a_torch_dir_no_interpreter_owns_needs_python_and_keeps_the_static_read(
    release: Callable[[str], Path], run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bare tree: the tool's own Python is not where that torch runs, so nothing is imported there;
    one sentence names --python, its advice keeps --torch-dir, and the JSON the state that was read."""

    def never(*args: object, **kwargs: object) -> object:
        raise AssertionError("the probe ran in an interpreter that does not own the torch directory")

    monkeypatch.setattr(runtime, "probe", never)
    torch_dir = release("2.10.0")
    result = run("verify", "--runtime", "--torch-dir", str(torch_dir), "--json")
    report = json.loads(result.stdout)
    assert (result.exit_code, report["state"]) == (4, "pristine"), report
    assert (report["torch_dir"], report["torch_version"]) == (str(torch_dir), "2.10.0")
    message = report["message"]
    assert message.startswith(f"Expected an interpreter that imports {torch_dir} to run the runtime check")
    assert "--runtime needs --python" in message and "import torch failed" not in message
    assert f"`torch-lazylog verify --torch-dir {torch_dir} --runtime --python PYTHON`" in message
    assert "the static check alone: torch 2.10.0 at" in message and "eagerly" in message
    assert message.count(". ") == 0, message  # one sentence


@pytest.mark.parametrize(
    ("failed", "state"),
    [(("not_formatted_when_filtered",), "unknown"), (("info_text_identical",), "unknown")],
    ids=["formatted-eagerly", "text-differs"],
)
def test_a_failed_check_is_said_first_and_names_the_state(
    failed: tuple[str, ...],
    state: str,
    patched: Path,
    run: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer = _answer(patched / "_inductor" / "graph.py", failed=failed)
    code, report = _verify(answer, patched, run, monkeypatch)
    assert (code, report["state"]) == (1, state), report
    message = report["message"]
    assert message.startswith("Expected Inductor's real implicit-fallback path to format")
    assert "lazily" not in message.split("Static check:")[0]
    assert f"found: {failed[0]} detail. Static check: " in message
    assert [c["name"] for c in report["checks"] if not c["passed"]] == list(failed)


def test_a_python_that_imports_another_torch_is_told_to_pass_the_right_one(
    patched: Path, run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, report = _verify(_answer(Path("/elsewhere/torch/_inductor/graph.py")), patched, run, monkeypatch)
    assert code == 4, report
    assert report["message"].endswith(
        "but it imports /elsewhere/torch/_inductor/graph.py. Pass --python with the interpreter that uses this torch."
    )
