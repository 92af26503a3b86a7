"""A message's parts render in one place: advice about an option names the option, or, when its value
came from the environment, the variable; the single file names the libcst directory to mount."""

from __future__ import annotations

import pytest

from patcher.core.errors import Hint, LazylogError, LeaveOut, Pass, SingleFile, Variable, environment, missing
from patcher.core.exitcodes import ExitCode

PYTHON = Variable("--python", "TORCH_LAZYLOG_PYTHON", "/opt/py")
TORCH_DIR = Variable("--torch-dir", "TORCH_LAZYLOG_TORCH_DIR", "'/a b/torch'")
HINT = Hint(
    ("Nothing was written; ", Pass("--torch-dir", "its torch"), " (or ", LeaveOut("--torch-dir"), ")")
)
PYTHON_SUFFIX = " (TORCH_LAZYLOG_PYTHON=/opt/py in the environment; --python on a command line wins over it)"
TORCH_DIR_SUFFIX = (
    " (TORCH_LAZYLOG_TORCH_DIR='/a b/torch' in the environment; --torch-dir on a command line wins over it)"
)


@pytest.mark.parametrize(
    ("hint", "variables", "expected"),
    [
        pytest.param(None, (), "Expected X, found Y", id="no-hint"),
        pytest.param(
            HINT,
            (),
            "Expected X, found Y. Nothing was written; pass --torch-dir with its torch (or leave --torch-dir out).",
            id="options",
        ),
        pytest.param(
            HINT,
            (TORCH_DIR,),
            "Expected X, found Y. Nothing was written; set TORCH_LAZYLOG_TORCH_DIR to its torch "
            "(or unset TORCH_LAZYLOG_TORCH_DIR)" + TORCH_DIR_SUFFIX,
            id="variable",
        ),
        pytest.param(
            HINT,
            (PYTHON,),
            "Expected X, found Y. Nothing was written; pass --torch-dir with its torch (or leave --torch-dir out)"
            + PYTHON_SUFFIX,
            id="another-option's-variable",
        ),
        pytest.param(
            Hint((Pass("--python", "a Python"),)),
            (PYTHON, TORCH_DIR),
            "Expected X, found Y. Set TORCH_LAZYLOG_PYTHON to a Python" + PYTHON_SUFFIX + TORCH_DIR_SUFFIX,
            id="a-sentence-of-its-own",
        ),
        pytest.param(
            Hint((Pass("--python", "a Python"),), sentence=False),
            (),
            "Expected X, found Y; pass --python with a Python.",
            id="after-a-semicolon",
        ),
        pytest.param(None, (PYTHON,), "Expected X, found Y" + PYTHON_SUFFIX, id="variable-no-hint"),
    ],
)
def test_advice_about_an_option_is_chosen_when_rendered(
    hint: Hint | None, variables: tuple[Variable, ...], expected: str
) -> None:
    error = environment("Expected X, found Y", hint)
    assert error.text(variables=variables) == expected
    assert error.message == "Expected X, found Y"  # the parts stay apart: nothing is edited


def test_the_single_file_names_the_libcst_directory() -> None:
    error = missing("libcst", "read a graph.py")
    installed = error.text()
    assert installed.startswith("Expected libcst to read a graph.py, but it is not installed for this Python")
    single = error.text(SingleFile("3.12", "x86_64", "/mnt/libs", "TORCH_LAZYLOG_LIBS"))
    assert single.startswith(
        "Expected libcst to read a graph.py, but the single file found none for this Python"
    )
    assert (
        "(3.12 on x86_64) in /mnt/libs." in single
        and "--python-version 3.12 --platform manylinux2014_x86_64" in single
    )
    assert single.endswith("(or name it in TORCH_LAZYLOG_LIBS)")
    other = missing("click", "parse")
    assert (
        other.text(SingleFile("3.12", "x86_64", "/mnt/libs", "V")) == other.text()
    )  # only libcst is mounted
    assert LazylogError(ExitCode.REFUSED, "plain").text(SingleFile("3.12", "x", "/l", "V")) == "plain"
