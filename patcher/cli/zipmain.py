"""The single file's `__main__`: what runs first in torch-lazylog.pyz, on whatever Python runs it.

It must parse and run on a Python older than the tool supports (Debian bullseye's 3.9, images on
torch 2.4 to 2.8 have it): no syntax and no import of 3.10 here, so such a Python gets one sentence and
exit 4 instead of a traceback from the first module that uses 3.10 (with --json, the one JSON shape
every command prints, null where nothing is known). On 3.10+ it puts the directory of libcst built
for this Python on the path when there is one (patcher.cli.singlefile), then hands over to the command
line (patcher.cli.entry: click's, or a sentence where click is missing).
"""

import json
import os
import sys

ENVIRONMENT = 4  # patcher.core.errors.ExitCode.ENVIRONMENT, which this module may not import


def too_old(version: str, executable: str, torch_dir: str, file: str) -> str:
    """`file`: the single file as it was run (the tool image's /torch-lazylog, or a .pyz)."""
    where = torch_dir or "DIR/torch"
    return (
        f"Expected Python 3.10 or newer to run {file}, but this is Python {version} "
        f"({executable or 'python'}); nothing was written: run the file with a Python 3.10 or newer over "
        f"this image's files instead (in a build stage or on the host, e.g. `python3.10 {file} "
        f"apply --torch-dir {where}`, which leaves this Python's bytecode to be rebuilt from the source)."
    )


def _torch_dir() -> str:
    """Where this Python's `import torch` would come from, without importing it."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return ""
    locations = list(spec.submodule_search_locations or []) if spec else []
    return str(locations[0]) if locations else ""


def _refuse_old() -> None:
    version = ".".join(str(part) for part in sys.version_info[:3])
    text = too_old(version, sys.executable, _torch_dir(), sys.argv[0] or "torch-lazylog.pyz")
    if "--json" in sys.argv[1:]:
        from patcher.cli.argv import command_word
        from patcher.core.fields import unread

        command = command_word(sys.argv[1:])
        report = unread(command, ENVIRONMENT, text)
        if command == "diagnose":
            report["processes"] = []  # its own field, after the shared ones, as patcher.cli.app adds it
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stderr.write(f"torch-lazylog: error: {text}\n")
    sys.exit(ENVIRONMENT)


def main() -> None:
    if sys.version_info < (3, 10):  # noqa: UP036 -- the one place that runs on an older Python
        _refuse_old()
    from patcher.cli.singlefile import libs_dir

    libs = libs_dir(sys.argv[0])
    if os.path.isdir(libs):
        sys.path.append(libs)  # last: the zip's own modules and the image's packages come first
    from patcher.cli.entry import main as cli

    cli()


if __name__ == "__main__":  # pragma: no cover -- runs as the zip's copy, __main__.py
    main()
