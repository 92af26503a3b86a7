"""From an image's kept files to verify's answer: where its `python3` (or --python) imports torch
from, as that interpreter's sys.path would start, every other torch install in the image, and each
read into the snapshot verify decides from (patcher.install.reading.verify_snapshot). Reads only.
"""

from __future__ import annotations

import configparser
import posixpath
import re
from pathlib import Path
from typing import Any, NamedTuple

from patcher.core import record
from patcher.core.errors import LazylogError, environment
from patcher.core.hashes import sha256
from patcher.core.installed import (
    FileStat,
    Interpreter,
    Mode,
    Pyc,
    Snapshot,
    Target,
    metadata_version,
    torch_version,
)
from patcher.core.report import JsonValue, Report
from patcher.core.spec import PatchSpec
from patcher.core.undo import UndoRecord
from patcher.image.tree import Entry, Tree
from patcher.install import pyc, reading

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GRAPH = "torch/_inductor/graph.py"
_MINOR = re.compile(r"python(3\.[0-9]+)t?")
_PYC_NAME = re.compile(r"graph\.([^.]+)(?:\.opt-([0-9]+))?\.pyc")
_MODES: dict[int, Mode] = {0: "timestamp", 1: "unchecked-hash", 3: "checked-hash"}  # PEP 552's flags


class Python(NamedTuple):
    """The image's interpreter as verify in a container would probe it, from its files alone."""

    executable: str
    minor: str  # 3.X
    path: tuple[str, ...]  # its sys.path's site directories (PYTHONPATH's first), in order
    pycache_prefix: str | None
    externally_managed: bool


def environ(config: dict[str, Any]) -> dict[str, str]:
    """The image's environment (its config's Env)."""
    pairs = (config.get("config") or {}).get("Env") or []
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def _home(config: dict[str, Any], env: dict[str, str]) -> str:
    user = ((config.get("config") or {}).get("User") or "").split(":")[0]
    return env.get("HOME") or ("/root" if user in ("", "0", "root") else f"/home/{user}")


def _command(tree: Tree, name: str, env: dict[str, str]) -> str | None:
    """`name` as the image's shell finds it on its PATH (a kept command or link)."""
    if name.startswith("/"):
        return (
            name if tree.resolve(name).lstrip("/") in tree.files or name.lstrip("/") in tree.files else None
        )
    for directory in (env.get("PATH") or DEFAULT_PATH).split(":"):
        candidate = posixpath.join(directory or "/", name)
        if tree.resolve(candidate).lstrip("/") in tree.files:
            return candidate
    return None


def _venv(tree: Tree, executable: str) -> configparser.SectionProxy | None:
    for place in (posixpath.dirname(posixpath.dirname(executable)), posixpath.dirname(executable)):
        entry = tree.read(posixpath.join(place, "pyvenv.cfg"))
        if entry is not None:
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string("[venv]\n" + entry.data.decode("utf-8", "replace"))
            return parser["venv"]
    return None


