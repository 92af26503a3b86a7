"""An image's final filesystem, as far as verify needs it: layers applied in order with their
whiteouts (`.wh.NAME` deletes NAME below, `.wh..wh..opq` empties its directory below), keeping only
the files the decision reads. Each layer is one tar stream, read once (tarfile's stream mode).

What is kept (`keeps`): graph.py whole, its pycs' 16-byte headers, torch/version.py, a torch
dist-info's RECORD, METADATA, INSTALLER and undo record, the undo record beside a torch without one,
pyvenv.cfg, EXTERNALLY-MANAGED, and which `python*` commands exist (symlinks as their targets).
Memory is those files, whatever the image's size.
"""

from __future__ import annotations

import posixpath
import re
import tarfile
from typing import IO, NamedTuple

from patcher.core.errors import LazylogError, environment

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
PYC_HEADER = 16

_WHOLE = re.compile(
    r"(?:^|/)(?:torch/_inductor/graph\.py|torch/version\.py|torch-[^/]+\.dist-info/"
    r"(?:RECORD|METADATA|INSTALLER|torch_lazylog\.json)|\.torch_lazylog\.json|pyvenv\.cfg|"
    r"lib/python3[^/]*/EXTERNALLY-MANAGED)$"
)
_PYC = re.compile(r"(?:^|/)torch/_inductor/(?:__pycache__/)?graph\.[^/]+\.pyc$")
_COMMAND = re.compile(r"(?:^|/)bin/python[0-9.]*$")


class Entry(NamedTuple):
    """A kept file: its bytes (a pyc's header alone; nothing for a command), or a symlink's target."""

    data: bytes
    mode: int
    uid: int
    gid: int
    mtime_ns: int
    link: str | None = None


def normal(name: str) -> str:
    """A member's path as the image's root sees it, without a leading `./` or `/`."""
    path = posixpath.normpath("/" + name).lstrip("/")
    return "" if path == "." else path


def keeps(path: str) -> int | None:
    """How many bytes of a regular file at `path` the decision needs (None: none, the file is not kept;
    -1: all of it)."""
    if _WHOLE.search(path):
        return -1
    if _PYC.search(path):
        return PYC_HEADER
    return 0 if _COMMAND.search(path) else None


def _link_kept(path: str) -> bool:
    """Symlinks that can decide where a command or a site directory is: `python*` and shallow ones
    (`lib64 -> lib`, `/usr/local/lib/python3 -> ...`)."""
    return posixpath.basename(path).startswith("python") or path.count("/") < 3


class Tree:
    """The kept files of the layers applied so far."""

    def __init__(self) -> None:
        self.files: dict[str, Entry] = {}

    def apply(self, layer: IO[bytes], what: str) -> None:
        """Apply one layer's tar stream (compressed or not): whiteouts delete from the layers below,
        then its own files replace theirs."""
        added: dict[str, Entry] = {}
        deleted: list[str] = []  # paths removed with everything under them
        emptied: list[str] = []  # directories whose lower contents are removed
        replaced: set[str] = set()  # non-directories over a kept file's directory
        ancestors = self._ancestors()
        try:
            with tarfile.open(fileobj=layer, mode="r|*") as tar:
                for member in tar:
                    path = normal(member.name)
                    base = posixpath.basename(path)
                    parent = posixpath.dirname(path)
                    if base == OPAQUE:
                        emptied.append(parent)
                    elif base.startswith(WHITEOUT):
                        deleted.append(posixpath.join(parent, base[len(WHITEOUT) :]))
                    elif member.isdir():
                        if path in self.files:  # a directory over a kept symlink
                            replaced.add(path)
                    else:
                        if path in ancestors:
                            replaced.add(path)
                        entry = self._entry(tar, member, path, added)
                        if entry is not None:
                            added[path] = entry
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise unreadable(what, exc) from exc
        for path in deleted + sorted(replaced):
            self._remove(path, itself=True)
        for directory in emptied:
            self._remove(directory, itself=False)
        self.files.update(added)

    def _ancestors(self) -> set[str]:
        found: set[str] = set()
        for path in self.files:
            while "/" in path:
                path = posixpath.dirname(path)
                found.add(path)
        return found

    def _entry(
        self, tar: tarfile.TarFile, member: tarfile.TarInfo, path: str, added: dict[str, Entry]
    ) -> Entry | None:
        stat = (member.mode & 0o7777, member.uid, member.gid, int(member.mtime * 1_000_000_000))
        if member.issym():
            return Entry(b"", *stat, link=member.linkname) if _link_kept(path) else None
        if member.islnk():  # a hard link to an earlier member of this layer: the same file
            target = normal(member.linkname)
            same = added.get(target) or self.files.get(target)
            return same._replace(mode=stat[0]) if same is not None and keeps(path) is not None else None
        size = keeps(path)
        if size is None or not member.isfile():
            return None
        handle = tar.extractfile(member)
        data = b"" if handle is None or size == 0 else handle.read() if size < 0 else handle.read(size)
        return Entry(data, *stat)

    def _remove(self, path: str, itself: bool) -> None:
        under = path + "/" if path else ""
        for name in [n for n in self.files if n.startswith(under) or (itself and n == path)]:
            del self.files[name]

    def resolve(self, path: str, depth: int = 0) -> str:
        """`path` (absolute, in the image) with the kept symlinks on its way followed, as the image's
        kernel would (a link missing from the kept ones is taken as a directory)."""
        parts = normal(path).split("/")
        done = ""
        for index, part in enumerate(parts):
            here = posixpath.join(done, part) if done else part
            entry = self.files.get(here)
            if entry is not None and entry.link is not None and depth < 40:
                target = entry.link if entry.link.startswith("/") else posixpath.join("/" + done, entry.link)
                rest = "/".join(parts[index + 1 :])
                return self.resolve(posixpath.join(target, rest) if rest else target, depth + 1)
            done = here
        return "/" + done

    def read(self, path: str) -> Entry | None:
        """The kept regular file at an absolute path in the image, through its symlinks."""
        entry = self.files.get(normal(self.resolve(path)))
        return entry if entry is not None and entry.link is None else None


def unreadable(what: str, exc: BaseException) -> LazylogError:
    """A layer whose bytes this reader cannot take (a compression it does not know, a cut stream)."""
    return environment(
        f"Could not read {what} as a tar stream (plain, gzip, bzip2 or xz): {exc}; nothing was written"
    )
