"""The layers are held by import-linter (pyproject.toml's contracts, `lint-imports` in .ci/run).

Each case copies the tree, adds one import that crosses a rule, and runs the real `lint-imports` on
the copy: it must fail, naming the contract that was crossed; the unchanged copy passes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")
# import-linter 2.17 runs on Python 3.11+: .ci/run checks the layers under its default python3 (3.11),
# and the interpreters older than that run the rest of the suite.
pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="import-linter 2.17 needs Python 3.11 or newer"
)


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "patcher", tree / "patcher", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(tree))  # the copy, ahead of the installed checkout
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo"], cwd=tree, env=env, capture_output=True, text=True
    )


def _add(tree: Path, module: str, line: str) -> None:
    path = tree / (module.replace(".", "/") + ".py")
    text = path.read_text(encoding="utf-8")
    marker = "from __future__ import annotations\n"
    assert marker in text, path
    path.write_text(text.replace(marker, marker + line + "\n", 1), encoding="utf-8")


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    done = _lint(_copy(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    contracts = (ROOT / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert contracts >= 7 and f"{contracts} kept, 0 broken" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        pytest.param(
            "patcher.core.plan",
            "from patcher.install import fsio",
            "cli above diagnose and image above install above core",
            id="core-imports-install",
        ),
        pytest.param(
            "patcher.core.state",
            "import os",
            "the core touches no disk, process, clock or environment",
            id="core-imports-os",
        ),
        pytest.param(
            "patcher.core.undo",
            "def _later() -> None:\n    import subprocess  # noqa: F401",
            "the core touches no disk, process, clock or environment",
            id="core-imports-subprocess-lazily",
        ),
        pytest.param(
            "patcher.diagnose.judge",
            "from patcher.install import engine",
            "diagnose reads what verify reads and never imports what writes",
            id="diagnose-imports-the-writer",
        ),
        pytest.param(
            "patcher.image.tree",
            "from patcher.install import fsio",
            "image reads an image's bytes and never imports what writes",
            id="image-imports-the-writer",
        ),
        pytest.param(
            "patcher.install.locate",
            "from patcher.cli import commands",
            "cli above diagnose and image above install above core",
            id="install-imports-cli",
        ),
        pytest.param(
            "patcher.in_target.interp",
            "from patcher.core import errors",
            "target modules run by path in another interpreter",
            id="target-imports-the-package",
        ),
        pytest.param(
            "patcher.core.edits",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from patcher.core import plan",
            "no import cycle",
            id="cycle-under-type-checking",
        ),
    ],
)
def test_an_import_across_a_rule_fails_the_check(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    tree = _copy(tmp_path)
    _add(tree, module, line)
    done = _lint(tree)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Broken contracts" in done.stdout, done.stdout
    broken = " ".join(done.stdout.split("Broken contracts", 1)[1].split())  # its lines are wrapped
    assert contract in broken, done.stdout
    assert module in broken  # the report names the import that crossed it


_CYCLES = """
import grimp, json
graph = grimp.build_graph("patcher", include_external_packages=False)
print(json.dumps([
    [module, imported]
    for module in sorted(graph.modules)
    for imported in sorted(graph.find_modules_directly_imported_by(module))
    if graph.chain_exists(importer=imported, imported=module)
]))
"""


def _cycles(tree: Path) -> list[list[str]]:
    """Each direct import whose module imports the importer back, lazy and TYPE_CHECKING ones
    counted (grimp, which lint-imports reads the imports with)."""
    import json

    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, "-c", _CYCLES], cwd=tree, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    cycles: list[list[str]] = json.loads(done.stdout)
    return cycles


def test_no_module_imports_one_that_imports_it_back(tmp_path: Path) -> None:
    """The "no import cycle" contract compares siblings; a package's own __init__ importing its
    modules, one of which imports the package back, escapes it. So every import is checked."""
    tree = _copy(tmp_path)
    assert _cycles(tree) == []
    commands = tree / "patcher" / "cli" / "commands.py"  # run by patcher.cli.entry, as `main` is
    commands.write_text(commands.read_text() + "\n\ndef _back() -> None:\n    from patcher.cli import main\n")
    assert ["patcher.cli", "patcher.cli.entry"] in _cycles(tree)