def python(tree: Tree, config: dict[str, Any], given: str | None) -> Python:
    env = environ(config)
    executable = _command(tree, given or "python3", env)
    if executable is None:
        where = given or f"python3 on the image's PATH ({env.get('PATH') or DEFAULT_PATH})"
        raise environment(f"Expected {where} in the image, found none")
    real = tree.resolve(executable)
    venv = _venv(tree, executable)
    found = _MINOR.search(posixpath.basename(real))
    minor = found[1] if found else None
    if minor is None and venv is not None:
        version = venv.get("version_info") or venv.get("version") or ""
        minor = ".".join(version.split(".")[:2]) or None
    if minor is None:
        raise environment(f"Could not tell which Python {executable} in the image is ({real})")
    user = posixpath.join(_home(config, env), f".local/lib/python{minor}/site-packages")
    prefix = posixpath.dirname(posixpath.dirname(real))
    system = [f"{prefix}/lib/python{minor}/site-packages"]
    if prefix in ("/usr", "/usr/local"):  # Debian's and Ubuntu's site.py
        system = [
            f"/usr/local/lib/python{minor}/dist-packages",
            "/usr/lib/python3/dist-packages",
            f"/usr/lib/python{minor}/dist-packages",
            *system,
        ]
    if venv is not None:
        own = [
            posixpath.join(
                posixpath.dirname(posixpath.dirname(executable)), f"lib/python{minor}/site-packages"
            )
        ]
        shared = venv.get("include-system-site-packages", "false").strip().lower() == "true"
        sites = own + ([user, *system] if shared else [])
    else:
        sites = [user, *system]
    pythonpath = [p for p in env.get("PYTHONPATH", "").split(":") if p]
    managed = venv is None and tree.read(f"/usr/lib/python{minor}/EXTERNALLY-MANAGED") is not None
    return Python(
        executable, minor, tuple(pythonpath + sites), env.get("PYTHONPYCACHEPREFIX") or None, managed
    )


def sites(tree: Tree) -> list[str]:
    """Every site directory in the image holding a torch (a cache's copy is no install)."""
    found = {
        "/" + p[: -len(GRAPH) - 1]
        for p, e in tree.files.items()
        if p.endswith("/" + GRAPH) and e.link is None
    }
    return sorted(s for s in found if posixpath.basename(s) in ("site-packages", "dist-packages"))


def _stat(entry: Entry) -> FileStat:
    return FileStat(entry.mode, entry.uid, entry.gid, entry.mtime_ns)


def _dist_info(tree: Tree, site: str, spec: PatchSpec) -> str | None:
    """The torch dist-info beside the torch directory, as patcher.install.locate picks it."""
    under = site.lstrip("/") + "/"
    names = {
        p[len(under) :].split("/")[0]
        for p in tree.files
        if p.startswith(under + "torch-") and ".dist-info/" in p[len(under) :]
    }
    candidates = sorted(f"{site}/{n}" for n in names if n.endswith(".dist-info"))
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    listing = [c for c in candidates if record.rows(_data(tree, c + "/RECORD"), spec.graph_row, site)]
    if len(listing) == 1:
        return listing[0]
    raise environment(
        f"Expected one torch dist-info beside {site}/torch in the image, found {len(candidates)} "
        f"({', '.join(posixpath.basename(c) for c in candidates)})"
    )


def _data(tree: Tree, path: str) -> bytes:
    entry = tree.read(path)
    return entry.data if entry is not None else b""


def _pycs(tree: Tree, graph: str, prefix: str | None) -> list[Pyc]:
    """graph.py's pycs in its __pycache__ (and the prefix tree), as patcher.install.pyc finds them."""
    directory = posixpath.dirname(graph)
    dirs = [posixpath.join(directory, "__pycache__")] + ([prefix.rstrip("/") + directory] if prefix else [])
    found: list[Pyc] = []
    for place in dirs:
        under = place.lstrip("/") + "/"
        for name in sorted(p[len(under) :] for p in tree.files if p.startswith(under)):
            named = _PYC_NAME.fullmatch(name)
            entry = tree.files[under + name]
            if named is None or entry.link is not None:
                continue
            header = entry.data
            flags = int.from_bytes(header[4:8], "little") if len(header) == 16 else -1
            mode = _MODES.get(flags, "invalid")
            found.append(
                Pyc(
                    Path(f"{place}/{name}"),
                    named[1],
                    int(named[2] or 0),
                    mode,
                    header,
                    entry.mode,
                    entry.uid,
                    entry.gid,
                )
            )
    return found


