"""Find the torch to patch, without importing it, and the interpreter that will load it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from patcher.core.errors import Hint, LazylogError, LeaveOut, Pass, environment
from patcher.core.installed import Found, Interpreter, Target, metadata_version, torch_version
from patcher.core.spec import PatchSpec
from patcher.install import interpreter

# <prefix>/lib/pythonX.Y/site-packages (venvs, conda envs, base installs), lib64 (Fedora's platlib),
# <prefix>/lib/pythonX.Y/dist-packages (Debian's /usr/local); pythonX.Yt is a free-threaded build.
_SITE_PACKAGES = Pass("--torch-dir", "the `torch` directory inside site-packages")

_SITE_DIR = re.compile(
    r"^(?P<prefix>/.*)/lib(?:64)?/python(?P<version>3\.\d+t?)/(?P<kind>site|dist)-packages$"
)


def read_torch_version(torch_dir: Path, distribution: str | None) -> str | None:
    """torch/version.py's `__version__ = '...'` (or `__version__: str = "..."`); only when it says
    nothing, the distribution's version (`dist_version`, read once)."""
    try:
        text: str | None = (torch_dir / "version.py").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None
    return torch_version(text, distribution)


def dist_version(dist_info: Path | None) -> str | None:
    """The distribution's own version (its METADATA), which an index resolves."""
    if dist_info is None:
        return None
    try:
        return metadata_version((dist_info / "METADATA").read_bytes())
    except OSError:
        return None


def find_dist_info(torch_dir: Path, spec: PatchSpec) -> Path | None:
    from patcher.core.record import rows

    candidates = sorted(p for p in torch_dir.parent.glob("torch-*.dist-info") if p.is_dir())
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    listing = [p for p in candidates if rows(_read_or_empty(p), spec.graph_row, str(torch_dir.parent))]
    if len(listing) == 1:
        return listing[0]
    names = ", ".join(p.name for p in candidates)
    raise environment(
        f"Expected one torch dist-info beside {torch_dir}, found {len(candidates)} ({names}). "
        "Remove the stale ones (a broken uninstall leaves them) or reinstall torch."
    )


def _read_or_empty(dist_info: Path) -> bytes:
    try:
        return (dist_info / "RECORD").read_bytes()
    except OSError:
        return b""


def owner_candidates(site: str) -> list[str]:
    """Interpreters that may own the site directory `site`, from where it lives; probing decides."""
    if site == "/usr/lib/python3/dist-packages":  # Debian's system Python
        return ["/usr/bin/python3"]
    match = _SITE_DIR.match(site)
    if match is None:
        return []
    prefix, version = match["prefix"], match["version"]
    if match["kind"] == "dist" and prefix in ("/usr", "/usr/local"):  # Debian's, and what pip adds to it
        return [f"/usr/bin/python{version}", "/usr/bin/python3"]
    return [f"{prefix}/bin/python", f"{prefix}/bin/python3", f"{prefix}/bin/python{version}"]


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _owner_of(directory: Path) -> tuple[Interpreter, Found] | None:
    """The interpreter that has `directory`'s site directory on its sys.path, if one lives beside it."""
    site = str(directory.parent)
    tried: set[tuple[str, str]] = set()
    for candidate in owner_candidates(site):
        key = (os.path.dirname(candidate), os.path.realpath(candidate))
        if key in tried or not os.path.isfile(candidate) or not os.access(candidate, os.X_OK):
            continue
        tried.add(key)
        try:
            probed, found = interpreter.probe(candidate, find_torch=True)
        except LazylogError:  # timid: a broken interpreter beside it owns nothing we can check
            continue
        if any(_same(entry, site) for entry in probed.path):
            return probed, found
    return None


