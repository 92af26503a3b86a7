"""The patch definitions shipped with the tool (patches/*.json), read from wherever the package is."""

from __future__ import annotations

from pathlib import Path

from patcher.core.spec import PATCH_NAME, PatchSpec, parse


def text(name: str) -> str:
    """A file of patches/ (a patch definition, diagnose's findings and knowledge tables), wherever the
    package is: installed (pyproject maps the checkout's top-level patches/ to patcher/patches/), a
    checkout, or packed in a zip (the single-file build). Plain
    files are read directly (importlib.resources costs verify more than its own work); anything
    else through importlib.resources."""
    from importlib import import_module

    try:
        package = import_module("patcher.patches")
    except ModuleNotFoundError:  # a checkout run as it is (`PYTHONPATH=checkout python -m patcher`)
        return (Path(__file__).resolve().parents[2] / "patches" / name).read_text(encoding="utf-8")
    where = Path(package.__file__ or "").parent
    if where.is_dir():
        return where.joinpath(name).read_text(encoding="utf-8")
    from importlib.resources import files  # a zip, or a loader with no directory

    return files(package).joinpath(name).read_text(encoding="utf-8")


def load() -> PatchSpec:
    return parse(PATCH_NAME, text)
