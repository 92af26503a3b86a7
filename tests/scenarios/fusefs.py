"""A FUSE file system of one file, `held`, served by this process (fusepy): a test stops this
process (SIGSTOP) to make every later stat of a file on the mount wait forever, as on a FUSE or NFS
mount whose daemon or server has stopped. Usage: fusefs.py MOUNTPOINT (as root: no fusermount)."""

import errno
import stat
import sys

from fuse import FUSE, FuseOSError, Operations  # type: ignore[import-untyped]

TEXT = b"held open\n"


class One(Operations):  # type: ignore[misc]
    def getattr(self, path: str, fh: object = None) -> dict[str, int]:
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path == "/held":
            return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1, "st_size": len(TEXT)}
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path: str, fh: object) -> list[str]:
        return [".", "..", "held"]

    def read(self, path: str, size: int, offset: int, fh: object) -> bytes:
        return TEXT[offset : offset + size]


if __name__ == "__main__":
    # attr_timeout=0: every stat asks this process, so a stopped daemon blocks the first one
    FUSE(One(), sys.argv[1], foreground=True, nothreads=True, attr_timeout=0, entry_timeout=0)