def _imports_it(probed: Interpreter, found: Found, directory: Path, derived: bool) -> None:
    """A --torch-dir the interpreter does not import is never what the server runs: say so."""
    if found.torch_dir is not None and _same(found.torch_dir, str(directory)):
        return
    how = "the interpreter that owns it" if derived else "the interpreter given"
    loads = (
        f"loads {found.torch_dir} (sys.path entry {found.path_entry or 'none: a meta path finder'})"
        if found.torch_dir
        else f"finds no torch{f' ({found.error})' if found.error else ''}"
    )
    raise environment(
        f"Expected `import torch` in {probed.executable} ({how}) to load the torch directory given, "
        f"{directory}, but it {loads}: that is not the torch the server would run",
        Hint(
            (
                "Nothing was written; ",
                Pass("--torch-dir", "the torch that interpreter imports"),
                " (or ",
                LeaveOut("--torch-dir"),
                "), or ",
                Pass("--python", "the interpreter that imports this one"),
            )
        ),
    )


def _for_torch_dir(python: str | None, directory: Path) -> tuple[Interpreter, Found]:
    """The interpreter for a given torch directory, checked to import it; no owner for a bare tree."""
    owned = interpreter.probe(python, find_torch=True) if python is not None else _owner_of(directory)
    if owned is None:  # a tree no interpreter beside it owns: the bytes are all there is to check
        probed, _ = interpreter.probe(None, find_torch=False)
        return probed, Found(None, None, None)
    probed, found = owned
    _imports_it(probed, found, directory, derived=python is None)
    return probed, found


def _file_type(path: Path) -> str:
    """What a path that is not a regular file is, through links: a FIFO, a device, a directory..."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return "a broken link" if path.is_symlink() else f"nothing readable ({exc.strerror})"
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    what = next((name for test, name in kinds if test(mode)), "not a regular file")
    return f"a link to {what} ({os.path.realpath(path)})" if path.is_symlink() else what


def _check_tree(directory: Path, spec: PatchSpec) -> Path:
    graph = directory / spec.file
    if graph.is_file():
        return graph
    if graph.exists() or graph.is_symlink():  # something else, in a directory
        raise environment(
            f"Expected {spec.file} in {directory} to be a regular file, found {_file_type(graph)} at {graph}",
            Hint(("Nothing was read or written: reinstall torch to restore graph.py, or ", _SITE_PACKAGES)),
        )
    found_text = (
        f"{directory} without it"
        if directory.is_dir()
        else f"no directory at {directory}"
        if not directory.exists()
        else f"{directory}, which is not a directory"
    )
    raise environment(
        f"Expected a torch package directory containing {spec.file}, found {found_text}",
        Hint((_SITE_PACKAGES,)),
    )


def locate(python: str | None, torch_dir: str | None, spec: PatchSpec) -> Target:
    if torch_dir is None:
        probed, found = interpreter.probe(python, find_torch=True)
        if found.torch_dir is None:  # only without --torch-dir: named as an option, never as its variable
            why = f" ({found.error})" if found.error else ""
            raise environment(
                f"Expected `import torch` to find torch for {probed.executable} "
                f"(Python {probed.version}), but it found none{why}",
                Hint(
                    (
                        "Install torch there, or ",
                        Pass("--python", "the interpreter that has it"),
                        " (or --torch-dir with its torch directory)",
                    )
                ),
            )
        directory = Path(os.path.abspath(found.torch_dir))
        graph = _check_tree(directory, spec)
    else:
        directory = Path(os.path.abspath(torch_dir))
        graph = _check_tree(directory, spec)
        probed, found = _for_torch_dir(python, directory)
    dist_info = find_dist_info(directory, spec)
    distribution = dist_version(dist_info)
    return Target(
        interpreter=probed,
        torch_dir=directory,
        graph_py=graph,
        dist_info=dist_info,
        torch_version=read_torch_version(directory, distribution),
        dist_version=distribution,
        owner=probed.executable if found.torch_dir else None,  # None: a tree no interpreter owns
        torch_path_entry=found.path_entry,
    )
