"""The reinstall advice per install layout, without files: a command that runs where it is aimed
(PEP 668's --break-system-packages for an externally-managed Python; uv's form where uv installed
torch and is on PATH), or, where no installer is there, a sentence saying what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from patcher.cli.advice import reinstall
from patcher.core.errors import Install

PY = "/usr/bin/python3"


@pytest.mark.parametrize(
    ("install", "uv", "expected"),
    [
        pytest.param(
            Install("2.10.0", installer="pip"),
            False,
            f"{PY} -m pip install --force-reinstall --no-deps torch==2.10.0",
            id="venv-pip",
        ),
        pytest.param(
            Install("2.10.0", installer="pip", managed=True),
            False,
            f"{PY} -m pip install --break-system-packages --force-reinstall --no-deps torch==2.10.0",
            id="managed-pip",
        ),
        pytest.param(
            Install("2.10.0", installer="uv", managed=True),
            True,
            f"uv pip install --python {PY} --break-system-packages --reinstall --no-deps torch==2.10.0",
            id="managed-uv",
        ),
        pytest.param(
            Install("2.10.0", installer="uv"),
            True,
            f"uv pip install --python {PY} --reinstall --no-deps torch==2.10.0",
            id="venv-uv",
        ),
        pytest.param(
            Install("2.10.0", installer="uv", managed=True),
            False,
            f"{PY} -m pip install --break-system-packages --force-reinstall --no-deps torch==2.10.0",
            id="uv-installed-but-no-uv-here",
        ),
        pytest.param(
            Install("2.10.0", installer="pip", pip=False),
            True,
            f"uv pip install --python {PY} --reinstall --no-deps torch==2.10.0",
            id="no-pip-but-uv",
        ),
        pytest.param(
            Install("2.10.0"),
            False,
            f"{PY} -m pip install --force-reinstall --no-deps torch==2.10.0",
            id="no-installer",
        ),
    ],
)
def test_reinstall_command_per_layout(install: Install, uv: bool, expected: str) -> None:
    assert reinstall(PY, install, uv) == expected


@pytest.mark.parametrize("installer", ["pip", "uv", None])
@pytest.mark.parametrize("managed", [False, True])
def test_no_installer_there_is_a_sentence_not_a_command(installer: str | None, managed: bool) -> None:
    advice = reinstall(PY, Install("2.10.0", installer=installer, managed=managed, pip=False), False)
    assert advice.startswith(f"reinstall torch==2.10.0 for {PY} with the tool that installed it")
    assert "has no pip and no uv is on PATH" in advice
    assert "-m pip" not in advice and "uv pip" not in advice
    assert (f"({installer})" in advice) == (installer is not None)


@pytest.mark.parametrize(("managed", "pip", "uv"), [(False, True, False), (True, False, True)])
def test_a_vendor_build_or_no_python_is_a_sentence_whatever_the_layout(
    managed: bool, pip: bool | None, uv: bool
) -> None:
    vendor = Install("2.10.0+rocm7.2.4", True, "uv", managed=managed, pip=pip)
    advice = reinstall(PY, vendor, uv)
    assert advice.startswith("reinstall torch from the index") and "not on the public package index" in advice
    no_python = Install("2.10.0", installer="pip", managed=managed, pip=pip)
    advice = reinstall(None, no_python, uv)
    assert advice.startswith("reinstall torch in the environment") and "add --python" in advice


def test_the_probe_tells_pip_and_pep_668(tmp_path: Path) -> None:
    """The facts come from the target interpreter's probe: a venv is never externally managed; a
    venv made without pip has none; the runner has pip."""
    import subprocess
    import sys

    from patcher.install import interpreter

    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bare, _ = interpreter.probe(str(venv / "bin" / "python"), find_torch=True)
    assert (bare.has_pip, bare.externally_managed) == (False, False)
    runner, _ = interpreter.probe(sys.executable, find_torch=True)
    assert runner.has_pip is True and runner.externally_managed is False
    unasked, _ = interpreter.probe(str(venv / "bin" / "python"), find_torch=False)
    assert unasked.has_pip is None
