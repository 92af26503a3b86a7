"""The equivalent mutants of .ci/mutmut-equivalent.txt are named so that an unrelated edit keeps them.

mutmut (pinned) makes the mutants of a copy of the tree here without running a test (seconds), and
.ci/mutmut_check.py reads each one's change the way the mutation step of .ci/run does.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.docs import ROOT

MUTATED = [
    f"patcher/core/{name}.py"
    for name in ("state", "classify", "plan", "record", "undo", "edits", "canonical", "transform")
]
_MAKE = """
import sys
from pathlib import Path
from mutmut.__main__ import create_mutants_for_file
for name in sys.argv[1:]:
    (Path("mutants") / name).parent.mkdir(parents=True, exist_ok=True)
    result = create_mutants_for_file(Path(name), Path("mutants") / name)
    if result.error:
        raise result.error
"""


def _check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutmut_check", ROOT / ".ci" / "mutmut_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "patcher", tree / "patcher", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree)
    return tree


def _made(tree: Path, files: list[str]) -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """mutmut's name of every mutant of these files -> its change, as the check reads it."""
    subprocess.run([sys.executable, "-c", _MAKE, *files], cwd=tree, check=True, capture_output=True)
    names = [
        name
        for file in files
        for name in json.loads((tree / "mutants" / f"{file}.meta").read_text())["exit_code_by_key"]
    ]
    changes: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = _check().changes(
        names, tree / "mutants"
    )
    return changes


def _named() -> dict[tuple[str, tuple[str, ...], tuple[str, ...]], str]:
    named: dict[tuple[str, tuple[str, ...], tuple[str, ...]], str] = _check().named(
        (ROOT / ".ci" / "mutmut-equivalent.txt").read_text(encoding="utf-8")
    )
    return named


def test_every_named_equivalent_is_a_mutant_mutmut_makes(tmp_path: Path) -> None:
    made = set(_made(_tree(tmp_path), MUTATED).values())
    missing = [change for change in _named() if change not in made]
    assert not missing, missing


def test_an_unrelated_edit_keeps_every_name(tmp_path: Path) -> None:
    """A new tiny function above record.py's code, and a new line at the top of rows(), whose mutants
    mutmut numbers before every other of rows()'s: each named change is still made (while mutmut's
    index names of rows()'s named mutants now name other changes)."""
    tree = _tree(tmp_path)
    record = tree / "patcher" / "core" / "record.py"
    before = _made(tree, ["patcher/core/record.py"])
    lines = record.read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(("def ", "class ")))
    lines[first:first] = ["def _unused() -> int:", "    return 1", "", ""]
    scan = next(i for i, line in enumerate(lines) if line.startswith("def rows("))
    lines.insert(scan + 1, '    assert path, "a path to look for"')
    record.write_text("\n".join(lines) + "\n", encoding="utf-8")
    after = _made(tree, ["patcher/core/record.py"])
    named = [change for change in _named() if change[0].startswith("patcher.core.record.")]
    assert named and all(change in after.values() for change in named)
    renamed = [name for name, change in before.items() if change in named and after.get(name) != change]
    assert any("x_rows__" in name for name in renamed), renamed
