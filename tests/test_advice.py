"""Every result that is not success names one next step, and following it, as printed, closes.

Each case puts a real release tree into a state, then walks: verify, run the command its `next`
names (parsed from the JSON, run exactly as printed), at most three times. The walk must end at
exit 0, or at the documented state that only a reinstall of torch can fix (its `next` is the pip
command for the target interpreter). No state may loop.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests import realdata
from tests.conftest import need
from tests.helpers import foreign_pyc_name, make_pyc

Mutate = Callable[[Path, Callable[..., Result]], None]


def _graph(torch_dir: Path) -> Path:
    return torch_dir / "_inductor" / "graph.py"


def _record(torch_dir: Path) -> Path:
    return next(torch_dir.parent.glob("torch-*.dist-info")) / "RECORD"


def _applied(torch_dir: Path, run: Callable[..., Result]) -> None:
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0


def pristine(torch_dir: Path, run: Callable[..., Result]) -> None:
    """Nothing done yet."""


def foreign_pyc(torch_dir: Path, run: Callable[..., Result]) -> None:
    (_graph(torch_dir).parent / "__pycache__").mkdir(exist_ok=True)
    (_graph(torch_dir).parent / "__pycache__" / foreign_pyc_name()).write_bytes(b"\0" * 16)


def record_row_put_back(torch_dir: Path, run: Callable[..., Result]) -> None:
    original = _record(torch_dir).read_bytes()
    _applied(torch_dir, run)
    row = next(
        line for line in original.splitlines(keepends=True) if line.startswith(b"torch/_inductor/graph.py,")
    )
    lines = [
        row if line.startswith(b"torch/_inductor/graph.py,") else line
        for line in _record(torch_dir).read_bytes().splitlines(keepends=True)
    ]
    _record(torch_dir).write_bytes(b"".join(lines))


def stale_unchecked_pyc(torch_dir: Path, run: Callable[..., Result]) -> None:
    pyc = make_pyc(_graph(torch_dir), "unchecked-hash", 0)
    stale = pyc.read_bytes()
    _applied(torch_dir, run)
    pyc.write_bytes(stale)


def reinstalled_over_patched(torch_dir: Path, run: Callable[..., Result]) -> None:
    original = _graph(torch_dir).read_bytes()
    _applied(torch_dir, run)
    _graph(torch_dir).write_bytes(original)  # the undo record stays behind


def edited_after_apply(torch_dir: Path, run: Callable[..., Result]) -> None:
    _applied(torch_dir, run)
    _graph(torch_dir).write_bytes(_graph(torch_dir).read_bytes() + b"\n# edited by hand\n")


def undo_record_deleted(torch_dir: Path, run: Callable[..., Result]) -> None:
    _applied(torch_dir, run)
    next(torch_dir.parent.glob("torch-*.dist-info")).joinpath("torch_lazylog.json").unlink()


def upgraded_over_patched(torch_dir: Path, run: Callable[..., Result]) -> None:
    """A patched 2.12.1 whose graph.py was replaced by 2.13.0's, the record left behind."""
    _applied(torch_dir, run)
    _graph(torch_dir).write_bytes(need(lambda: realdata.graph_source("2.13.0")))  # type: ignore[arg-type]


CASES: list[tuple[str, Mutate, str]] = [
    ("2.10.0", pristine, "ok"),
    ("2.10.0", foreign_pyc, "ok"),
    ("2.10.0", record_row_put_back, "ok"),
    ("2.10.0", stale_unchecked_pyc, "ok"),
    ("2.10.0", reinstalled_over_patched, "ok"),
    ("2.12.1", edited_after_apply, "reinstall"),
    ("2.10.0", edited_after_apply, "reinstall"),
    ("2.10.0", undo_record_deleted, "ok"),
    ("2.12.1", upgraded_over_patched, "ok"),
]