def target_of(tree: Tree, site: str, spec: PatchSpec, interpreter: Interpreter, owner: str | None) -> Target:
    dist_info = _dist_info(tree, site, spec)
    metadata = tree.read(f"{dist_info}/METADATA") if dist_info else None
    dist_version = metadata_version(metadata.data) if metadata else None
    version_py = tree.read(f"{site}/torch/version.py")
    declared = version_py.data.decode("utf-8", "replace") if version_py else None
    return Target(
        interpreter=interpreter,
        torch_dir=Path(f"{site}/torch"),
        graph_py=Path(f"{site}/{GRAPH}"),
        dist_info=Path(dist_info) if dist_info else None,
        torch_version=torch_version(declared, dist_version),
        dist_version=dist_version,
        owner=owner,
        torch_path_entry=site if owner else None,
    )


def snapshot(tree: Tree, target: Target, spec: PatchSpec) -> Snapshot:
    graph = tree.read(str(target.graph_py))
    assert graph is not None  # sites() found it
    record_file = tree.read(str(target.record_file)) if target.record_file else None
    if record_file is not None:
        record.check(record_file.data)
    undo_file = tree.read(str(target.undo_path))
    undo = None
    if undo_file is not None:
        row = f"{target.dist_info.name}/RECORD" if target.dist_info and record_file else None
        try:
            undo = UndoRecord.parse(undo_file.data, spec.id, spec.graph_row, row)
        except ValueError:  # proves nothing: decided from the bytes, as on a disk
            undo = None
    pycs = _pycs(tree, str(target.graph_py), target.interpreter.pycache_prefix)
    own = target.interpreter.cache_tag
    magics = {p.header[:4] for p in pycs if p.tag == own and p.mode in ("checked-hash", "unchecked-hash")}
    return Snapshot(
        graph=graph.data,
        sha256=sha256(graph.data),
        graph_stat=_stat(graph),
        record=record_file.data if record_file else None,
        record_stat=_stat(record_file) if record_file else None,
        undo=undo,
        undo_raw=undo_file.data if undo_file else None,
        pycs=tuple(pycs),
        own_tag=own,
        source_hashes={m: pyc.source_hash(m, graph.data) for m in magics},
        leftovers=(),
        record_base=str(target.dist_info.parent) if target.dist_info else "",
    )


def _interpreter(executable: str, minor: str, found: Python | None) -> Interpreter:
    tag = "cpython-" + minor.replace(".", "")
    if found is None:
        return Interpreter(executable, minor, tag, None)
    return Interpreter(executable, minor, tag, found.pycache_prefix, found.path, found.externally_managed)


def verify(
    tree: Tree, config: dict[str, Any], spec: PatchSpec, given: str | None, installs: list[JsonValue]
) -> Report:
    """verify's report for the torch the image's python imports; `installs` gets each torch install
    in the image with its state (filled in before an error about the imported one)."""
    interp = python(tree, config, given)
    chosen = next((s for s in interp.path if tree.read(f"{s}/{GRAPH}") is not None), None)
    for site in sites(tree):
        minor = _MINOR.search(site)
        interpreter = _interpreter("", minor[1] if minor else interp.minor, None)
        entry: dict[str, JsonValue] = {"torch_dir": f"{site}/torch", "imported": site == chosen}
        try:
            target = target_of(tree, site, spec, interpreter, None)
            shown = reading.verify_snapshot(target, spec, snapshot(tree, target, spec))
            entry |= {"state": shown.state, "exit_code": int(shown.code)}
        except LazylogError as exc:  # one install's error is its entry, not the image's
            entry |= {"state": exc.state, "exit_code": int(exc.code)}
        installs.append(entry)
    if chosen is None:
        raise environment(
            f"Expected `import torch` in the image's {interp.executable} (Python {interp.minor}) to find "
            f"torch, but none of its site directories has one ({', '.join(interp.path)})"
        )
    interpreter = _interpreter(interp.executable, interp.minor, interp)
    target = target_of(tree, chosen, spec, interpreter, interp.executable)
    return reading.verify_snapshot(target, spec, snapshot(tree, target, spec))
