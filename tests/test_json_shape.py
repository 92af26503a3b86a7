"""One JSON shape for every result and every error, on every exit path, as the README lists it."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from collections.abc import Callable
from pathlib import Path

import pytest

from patcher.core.report import State
from tests import realdata
from tests.conftest import need
from tests.helpers import readme_json_fields

ROOT = Path(__file__).resolve().parent.parent


def _tool(*args: str) -> tuple[int, dict[str, object]]:
    done = subprocess.run([sys.executable, "-m", "patcher", *args, "--json"], capture_output=True, text=True)
    report: dict[str, object] = json.loads(done.stdout)  # the whole of stdout is one object
    return done.returncode, report


def _tree(tmp_path: Path, version: str = "2.10.0") -> Path:
    torch_dir = need(lambda: realdata.release_tree(version, tmp_path / "site"))
    assert isinstance(torch_dir, Path)
    return torch_dir


def _edited_after_apply(tmp_path: Path) -> list[str]:
    torch_dir = _tree(tmp_path)
    assert _tool("apply", "--torch-dir", str(torch_dir))[0] == 0
    graph = torch_dir / "_inductor" / "graph.py"
    graph.write_bytes(graph.read_bytes() + b"# edited by hand\n")
    return ["--torch-dir", str(torch_dir)]


def _unknown_graph(tmp_path: Path) -> list[str]:
    torch_dir = _tree(tmp_path)
    (torch_dir / "_inductor" / "graph.py").write_bytes(b"x = 1\n")
    return ["--torch-dir", str(torch_dir)]


def _not_a_torch_wheel(tmp_path: Path) -> list[str]:
    wheel = tmp_path / "not-a-torch.whl"
    wheel.write_bytes(b"")
    return [str(wheel)]


def _a_wheel_without_the_site(tmp_path: Path) -> list[str]:
    import zipfile

    wheel = tmp_path / "torch-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("torch/_inductor/graph.py", "x = 1\n")
    return [str(wheel)]


def _wheels(versions: list[str]) -> list[str]:
    return [str(need(lambda v=v: realdata.wheel(v))) for v in versions]  # type: ignore[misc]


CASES: list[tuple[str, int, Callable[[Path], list[str]]]] = [
    ("apply", 0, lambda tmp: ["--torch-dir", str(_tree(tmp))]),
    ("verify", 0, lambda tmp: ["--torch-dir", str(_tree(tmp, "2.13.0"))]),
    ("revert", 0, lambda tmp: ["--torch-dir", str(_tree(tmp))]),
    ("verify", 1, lambda tmp: ["--torch-dir", str(_tree(tmp))]),
    ("apply", 2, lambda tmp: ["--no-such-option"]),
    ("verify", 2, lambda tmp: ["--runtime=maybe"]),
    ("apply", 3, _edited_after_apply),
    ("revert", 3, _edited_after_apply),
    ("verify", 3, _unknown_graph),
    ("apply", 4, lambda tmp: ["--torch-dir", str(tmp / "nowhere")]),
    ("verify", 4, lambda tmp: ["--python", str(tmp)]),
    ("revert", 4, lambda tmp: ["--python", "/bin/ls"]),
    ("fingerprint", 0, lambda tmp: _wheels(["2.10.0"])),  # one wheel's table
    ("fingerprint", 7, lambda tmp: ["--check", *_wheels(["2.10.0"])]),
    ("fingerprint", 2, lambda tmp: [str(tmp / "missing.whl")]),
    ("fingerprint", 2, _not_a_torch_wheel),
    ("fingerprint", 3, _a_wheel_without_the_site),
    ("fingerprint", 4, lambda tmp: ["--output", str(tmp / "no-such-dir" / "out.json"), *_wheels(["2.10.0"])]),
]


@pytest.mark.parametrize(
    ("command", "code", "args"), CASES, ids=[f"{c}-{n}-{i}" for i, (c, n, _) in enumerate(CASES)]
)
def test_every_exit_path_prints_the_documented_shape(
    command: str, code: int, args: Callable[[Path], list[str]], tmp_path: Path
) -> None:
    exit_code, report = _tool(command, *args(tmp_path))
    assert exit_code == code, report
    assert list(report) == readme_json_fields()
    assert report["command"] == command and report["exit_code"] == code
    assert isinstance(report["message"], str) and report["message"].endswith(".")
    assert not report["message"].endswith("..") and "Traceback" not in report["message"]
    assert report["state"] in typing.get_args(State)
    assert isinstance(report["changed"], bool)
    for listed in ("problems", "pycs", "checks"):
        assert isinstance(report[listed], list)
    if command in ("apply", "verify", "revert") and code in (1, 3) and report["state"] != "unknown":
        assert report["next"], f"exit {code} names no next step"
    if command != "fingerprint" and report["state"] == "unknown" and code == 3:
        # a release's graph.py changed by hand: what restores it, and every release the tool knows
        assert str(report["next"]).startswith("reinstall torch"), report
        assert isinstance(report["support"], dict) and "2.10.0" in report["support"]["eager"]
    else:
        assert report["support"] is None
    if code == 0:
        assert report["next"] is None


def test_the_documented_fields_are_the_codes_in_its_order() -> None:
    """docs/commands.md's list is the contract: every entry fills these fields (patcher.core.fields,
    which the single file uses on an old Python) and every report prints them, in this order."""
    from patcher.core.exitcodes import ExitCode
    from patcher.core.fields import FIELDS, unread
    from patcher.core.report import Report

    assert list(FIELDS) == readme_json_fields()
    assert list(Report("apply", "unknown", False, "m.").to_json(None)) == list(FIELDS)
    assert unread("apply", 4, "m.") == Report("apply", "unknown", False, "m.", ExitCode(4)).to_json(None)


def test_every_field_of_a_report_is_printed() -> None:
    """Report.to_json's keys are patcher.core.fields.FIELDS: a field added to the report and not to
    the contract would be dropped silently, so each is one (its exit code named exit_code), or printed
    by the text alone (TEXT_ONLY)."""
    from patcher.core.fields import FIELDS, TEXT_ONLY
    from patcher.core.report import Report

    assert {"exit_code" if name == "code" else name for name in Report._fields} == {*FIELDS, *TEXT_ONLY}
    full = Report("apply", "patched", True, "m.", torch_dir="/t", problems=("p",), table="x")
    printed = full.to_json("run apply")
    assert (printed["torch_dir"], printed["problems"], printed["table"], printed["next"]) == (
        "/t",
        ["p"],
        "x",
        "run apply",
    )
