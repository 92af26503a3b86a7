"""Rewrite an sdist (.tar.gz) so that its bytes depend on its files alone: members in name order,
each with SOURCE_DATE_EPOCH's time, owner 0:0 without names, mode 0o644 (0o755 for directories and
executables); the gzip header with the same time and no file name. setuptools' sdist leaves the
build's clock, the builder's user and its own gzip time in it."""

from __future__ import annotations

import gzip
import io
import os
import sys
import tarfile
from pathlib import Path


def normalize(path: Path, epoch: int) -> None:
    with tarfile.open(path, "r:gz") as source:
        members = sorted(source.getmembers(), key=lambda m: m.name)
        files = {m.name: source.extractfile(m).read() for m in members if m.isfile()}  # type: ignore[union-attr]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as target:
        for member in members:
            member.mtime, member.uid, member.gid, member.uname, member.gname = epoch, 0, 0, "", ""
            member.mode = 0o755 if member.isdir() or member.mode & 0o111 else 0o644
            member.pax_headers = {}
            data = files.get(member.name)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=epoch) as out:
        out.write(buffer.getvalue())


if __name__ == "__main__":
    normalize(Path(sys.argv[1]), int(os.environ["SOURCE_DATE_EPOCH"]))
