"""The advice only a reinstall of torch can follow: the pip or uv command line for the target's
interpreter, chosen by what installed torch and what is there to run (the command line renders a
"reinstall" next step with it)."""

from __future__ import annotations

from typing import NamedTuple


class Layout(NamedTuple):
    """What the reinstall advice must fit: the target's facts (from its probe) and the installers."""

    externally_managed: bool = False  # PEP 668: pip and uv refuse without --break-system-packages
    pip: bool = True  # the target interpreter can run `-m pip`
    uv: bool = False  # `uv` is on PATH


def reinstall(
    python: str | None, version: str | None, vendor: bool, installer: str | None, layout: Layout
) -> str:
    """The one reinstall advice: a command that resolves on the index and runs where it is aimed, by
    the tool that installed torch (its dist-info's INSTALLER) when it is there, or what to do instead."""
    if vendor or version is None:
        return (
            "reinstall torch from the index or image it came from (this build is not on the public "
            "package index)"
        )
    if python is None:
        return "reinstall torch in the environment that has it; add --python to get the command"
    managed = " --break-system-packages" if layout.externally_managed else ""
    uv = f"uv pip install --python {python}{managed} --reinstall --no-deps torch=={version}"
    pip = f"{python} -m pip install{managed} --force-reinstall --no-deps torch=={version}"
    if layout.uv and (installer == "uv" or not layout.pip):
        return uv
    if layout.pip:
        return pip
    by = f" ({installer})" if installer else ""
    return (
        f"reinstall torch=={version} for {python} with the tool that installed it{by}: that "
        "interpreter has no pip and no uv is on PATH, so no command run here can; install pip or uv "
        "first, or rebuild the environment"
    )
