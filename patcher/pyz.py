"""Build the single file: `python3 -m patcher.pyz` (from a checkout) writes dist/torch-lazylog.pyz.

A zipapp of the tool's own modules, its patch definitions and click (pure Python, copied from the
build environment's installed click, with its license): any Python 3.10+ runs the whole command line
(`python torch-lazylog.pyz --help`) with nothing installed. libcst, whose parser is native code, cannot
load from a zip: a graph.py that is not a known release's bytes takes a libcst directory beside the
file (patcher.cli.zipmain), or the file says what to mount. Its `__main__` is patcher/cli/zipmain.py, which
an older Python can still run to say, in one sentence, that it is too old.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

NAME = "torch-lazylog.pyz"
# Run as a command (the tool image's /torch-lazylog, copied to /usr/local/bin): the python3 on PATH, with
# -B, so starting it writes no bytecode into the environment it patches (a .pth file's import would).
INTERPRETER = "/usr/bin/env -S python3 -B"
# The earliest time a zip member can carry: the members' time when SOURCE_DATE_EPOCH is unset.
ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z


def _stage(into: Path) -> None:
    """patcher/ (its .py files) and the patch definitions as patcher/patches/, as the wheel lays them."""
    package = Path(__file__).resolve().parent
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
        shutil.copyfile(Path(__file__).resolve().parent / "cli" / "zipmain.py", root / "__main__.py")
        _vendor("click", root)
        _archive(root, out)
    out.chmod(0o755)  # a command for every user
    return out


def _archive(root: Path, out: Path) -> None:
    """The zipapp of `root`, the same bytes for the same files: the shebang line, then the members in
    name order, each with one time (SOURCE_DATE_EPOCH's, as reproducible builds set it, or the
    earliest a zip holds) and one mode, whatever the checkout's clock, umask and directory order."""
    epoch = max(int(os.environ.get("SOURCE_DATE_EPOCH") or ZIP_EPOCH), ZIP_EPOCH)
    stamp = time.gmtime(epoch)[:6]
    with open(out, "wb") as file:
        file.write(f"#!{INTERPRETER}\n".encode())
        with zipfile.ZipFile(file, "w") as archive:
            for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
                name = path.relative_to(root).as_posix()
                if path.is_dir():  # as zipapp writes them: a directory entry for each
                    member = zipfile.ZipInfo(f"{name}/", date_time=stamp)
                    member.external_attr = (0o40755 << 16) | 0x10  # MS-DOS directory bit
                    archive.writestr(member, b"")
                else:
                    member = zipfile.ZipInfo(name, date_time=stamp)
                    member.compress_type = zipfile.ZIP_DEFLATED
                    member.external_attr = 0o100644 << 16
                    archive.writestr(member, path.read_bytes())


def _vendor(name: str, into: Path) -> None:
    """An installed pure-Python distribution's package and its dist-info's METADATA and license files
    (so `importlib.metadata` finds it inside the zip, and the license travels with the code)."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise SystemExit(
            f"Expected {name} to be installed for the Python that builds the single file ({sys.executable}): "
            f"it travels inside the file. Nothing was written; run `{sys.executable} -m pip install {name}`, "
            "or build with the tool's own environment (its python -m patcher.pyz)"
        ) from None
    files = [f for f in dist.files or () if "__pycache__" not in f.parts and not f.name.endswith(".pyc")]
    wanted = [
        f
        for f in files
        if f.parts[0] == name
        or (
            f.parts[0].endswith(".dist-info")
            and (f.name == "METADATA" or "licenses" in f.parts or f.name.startswith(("LICENSE", "COPYING")))
        )
    ]
    if not any(f.parts[0] == name for f in wanted):
        raise SystemExit(f"the build environment's {name} is not installed as files pyz can copy")
    if not any(f.parts[0].endswith(".dist-info") and "LICENSE" in f.name.upper() for f in wanted):
        raise SystemExit(f"the build environment's {name} has no license file to ship with it")
    for file in wanted:
        target = into / Path(*file.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(str(file.locate())), target)


USAGE = f"""usage: python3 -m patcher.pyz [OUT]

Build the single file at OUT (default: dist/{NAME}) from this checkout, with the
click of the Python that runs this command inside it."""


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(argv) > 1 or (argv and argv[0].startswith("-")):  # never a file named after an option
        print(
            f"{USAGE.splitlines()[0]}\npython3 -m patcher.pyz: error: expected at most one OUT path, got "
            f"{' '.join(argv)!r}; nothing was written",
            file=sys.stderr,
        )
        return 2
    out = Path(argv[0]) if argv else Path("dist") / NAME
    print(build(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