def _walk(torch_dir: Path, run: Callable[..., Result]) -> tuple[str, list[str]]:
    """verify, then the command its `next` names, until verify is 0 with nothing left to do."""
    taken: list[str] = []
    for _ in range(4):
        verify = run("verify", "--json", "--torch-dir", str(torch_dir))
        report = json.loads(verify.stdout)
        assert report["exit_code"] == verify.exit_code
        step = report["next"]
        if verify.exit_code == 0 and step is None:
            return "ok", taken
        assert step, f"exit {verify.exit_code} names no next step: {report['message']}"
        if not step.startswith("torch-lazylog "):
            assert "reinstall" in step, step
            return "reinstall", taken
        assert f"--torch-dir {torch_dir}" in step, step
        assert step not in taken, f"the advice loops: {[*taken, step]}"
        taken.append(step)
        done = run(*shlex.split(step)[1:])
        assert done.exit_code == 0, (step, done.output)
    raise AssertionError(f"no end after {taken}")


@pytest.mark.parametrize(("version", "mutate", "end"), CASES, ids=[f"{v}-{m.__name__}" for v, m, _ in CASES])
def test_following_the_advice_closes(
    version: str, mutate: Mutate, end: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release(version)
    mutate(torch_dir, run)
    reached, taken = _walk(torch_dir, run)
    assert reached == end, taken
    if end == "reinstall":
        for command in ("apply", "revert"):
            result = run(command, "--torch-dir", str(torch_dir))
            assert result.exit_code != 0 and "Only a reinstall of torch can fix this: " in result.stderr, (
                result.output
            )


def test_advice_repeats_the_python_the_user_gave(
    release: Callable[[str], Path],
    tmp_path: Path,
    run: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import subprocess
    import sys

    monkeypatch.setenv("PATH", str(tmp_path / "no-uv"))  # no installer on PATH: the advice is the target's

    torch_dir = release("2.10.0")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    for item in torch_dir.parent.iterdir():
        shutil.move(str(item), site / item.name)
    python = str(venv / "bin" / "python")
    report = json.loads(run("verify", "--json", "--python", python).stdout)
    assert report["next"] == f"torch-lazylog apply --python {python}"
    edited_after_apply(site / "torch", run)
    result = run("revert", "--json", "--python", python)
    # the distribution's own version (METADATA), which the index resolves; a venv without pip (and
    # no uv on PATH) gets no command that cannot run there, but what to do
    advice = json.loads(result.stdout)["next"]
    assert advice.startswith(f"reinstall torch==2.10.0 for {python} with the tool that installed it")
    assert "has no pip and no uv is on PATH" in advice and "-m pip" not in advice


def test_the_console_script_off_path_names_itself_in_its_advice(release: Callable[[str], Path]) -> None:
    """A venv's torch-lazylog run by its path, its bin/ not on PATH: the `Next:` line names that script
    (a bare `torch-lazylog` would not be found), and runs as printed; on PATH, the bare name."""
    script = Path(sys.executable).parent / "torch-lazylog"
    assert script.exists(), "the test venv has no torch-lazylog console script"
    torch_dir = release("2.10.0")
    off_path = {**os.environ, "PATH": "/usr/bin:/bin"}

    def verify(env: dict[str, str]) -> str:
        done = subprocess.run(
            [str(script), "verify", "--torch-dir", str(torch_dir)], capture_output=True, text=True, env=env
        )
        assert done.returncode == 1, done.stderr
        return done.stdout.splitlines()[-1]

    line = verify(off_path)
    assert line == f"Next: {shlex.quote(str(script))} apply --torch-dir {shlex.quote(str(torch_dir))}", line
    on_path = {**os.environ, "PATH": f"{script.parent}{os.pathsep}/usr/bin:/bin"}
    assert verify(on_path) == f"Next: torch-lazylog apply --torch-dir {shlex.quote(str(torch_dir))}"
    applied = subprocess.run(
        shlex.split(line.removeprefix("Next: ")), capture_output=True, text=True, env=off_path
    )
    assert applied.returncode == 0, applied.stderr
