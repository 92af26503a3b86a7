"""Build the single file: `python3 -m patcher.cli.pyz` (from a checkout) writes dist/torch-lazylog.pyz.

A zipapp of the tool's own modules and patch definitions, nothing else: any Python 3.10+ runs it as
it is (`python torch-lazylog.pyz verify`), with nothing installed. Plain apply, verify and revert
lines on known releases need neither click nor libcst; what does says so (exit 4).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import zipapp
from pathlib import Path

NAME = "torch-lazylog.pyz"


def _stage(into: Path) -> None:
    """patcher/ (its .py files) and the patch definitions as patcher/patches/, as the wheel lays them."""
    package = Path(__file__).resolve().parent.parent
    for source in sorted(package.rglob("*.py")):
        if "__pycache__" not in source.parts:
            target = into / "patcher" / source.relative_to(package)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    patches = package / "patches"
    if not patches.is_dir():  # a checkout: pyproject maps its top-level patches/ there
        patches = package.parent / "patches"
    for source in sorted([*patches.glob("*.json"), patches / "__init__.py"]):
        shutil.copyfile(source, into / "patcher" / "patches" / source.name)


def build(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as stage:
        root = Path(stage)
        (root / "patcher" / "patches").mkdir(parents=True)
        _stage(root)
        zipapp.create_archive(
            root, out, interpreter="/usr/bin/env python3", main="patcher.cli.entry:main", compressed=True
        )
    return out


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("dist") / NAME
    print(build(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
