"""Where the docs list the code's own values (a vocabulary, the mutated modules, the exit codes, the
functions that decide), the list is derived here from the code and compared with the page's block."""

from __future__ import annotations

import importlib
import re
import typing

import pytest

from patcher.core import spec, state
from patcher.core.exitcodes import EXIT_CODE_HELP, ExitCode
from tests.docs import ROOT, block, mutated_modules, text

DEVELOPMENT = ROOT / "docs" / "development.md"
VOCABULARIES = {"Kind": spec.Kind, "Fit": state.Fit, "Action": state.Action}


@pytest.mark.parametrize("name", list(VOCABULARIES))
def test_the_developer_page_lists_each_vocabulary_as_the_code_has_it(name: str) -> None:
    assert block(name) == ", ".join(f"`{value}`" for value in typing.get_args(VOCABULARIES[name]))


def test_the_developer_page_counts_the_states() -> None:
    assert block("State") == str(len(typing.get_args(state.State)))


def test_the_decisions_the_page_names_are_the_mutated_modules() -> None:
    """ "The decisions" are what mutmut mutates: pyproject.toml's only_mutate, in its order."""
    assert block("mutated") == ", ".join(f"`{name}`" for name in mutated_modules())
    assert {"facts", "state", "plan"} <= set(mutated_modules())  # the state, its facts, what is written


def test_every_function_the_developer_page_names_is_in_the_code() -> None:
    """`core/facts._graph_kind` and the like: a renamed or moved function fails here, not in a reader."""
    named = re.findall(r"`(core|install|cli)/(\w+)\.(\w+)`", text(DEVELOPMENT))
    assert len(named) > 10, named
    missing = [
        f"{layer}/{module}.{name}"
        for layer, module, name in named
        if not hasattr(importlib.import_module(f"patcher.{layer}.{module}"), name)
    ]
    assert not missing, missing


def _codes(lines: list[str], pattern: str) -> set[int]:
    return {int(code) for line in lines if (m := re.match(pattern, line)) for code in m[1].split(", ")}


def test_the_exit_code_tables_have_every_named_code() -> None:
    """docs/commands.md's table and the --help text list each ExitCode, and nothing else."""
    page = text(ROOT / "docs" / "commands.md").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert _codes(page.splitlines(), r"\| (\d+(?:, \d+)*) \|") == {int(code) for code in ExitCode}
    assert _codes(EXIT_CODE_HELP.splitlines(), r"  (\d+(?:, \d+)*)  ") == {int(code) for code in ExitCode}
