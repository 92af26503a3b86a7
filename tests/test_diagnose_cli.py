"""diagnose's answers that need no torch: a process it cannot read, one that is not Python, one that
does not exist, a Python without torch; each one sentence with its exit code, no traceback, and
the JSON shape every command prints with `processes` added."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from patcher.diagnose.judge import START_RESOLUTION
from tests.diagnosing import NOBODY, TAG, diagnose_json, diagnose_text, loading
from tests.helpers import readme_json_fields

ROOT = Path(__file__).resolve().parent.parent


def test_what_it_cannot_read_is_one_sentence(tmp_path: Path) -> None:
    python = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", TAG])
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        time.sleep(1)
        cases = [
            (str(python.pid), 4, "has not imported torch"),
            (str(sleeper.pid), 2, "which is not Python"),
            ("4194303", 2, "found none"),  # above the kernel's largest pid
        ]
        for pid, expected, said in cases:
            code, report, _ = diagnose_json(pid)
            assert (code, report["exit_code"]) == (expected, expected) and said in report["message"], report
            assert report["command"] == "diagnose" and report["processes"] == [] and report["next"] is None
            assert report["message"].count(". ") == 0 and list(report) == [*readme_json_fields(), "processes"]
            text = diagnose_text(pid)
            assert text.returncode == expected and text.stdout == "" and text.stderr.count("\n") == 1
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv is not installed")
        import click
        import libcst

        paths = {str(Path(m.__file__).parent.parent) for m in (click, libcst) if m.__file__}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *paths]))
        code, report, _ = diagnose_json(str(python.pid), user=NOBODY, env=env)
        assert code == 4 and "--cap-add" not in report["message"] and "as root" in report["message"], report
    finally:
        python.kill()
        sleeper.kill()
        python.wait()
        sleeper.wait()


def test_the_readme_shows_the_committed_diagnose_speed() -> None:
    import csv

    root = Path(__file__).resolve().parent.parent
    rows = list(csv.DictReader((root / "bench" / "diagnose_speed.csv").read_text().splitlines()))
    from tests.docs import block

    table = block("diagnose-speed")
    assert [r["measure"] for r in rows] == [
        "dump_s",
        "diagnose_8_ranks_s",
        "diagnose_8_ranks_5_samples_s",
        "load_average_1min",
    ]
    for row in rows:
        assert f"| {row['measure']} | {row['value']} |" in table


@pytest.mark.parametrize(
    ("change", "code", "finding", "said"),
    [
        pytest.param(None, 1, "eager-torch", "the next deep graph it compiles can hang", id="pristine"),
        pytest.param(b"x = 1\n", 3, "unknown-torch", "as released, found it changed", id="unknown"),
        pytest.param(b"", 4, "unknown-torch", "No such file or directory", id="no-graph-py"),
    ],
)
def test_the_torch_a_process_mapped_is_read_from_its_bytes(
    change: bytes | None, code: int, finding: str, said: str, release: Any
) -> None:
    """A real torch 2.10.0 release tree whose _C*.so a live Python has mapped."""
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    before = graph.read_bytes()
    process = loading(torch_dir)
    try:
        time.sleep(2 * START_RESOLUTION)  # a change surely after the start, to the clock's tick
        if change == b"":
            graph.unlink()
        elif change is not None:
            graph.write_bytes(change)
        exit_code, report, _ = diagnose_json(str(process.pid))
        assert exit_code == code, report
        (entry,) = report["processes"]
        assert entry["finding"] == finding and said in entry["message"], report
        assert entry["torch_dir"] == str(torch_dir) and entry["interpreter"] == sys.executable
        assert [f["name"] for f in entry["frames"]] == ["<module>"]
        assert entry["restart"] is (change == b"x = 1\n")  # written after the process started
        if change is None:
            assert graph.read_bytes() == before
            # this Python alone does not import that tree: the advice names the directory it loaded
            assert report["next"] == f"torch-lazylog apply --torch-dir {torch_dir}"
            assert f"Patch the torch it loaded, {torch_dir}, which {sys.executable} alone" in entry["message"]
    finally:
        process.kill()
        process.wait()


def test_a_zombie_is_named_as_exited() -> None:
    """A child that exited and was not reaped: said to have exited, not called "not Python"."""
    child = subprocess.Popen([sys.executable, "-c", "pass", TAG])
    try:
        deadline = time.monotonic() + 30
        while not Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].startswith(" Z"):
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.05)
        code, report, _ = diagnose_json(str(child.pid))
        assert code == 2 and "has exited (a zombie" in report["message"], report
    finally:
        child.wait()


@pytest.mark.parametrize(
    "args", [["abc"], ["--samples", "0", "1"], ["--interval", "nan", "1"], ["-5"], ["0"]]
)
def test_a_bad_argument_is_a_usage_error_of_the_same_shape(args: list[str]) -> None:
    code, report, _ = diagnose_json(*args)
    assert code == 2 and report["exit_code"] == 2, report
    assert list(report) == [*readme_json_fields(), "processes"] and report["processes"] == []


def test_without_py_spy_the_advice_names_the_command_for_the_tools_environment() -> None:
    """Where the tool's environment has pip, its own; where it has none (the image step makes it so),
    another Python's pip aimed at it with --python."""
    from patcher.diagnose import stacks

    assert stacks.install_command("/env/bin/python") == "/env/bin/python -m pip install 'py-spy>=0.4'"
    without_pip = "import sys; sys.path = [p for p in sys.path if 'site-packages' not in p]; "
    done = subprocess.run(
        [sys.executable, "-c", without_pip + "from patcher.diagnose import stacks; "
         "print(stacks.install_command('/env/bin/python'))"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.stdout.strip() == "python3 -m pip --python /env/bin/python install 'py-spy>=0.4'", done.stderr
