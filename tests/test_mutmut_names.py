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

import pytest

from tests.docs import ROOT, mutated_modules

# Their outcome does not depend on the Python running pytest (see pyproject.toml's markers).
pytestmark = pytest.mark.runner_independent

MUTATED = [f"patcher/core/{name}.py" for name in mutated_modules()]
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


Named = tuple[str, "tuple[str, ...] | None", "tuple[str, ...] | None"]


def _named() -> dict[Named, str]:
    named: dict[Named, str] = _check().named(
        (ROOT / ".ci" / "mutmut-equivalent.txt").read_text(encoding="utf-8")
    )
    return named


def _matched(entry: Named, made: object) -> bool:
    return any(_check().matches(entry, change) for change in made)  # type: ignore[attr-defined]


def test_every_named_equivalent_is_a_mutant_mutmut_makes(tmp_path: Path) -> None:
    made = set(_made(_tree(tmp_path), MUTATED).values())
    missing = [entry for entry in _named() if not _matched(entry, made)]
    assert not missing, missing


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ('return data.decode("utf-8")', 'return data.decode("UTF-8")', "codec"),
        ('x = (a + "\\n").encode("ascii")', 'x = (a + "\\n").encode("ASCII")', "codec"),
        ('start = data.rfind(b"\\n", 0, at) + 1', 'start = data.rfind(b"\\n", None, at) + 1', "start"),
        ('return data.count(b"\\n", 0, end)', 'return data.count(b"\\n", None, end)', "start"),
        ('assert isinstance(c, int), "a count"', 'assert isinstance(c, int), "XXa countXX"', "message"),
        pytest.param(
            'return data.decode("utf-8")', 'return data.decode("XXutf-8XX")', None, id="not-a-codec"
        ),
        pytest.param('mode = "w"', 'mode = "W"', None, id="not-a-codec-name"),
        pytest.param('return data.decode("utf-8")', 'return data.encode("UTF-8")', None, id="codec-and-more"),
        pytest.param('i = data.find(b"x", 0)', 'i = data.find(b"x", 1)', None, id="another-start"),
        pytest.param('i = data.index(b"x", 0)', 'i = data.index(b"x", None)', None, id="not-find"),
        pytest.param('assert a, "m"', 'assert not a, "m"', None, id="the-assertion-itself"),
        pytest.param('assert a, "m"', "assert a, None", "message", id="the-message-dropped"),
    ],
)
def test_a_rule_excuses_only_its_kind_of_change(old: str, new: str, why: str | None) -> None:
    """The check's rules: a codec name in another case, None for a start of 0 in find/rfind/count, an
    assertion's message; nothing else, and never a change beside them."""
    found = _check().rule(("patcher.core.x.f", (old,), (new,)))
    assert (found is None) if why is None else (why in found), (old, new, found)
    assert _check().rule(("patcher.core.x.f", (old, "y = 1"), (new, "y = 2"))) is None


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
    named = [entry for entry in _named() if entry[0].startswith("patcher.core.record.")]
    assert named and all(_matched(entry, after.values()) for entry in named)
    exact = [entry for entry in named if None not in entry]
    renamed = [name for name, change in before.items() if change in exact and after.get(name) != change]
    assert any("x_rows__" in name for name in renamed), renamed
