"""The command-line contract: options, exit codes, JSON, messages, locating torch without importing it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

import patcher
from patcher.core.report import State
from tests.conftest import snapshot

REQUIRED_JSON = {"state", "changed", "torch_version", "torch_dir", "message"}


def test_version(run: Callable[..., Result]) -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"torch-lazylog, version {patcher.__version__}"


@pytest.mark.parametrize("command", ["apply", "verify", "revert"])
def test_help_documents_every_option_and_exit_code(command: str, run: Callable[..., Result]) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0
    for option in ("--python", "--torch-dir", "--json", "--verbose"):
        assert option in result.stdout
    for code in ("0  success", "1  verify", "2  usage", "3  refused", "4  environment"):
        assert code in result.stdout


@pytest.mark.parametrize(
    "args",
    [["apply", "--no-such-option"], ["frobnicate"], ["verify", "--python"], ["apply", "--dry-run=3"]],
)
def test_usage_errors_exit_2(args: list[str], run: Callable[..., Result]) -> None:
    assert run(*args).exit_code == 2


def test_python_m_patcher_is_the_same_cli() -> None:
    done = subprocess.run([sys.executable, "-m", "patcher", "--version"], capture_output=True, text=True)
    assert done.returncode == 0
    assert patcher.__version__ in done.stdout


@pytest.mark.parametrize("command", ["apply", "verify", "revert"])
def test_missing_torch_dir_is_an_environment_error(
    command: str, tmp_path: Path, run: Callable[..., Result]
) -> None:
    result = run(command, "--torch-dir", str(tmp_path / "nope"), "--json")
    assert result.exit_code == 4
    report = json.loads(result.stdout)
    assert set(report) >= REQUIRED_JSON
    assert report["state"] == "unknown" and report["changed"] is False
    assert "--torch-dir" in report["message"]


def test_unrunnable_python_is_an_environment_error(tmp_path: Path, run: Callable[..., Result]) -> None:
    result = run("verify", "--python", str(tmp_path / "python3"))
    assert result.exit_code == 4
    assert "found no such file" in result.stderr
    assert "Traceback" not in result.output


def test_verbose_shows_the_traceback(tmp_path: Path, run: Callable[..., Result]) -> None:
    result = run("verify", "--verbose", "--python", str(tmp_path / "python3"))
    assert result.exit_code == 4
    assert "Traceback" in result.stderr


def _venv_with(site_source: Path, tmp_path: Path) -> Path:
    """A real venv (no pip, fast) whose site-packages holds the given release tree."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    for item in site_source.iterdir():
        item.rename(Path(purelib) / item.name)
    return venv


def test_interpreter_without_torch_is_an_environment_error(
    tmp_path: Path, run: Callable[..., Result]
) -> None:
    venv = tmp_path / "empty"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    result = run("apply", "--python", str(venv / "bin" / "python"))
    assert result.exit_code == 4
    assert "found none" in result.stderr and "--python" in result.stderr


