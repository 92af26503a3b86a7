"""The reinstall advice per install layout, without files: a command that runs where it is aimed
(PEP 668's --break-system-packages for an externally-managed Python; uv's form where uv installed
torch and is on PATH), or, where no installer is there, a sentence saying what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from patcher.cli.advice import Layout, reinstall

PY = "/usr/bin/python3"


@pytest.mark.parametrize(
    ("installer", "layout", "expected"),
    [
        pytest.param(
            "pip", Layout(), f"{PY} -m pip install --force-reinstall --no-deps torch==2.10.0", id="venv-pip"
        ),
        pytest.param(
            "pip",
            Layout(externally_managed=True),
            f"{PY} -m pip install --break-system-packages --force-reinstall --no-deps torch==2.10.0",
            id="managed-pip",
        ),
        pytest.param(
            "uv",
            Layout(externally_managed=True, uv=True),
            f"uv pip install --python {PY} --break-system-packages --reinstall --no-deps torch==2.10.0",
            id="managed-uv",
        ),
        pytest.param(
            "uv",
            Layout(uv=True),
            f"uv pip install --python {PY} --reinstall --no-deps torch==2.10.0",
            id="venv-uv",
        ),
        pytest.param(
            "uv",
            Layout(externally_managed=True),
            f"{PY} -m pip install --break-system-packages --force-reinstall --no-deps torch==2.10.0",
            id="uv-installed-but-no-uv-here",
        ),
        pytest.param(
            "pip",
            Layout(pip=False, uv=True),
            f"uv pip install --python {PY} --reinstall --no-deps torch==2.10.0",
            id="no-pip-but-uv",
        ),
        pytest.param(
            None,
            Layout(),
            f"{PY} -m pip install --force-reinstall --no-deps torch==2.10.0",
            id="no-installer",
        ),
    ],
)
def test_reinstall_command_per_layout(installer: str | None, layout: Layout, expected: str) -> None:
    assert reinstall(PY, "2.10.0", False, installer, layout) == expected


@pytest.mark.parametrize("installer", ["pip", "uv", None])
@pytest.mark.parametrize("managed", [False, True])
def test_no_installer_there_is_a_sentence_not_a_command(installer: str | None, managed: bool) -> None:
    advice = reinstall(PY, "2.10.0", False, installer, Layout(externally_managed=managed, pip=False))
    assert advice.startswith(f"reinstall torch==2.10.0 for {PY} with the tool that installed it")
    assert "has no pip and no uv is on PATH" in advice
    assert "-m pip" not in advice and "uv pip" not in advice
    assert (f"({installer})" in advice) == (installer is not None)


@pytest.mark.parametrize("layout", [Layout(), Layout(externally_managed=True, pip=False, uv=True)])
def test_a_vendor_build_or_no_python_is_a_sentence_whatever_the_layout(layout: Layout) -> None:
    assert reinstall(PY, "2.10.0+rocm7.2.4", True, "uv", layout).startswith("reinstall torch from the index")
    assert reinstall(None, "2.10.0", False, "pip", layout).startswith("reinstall torch in the environment")


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
