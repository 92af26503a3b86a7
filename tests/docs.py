"""The documentation as the tests read it: README.md and every docs/*.md page.

A figure or block a test checks sits between `<!-- name -->` and `<!-- /name -->` in exactly one
page; `block(name)` finds it wherever the text moved to.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def block(name: str) -> str:
    """The text between the page's `<!-- name -->` marker and its `<!-- /name -->`."""
    found = []
    for page in pages():
        content = text(page)
        start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
        if start in content:
            assert content.count(start) == 1 and content.count(end) == 1, f"{page.name}: {name} twice"
            found.append(content[content.index(start) + len(start) : content.index(end)])
    assert len(found) == 1, f"marker {name!r} is in {len(found)} pages, not one"
    return found[0].removeprefix("\n")


def page_with(marker: str) -> Path:
    (page,) = [p for p in pages() if f"<!-- {marker} -->" in text(p)]
    return page


class Fenced(NamedTuple):
    page: Path
    info: str  # the fence's info string: "sh", "sh image", "dockerfile", ...
    body: str


_FENCE = re.compile(r"^( *)```([^\n`]*)\n(.*?)^\1```$", re.M | re.S)


def fenced() -> list[Fenced]:
    """Every fenced block of every page, its lines unindented (a block inside a list item is indented)."""
    blocks = []
    for page in pages():
        for match in _FENCE.finditer(text(page)):
            indent = len(match[1])
            body = "".join(line[indent:] for line in match[3].splitlines(keepends=True))
            blocks.append(Fenced(page, match[2].strip(), body))
    return blocks


def body(name: str) -> str:
    """The text of the one fenced block inside marker `name` (whatever its fence's info string)."""
    (match,) = _FENCE.finditer(block(name))
    return match[3]


def commands(name: str) -> list[str]:
    """The shell lines of the fenced block inside marker `name`, comments and blank lines dropped."""
    lines = [line.split("  #", 1)[0].strip() for line in body(name).splitlines()]
    return [line for line in lines if line]


def command(name: str, values: dict[str, str | list[str]], line: int = 0) -> list[str]:
    """One line of the block inside marker `name` as argv (shlex), each word that is a key of `values`
    replaced by its value (a list: by several words), and each `$PWD/...` word's key as a prefix.

    An image test runs the documented command this way, with its own image, paths and names."""
    import shlex

    argv: list[str] = []
    for word in shlex.split(commands(name)[line]):
        value = values.get(word)
        if value is None:
            for key, prefix in values.items():
                if key.startswith("$") and isinstance(prefix, str) and word.startswith(key):
                    value = prefix + word[len(key) :]
                    break
        if value is None:
            argv.append(word)
        elif isinstance(value, list):
            argv.extend(value)
        else:
            argv.append(value)
    return argv


def mutated_modules() -> list[str]:
    """The core modules mutmut mutates, as pyproject.toml's `only_mutate` lists them (read without
    tomllib, which Python 3.10 lacks)."""
    listed = re.search(r"^only_mutate = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    assert listed is not None, "pyproject.toml has no only_mutate"
    return re.findall(r'"patcher/core/(\w+)\.py"', listed[1])
