"""The advice only a reinstall of torch can follow: the pip or uv command line for the target's
interpreter, chosen by what installed torch and what is there to run (the command line renders a
"reinstall" next step with it)."""

from __future__ import annotations

from patcher.core.errors import Install


def reinstall(python: str | None, install: Install, uv: bool) -> str:
    """The one reinstall advice: a command that resolves on the index and runs where it is aimed, by
    the tool that installed torch (its dist-info's INSTALLER) when it is there, or what to do instead.
    `install`: the target's facts (from its probe); `uv`: whether `uv` is on PATH."""
    version = install.dist_version
    if install.vendor or version is None:
        return (
            "reinstall torch from the index or image it came from (this build is not on the public "
            "package index)"
        )
    if python is None:
        return "reinstall torch in the environment that has it; add --python to get the command"
    managed = " --break-system-packages" if install.managed else ""  # PEP 668: pip and uv refuse without it
    has_pip = install.pip is not False  # the target interpreter can run `-m pip` (None: not looked for)
    if uv and (install.installer == "uv" or not has_pip):
        return f"uv pip install --python {python}{managed} --reinstall --no-deps torch=={version}"
    if has_pip:
        return f"{python} -m pip install{managed} --force-reinstall --no-deps torch=={version}"
    by = f" ({install.installer})" if install.installer else ""
    return (
        f"reinstall torch=={version} for {python} with the tool that installed it{by}: that "
        "interpreter has no pip and no uv is on PATH, so no command run here can; install pip or uv "
        "first, or rebuild the environment"
    )
