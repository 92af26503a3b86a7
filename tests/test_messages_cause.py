"""Messages that name the cause, on the real 2.10.0 tree: a graph.py that is not a regular file says
what it is; an error that comes from TORCH_LAZYLOG_PYTHON or TORCH_LAZYLOG_TORCH_DIR names the
variable, not the option. Both in-process (click's runner) and as a separate process."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from patcher.cli.app import cli
from tests.conftest import snapshot
from tests.helpers import tool


def _make(kind: str, graph: Path) -> str:
    """Put something that is not a regular file at graph.py; what the message must call it."""
    graph.unlink()
    if kind == "fifo":
        os.mkfifo(graph)
        return "found a FIFO (named pipe) at"
    if kind == "directory":
        graph.mkdir()
        return "found a directory at"
    if kind == "device-link":
        graph.symlink_to(os.devnull)
        return f"found a link to a character device ({os.path.realpath(os.devnull)}) at"
    graph.symlink_to(graph.parent / "gone.py")
    return "found a broken link at"


@pytest.mark.parametrize("kind", ["fifo", "directory", "device-link", "broken-link"])
@pytest.mark.parametrize("command", ["apply", "verify", "revert"])
def test_a_graph_py_that_is_not_a_regular_file_says_what_it_is(
    kind: str, command: str, release: Callable[[str], Path]
) -> None:
    torch_dir = release("2.10.0")
    graph = torch_dir / "_inductor" / "graph.py"
    said = _make(kind, graph)
    before = snapshot(torch_dir.parent)
    done = tool(command, "--torch-dir", str(torch_dir), "--json", timeout=60)  # a FIFO must not block
    report = json.loads(done.stdout)
    assert done.returncode == 4 and report["exit_code"] == 4
    assert (
        f"Expected _inductor/graph.py in {torch_dir} to be a regular file, {said} {graph}"
        in report["message"]
    )
    assert "without it" not in report["message"] and "Traceback" not in done.stderr
    assert snapshot(torch_dir.parent) == before


def _click(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    return result.exit_code, result.stderr


def _process(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = tool(*args, env=env, timeout=60)
    return done.returncode, done.stderr


@pytest.mark.parametrize("path", [_click, _process], ids=["in-process", "process"])
def test_a_bad_python_from_the_variable_names_the_variable(
    path: Callable[[list[str], dict[str, str]], tuple[int, str]], tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-python")
    code, err = path(["verify"], {"TORCH_LAZYLOG_PYTHON": missing})
    assert code == 4, err
    assert f"Expected a Python interpreter at {missing}" in err and "found no such file" in err
    assert "set TORCH_LAZYLOG_PYTHON to the interpreter" in err
    assert f"TORCH_LAZYLOG_PYTHON={missing} in the environment" in err
    assert "--python with" not in err and "pass --python" not in err

    code, err = path(["verify", "--python", missing], {"TORCH_LAZYLOG_PYTHON": missing})
    assert code == 4 and "pass --python with the interpreter" in err and "TORCH_LAZYLOG_PYTHON" not in err


@pytest.mark.parametrize("path", [_click, _process], ids=["in-process", "process"])
def test_a_bad_torch_dir_from_the_variable_names_the_variable(
    path: Callable[[list[str], dict[str, str]], tuple[int, str]], release: Callable[[str], Path]
) -> None:
    torch_dir = release("2.10.0")
    _make("fifo", torch_dir / "_inductor" / "graph.py")
    code, err = path(["apply"], {"TORCH_LAZYLOG_TORCH_DIR": str(torch_dir)})
    assert code == 4, err
    assert (
        "found a FIFO (named pipe)" in err and "set TORCH_LAZYLOG_TORCH_DIR to the `torch` directory" in err
    )
    assert "--torch-dir with" not in err

    gone = torch_dir.parent / "elsewhere" / "torch"
    code, err = path(["verify"], {"TORCH_LAZYLOG_TORCH_DIR": str(gone)})
    assert code == 4 and f"found no directory at {gone}" in err
    assert "Set TORCH_LAZYLOG_TORCH_DIR to the `torch` directory" in err and "--torch-dir with" not in err


def test_a_torch_dir_the_python_does_not_import_names_both_variables(
    release: Callable[[str], Path], tmp_path: Path
) -> None:
    """Both from the environment: the advice is about the variables, never the options."""
    torch_dir = release("2.10.0")
    python = shutil.which("python3")
    assert python is not None
    env = {"TORCH_LAZYLOG_TORCH_DIR": str(torch_dir), "TORCH_LAZYLOG_PYTHON": python}
    code, err = _process(["verify"], env)
    assert code == 4, err
    assert "set TORCH_LAZYLOG_TORCH_DIR to the torch that interpreter imports" in err
    assert "unset TORCH_LAZYLOG_TORCH_DIR" in err and "set TORCH_LAZYLOG_PYTHON to the interpreter" in err
    assert "pass --torch-dir" not in err and "pass --python" not in err