def test_python_option_finds_torch_without_importing_it(
    release: Callable[[str], Path], tmp_path: Path, run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    # If anything imported this torch, it would fail loudly.
    (torch_dir / "__init__.py").write_text("raise RuntimeError('torch was imported')\n")
    venv = _venv_with(torch_dir.parent, tmp_path)
    python = str(venv / "bin" / "python")
    applied = run("apply", "--python", python, "--json")
    assert applied.exit_code == 0, applied.output
    report = json.loads(applied.stdout)
    assert report["torch_dir"].startswith(str(venv))
    assert (report["state"], report["torch_version"]) == ("patched", "2.10.0")
    assert run("verify", "--python", python).exit_code == 0
    assert run("revert", "--python", python).exit_code == 0


def test_verify_is_static_and_does_not_parse_when_hashes_agree(
    release: Callable[[str], Path], run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    import libcst

    torch_dir = release("2.11.0")
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0

    def no_parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("verify parsed graph.py")

    monkeypatch.setattr(libcst, "parse_module", no_parse)
    result = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["state"] == "patched"


def test_verify_never_writes(release: Callable[[str], Path], run: Callable[..., Result]) -> None:
    torch_dir = release("2.9.1")
    before = snapshot(torch_dir.parent)
    assert run("verify", "--torch-dir", str(torch_dir)).exit_code == 1
    assert snapshot(torch_dir.parent) == before


@pytest.mark.parametrize("command", ["apply", "verify", "revert"])
def test_json_is_one_object_with_the_contract_fields(
    command: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    result = run(command, "--torch-dir", str(torch_dir), "--json")
    report = json.loads(result.stdout)  # the whole of stdout is one object
    assert set(report) >= REQUIRED_JSON
    assert report["state"] in typing.get_args(State)
    assert isinstance(report["changed"], bool)
    assert report["torch_version"] == "2.10.0"
    assert report["torch_dir"] == str(torch_dir)
    assert report["exit_code"] == result.exit_code


def test_no_dist_info_keeps_the_record_beside_the_package(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    for item in torch_dir.parent.glob("torch-*.dist-info"):
        shutil.rmtree(item)
    pristine = snapshot(torch_dir.parent)
    result = run("apply", "--torch-dir", str(torch_dir), "--json")
    assert result.exit_code == 0, result.output
    undo = Path(json.loads(result.stdout)["undo_record"])
    assert undo == torch_dir.parent / ".torch_lazylog.json" and undo.exists()
    assert not [p for p in torch_dir.rglob("*") if "lazylog" in p.name]
    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert snapshot(torch_dir.parent) == pristine


def test_verify_does_not_even_import_libcst_when_hashes_agree(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.12.1")
    assert run("apply", "--torch-dir", str(torch_dir)).exit_code == 0
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "patcher", "verify", "--torch-dir", str(torch_dir)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "patcher.install.reading" in imported  # the trace sees the tool's own imports
    # verify reads only: neither the writer nor the planner is imported
    assert {"libcst", "torch", "patcher.install.fsio", "patcher.install.engine"}.isdisjoint(imported)


@pytest.mark.parametrize("version", ["2.10.0", "2.12.1"])
def test_apply_and_revert_of_a_known_release_need_no_libcst(
    version: str, release: Callable[[str], Path]
) -> None:
    """A known release is settled by the table's hashes: its patched sha256 proves the one edit."""
    torch_dir = release(version)
    for command in ("apply", "revert"):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "patcher", command, "--torch-dir", str(torch_dir)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
        assert "patcher.install.engine" in imported and "libcst" not in imported, command


def test_a_bug_is_an_exit_4_not_a_verify_failure(
    release: Callable[[str], Path], run: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    from patcher.install import reading

    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(reading, "verify", broken)
    result = run("verify", "--torch-dir", str(release("2.10.0")))
    assert result.exit_code == 4
    assert "Unexpected error: RuntimeError: boom" in result.stderr and "Traceback" not in result.stderr


def test_target_options_come_from_the_environment_and_an_option_wins(
    release: Callable[[str], Path],
    tmp_path: Path,
    run: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch_dir = release("2.10.0")
    monkeypatch.setenv("TORCH_LAZYLOG_TORCH_DIR", str(torch_dir))
    monkeypatch.setenv("TORCH_LAZYLOG_PYTHON", "")  # empty is unset (click's rule), not an empty path
    assert json.loads(run("verify", "--json").stdout)["torch_dir"] == str(torch_dir)
    monkeypatch.setenv("TORCH_LAZYLOG_PYTHON", str(tmp_path / "no-python"))
    assert run("verify").exit_code == 4  # the variable is used: that interpreter does not exist
    # The option wins: the runner's interpreter is asked, and it does not import that torch.
    option = run("verify", "--python", sys.executable)
    assert option.exit_code == 4 and f"in {sys.executable} (the interpreter given)" in option.stderr
    help_text = run("apply", "--help").stdout
    assert "TORCH_LAZYLOG_PYTHON" in help_text and "TORCH_LAZYLOG_TORCH_DIR" in help_text


@pytest.mark.parametrize(
    ("python", "found"),
    [
        ("DIR", "found a directory"),
        ("/bin/ls", "to be a Python 3 interpreter that can report where its torch is, but it exited with 2"),
    ],
    ids=["directory", "not-python"],
)
def test_a_python_that_is_not_one_is_named_as_such(
    python: str, found: str, tmp_path: Path, run: Callable[..., Result]
) -> None:
    result = run("verify", "--python", str(tmp_path) if python == "DIR" else python)
    assert result.exit_code == 4
    assert found in result.stderr, result.stderr
    assert (
        ".." not in result.stderr
        and "Permission denied" not in result.stderr
        and "Traceback" not in result.stderr
    )


@pytest.mark.parametrize(
    ("answer", "wrong"),
    [
        pytest.param('{"version": 3}', "executable, version, cache_tag", id="keys-missing"),
        pytest.param(
            '{"executable": "/x", "version": "3.12.1", "cache_tag": null, "pycache_prefix": null, '
            '"path": ["/x", 1], "torch_dir": null, "torch_path_entry": null, "error": null, '
            '"externally_managed": false, "pip": null}',
            "path",
            id="a-path-entry-not-a-string",
        ),
    ],
)
def test_a_python_whose_answer_is_not_the_probes_gets_one_sentence(
    answer: str, wrong: str, tmp_path: Path, run: Callable[..., Result]
) -> None:
    """A program that answers JSON, but not the probe's (a wrapper, another tool's copy of the
    module): one sentence naming it and what it answered, exit 4, never "Unexpected error"."""
    python = tmp_path / "python3"
    python.write_text(f"#!/bin/sh\ncat >/dev/null\necho '{answer}'\n")
    python.chmod(0o755)
    result = run("apply", "--python", str(python), "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 4 == report["exit_code"], report
    message = report["message"]
    assert message.startswith(f"Expected {python} to answer where its torch is with executable, "), message
    assert f"but it answered {answer[:150]}" in message and f"(wrong or missing: {wrong}" in message, message
    assert "Unexpected error" not in message and message.count("\n") == 0


def test_a_missing_torch_dir_is_named_as_missing(tmp_path: Path, run: Callable[..., Result]) -> None:
    result = run("apply", "--torch-dir", str(tmp_path / "nonexistent" / "torch"))
    assert result.exit_code == 4
    assert f"found no directory at {tmp_path / 'nonexistent' / 'torch'}" in result.stderr
    assert "is not a directory" not in result.stderr


def test_without_options_the_running_interpreters_torch_is_meant(run: Callable[..., Result]) -> None:
    """The test interpreter has no torch: found in-process (no second interpreter), and said so."""
    result = run("verify", "--json")
    assert result.exit_code == 4
    report = json.loads(result.stdout)
    assert (
        "Expected `import torch` to find torch for" in report["message"] and "found none" in report["message"]
    )


def test_a_stale_dist_info_beside_torch_is_told_apart_by_its_record(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    real = next(torch_dir.parent.glob("torch-*.dist-info"))
    stale = torch_dir.parent / "torch-2.9.0.dist-info"
    stale.mkdir()
    (stale / "RECORD").write_text("torch/version.py,,\n")  # a broken uninstall's leftover
    report = json.loads(run("apply", "--json", "--torch-dir", str(torch_dir)).stdout)
    assert report["undo_record"] == str(real / "torch_lazylog.json"), report
    (stale / "RECORD").write_bytes((real / "RECORD").read_bytes())  # now both list graph.py
    result = run("verify", "--torch-dir", str(torch_dir))
    assert (
        result.exit_code == 4 and "found 2 (torch-2.10.0.dist-info, torch-2.9.0.dist-info)" in result.stderr
    )


def test_the_version_comes_from_metadata_when_version_py_has_none(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.11.0")
    (torch_dir / "version.py").write_text("git_version = 'abc'\n")
    report = json.loads(run("verify", "--json", "--torch-dir", str(torch_dir)).stdout)
    assert report["torch_version"] == "2.11.0"


@pytest.mark.parametrize(
    ("option", "variable"), [("--python", "TORCH_LAZYLOG_PYTHON"), ("--torch-dir", "TORCH_LAZYLOG_TORCH_DIR")]
)
def test_an_empty_value_is_not_given_wherever_it_is_given(
    option: str,
    variable: str,
    tmp_path: Path,
    run: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As pip and click read an empty variable: `--torch-dir ''` and `TORCH_LAZYLOG_TORCH_DIR=` both
    mean the value was not given (the runner's Python, which has no torch: exit 4), never exit 2."""
    for name in ("TORCH_LAZYLOG_PYTHON", "TORCH_LAZYLOG_TORCH_DIR"):
        monkeypatch.delenv(name, raising=False)
    unset = json.loads(run("verify", "--json").stdout)
    monkeypatch.setenv(variable, "")
    empty_variable = json.loads(run("verify", "--json").stdout)
    monkeypatch.delenv(variable)
    empty_option = json.loads(run("verify", option, "", "--json").stdout)
    assert unset["exit_code"] == 4
    assert empty_variable == unset and empty_option == unset
    # An empty option is as if it were not there: its variable, when set, applies and is named.
    monkeypatch.setenv(variable, str(tmp_path / "not-there"))
    result = run("verify", option, "")
    assert result.exit_code == 4 and f"{variable}=" in result.stderr, result.stderr
