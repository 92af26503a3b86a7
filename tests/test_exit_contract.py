"""The exit contract off the happy path: signals and a stdout that is closed or full.

SIGINT and SIGTERM exit 130 and 143, a result that cannot be printed exits 5: never 0 or 1, which
CI reads as lazy or eager. The tree is pristine or patched afterwards, never torn, with no temp file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from patcher.core.exitcodes import ExitCode
from tests import faults, realdata
from tests.conftest import need
from tests.helpers import tool

EAGER = b"error.operator_str(target, args, kwargs),"
LAZY = b"LazyString(error.operator_str, target, args, kwargs),"


def _graph(torch_dir: Path) -> Path:
    return torch_dir / "_inductor" / "graph.py"


@pytest.mark.parametrize(
    ("signal_action", "point", "code", "patched"),
    [
        pytest.param("sigint", "fsync:graph.py", ExitCode.INTERRUPTED, False, id="sigint-while-staging"),
        pytest.param("sigint", "replace:graph.py", ExitCode.INTERRUPTED, True, id="sigint-while-committing"),
        pytest.param("sigterm", "write:RECORD", ExitCode.TERMINATED, False, id="sigterm-while-staging"),
        pytest.param(
            "sigterm", "replaced:graph.py", ExitCode.TERMINATED, True, id="sigterm-while-committing"
        ),
    ],
)
def test_a_signal_during_apply_has_its_own_code_and_leaves_a_whole_tree(
    signal_action: str, point: str, code: int, patched: bool, release: Callable[[str], Path]
) -> None:
    torch_dir = release("2.10.0")
    original = _graph(torch_dir).read_bytes()
    done = tool("apply", "--json", "--torch-dir", str(torch_dir), env=faults.env(point, signal_action))
    assert done.returncode == code, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["exit_code"] == code
    assert _graph(torch_dir).read_bytes() == (original.replace(EAGER, LAZY) if patched else original)
    assert not list(torch_dir.parent.rglob("*.torch-lazylog.tmp"))
    # commits are all or none: the signal waits until every file is in place
    verify = tool("verify", "--json", "--torch-dir", str(torch_dir))
    assert json.loads(verify.stdout)["state"] == ("patched" if patched else "pristine"), verify.stdout


def test_a_closed_stdout_is_exit_5(release: Callable[[str], Path]) -> None:
    torch_dir = release("2.10.0")
    before = _graph(torch_dir).read_bytes()
    reader = subprocess.Popen(
        [sys.executable, "-m", "patcher", "apply", "--dry-run", "--torch-dir", str(torch_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()  # as `| head -1` does once it has its line, here before the first write
    err = reader.stderr.read()
    assert reader.wait(timeout=120) == ExitCode.OUTPUT, err
    assert b"Traceback" not in err
    assert _graph(torch_dir).read_bytes() == before


@pytest.mark.parametrize("closed", [">&-", "2>&-"])
def test_a_stream_closed_by_the_shell_is_exit_5_not_1(closed: str, release: Callable[[str], Path]) -> None:
    """`verify >&-` on a lazy torch: Python starts with no stdout at all; that is exit 5, not "eager"."""
    import shlex

    torch_dir = release("2.10.0")
    command = f"{shlex.quote(sys.executable)} -m patcher"
    assert (
        subprocess.run(
            [*shlex.split(command), "apply", "--torch-dir", str(torch_dir)], capture_output=True
        ).returncode
        == 0
    )
    args = "verify" if closed == ">&-" else "apply --python /nonexistent/python"  # an error goes to stderr
    done = subprocess.run(
        ["bash", "-c", f"{command} {args} --torch-dir {shlex.quote(str(torch_dir))} {closed}"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == ExitCode.OUTPUT, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize("as_json", [False, True])
def test_a_full_stdout_is_exit_5_after_the_work_is_done(
    as_json: bool, release: Callable[[str], Path]
) -> None:
    torch_dir = release("2.10.0")
    original = _graph(torch_dir).read_bytes()
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "patcher",
                "apply",
                *(["--json"] if as_json else []),
                "--torch-dir",
                str(torch_dir),
            ],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.returncode == ExitCode.OUTPUT, done.stderr
    assert "Traceback" not in done.stderr and "could not print the result" in done.stderr.lower()
    assert _graph(torch_dir).read_bytes() == original.replace(EAGER, LAZY)


@pytest.mark.parametrize("stdout", [">&-", ">/dev/full"])
@pytest.mark.parametrize(
    ("args", "code"),
    [
        pytest.param("verify --torch-dir {torch}", ExitCode.EAGER, id="verify-eager"),
        pytest.param("verify --json --torch-dir {torch}", ExitCode.EAGER, id="verify-json"),
        pytest.param("apply --dry-run --torch-dir {torch}", ExitCode.OK, id="apply-dry-run"),
        pytest.param("revert --torch-dir {torch}", ExitCode.OK, id="revert"),
        pytest.param(
            "apply --json --python /nonexistent/python --torch-dir {torch}",
            ExitCode.ENVIRONMENT,
            id="apply-json-error",
        ),
        pytest.param("fingerprint {wheel}", ExitCode.OK, id="fingerprint-table"),
        pytest.param("fingerprint --markdown {wheel}", ExitCode.OK, id="fingerprint-markdown"),
        pytest.param("fingerprint --json {wheel}", ExitCode.OK, id="fingerprint-json"),
        pytest.param("fingerprint --check {wheel}", ExitCode.DIFFERS, id="fingerprint-check-differs"),
    ],
)
def test_a_lost_result_is_one_sentence_on_stderr_for_every_command(
    args: str, code: int, stdout: str, release: Callable[[str], Path]
) -> None:
    """Whatever the result (eager, lazy, an error in JSON, fingerprint's table), a stdout that is
    closed or full is exit 5 and one sentence on stderr that names the code it stands in for."""
    import shlex

    if "{torch}" in args:
        args = args.format(torch=shlex.quote(str(release("2.10.0"))))
    else:  # one release's wheel: its table differs from the shipped one, which lists every release
        args = args.format(wheel=shlex.quote(str(need(lambda: realdata.wheel("2.10.0")))))
    command = f"{shlex.quote(sys.executable)} -m patcher {args}"
    done = subprocess.run(["bash", "-c", f"{command} {stdout}"], capture_output=True, text=True)
    assert done.returncode == ExitCode.OUTPUT, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("torch-lazylog: error: Could not print the result"), lines
    assert (f"with exit {int(code)}," in lines[0]) == (code != ExitCode.OK), lines


@pytest.mark.parametrize("stdout", [">&-", ">/dev/full"])
def test_diagnose_s_lost_result_is_one_sentence_on_stderr(stdout: str) -> None:
    import shlex

    command = f"{shlex.quote(sys.executable)} -m patcher diagnose 0 --json"
    done = subprocess.run(["bash", "-c", f"{command} {stdout}"], capture_output=True, text=True)
    assert done.returncode == ExitCode.OUTPUT, done.stderr
    assert done.stderr.startswith("torch-lazylog: error: Could not print the result"), done.stderr
    assert len(done.stderr.splitlines()) == 1
