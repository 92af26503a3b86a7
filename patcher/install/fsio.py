"""The one place that writes files: staged temp files, fsync, os.replace (the lock, and the temp
files' names: install.lock).

Every new file is first written whole beside its destination (same directory, so os.replace is
atomic and a hardlinked original keeps its bytes), flushed, given the original's mode and owner,
and only then moved over it. Temp files carry a fixed suffix so the next run finds and removes any
that a killed run left behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
from pathlib import Path

from patcher.core.errors import LazylogError, environment
from patcher.core.hashes import sha256
from patcher.core.steps import ABSENT, ANY, Step, Write
from patcher.install.lock import temp_path


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stage(step: Write) -> Path:
    temp = temp_path(step.path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)  # never open an old name: it could be a link to something else
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(step.data)
        while view:
            view = view[os.write(fd, view) :]
        if (step.uid, step.gid) != (os.geteuid(), os.getegid()):
            os.fchown(fd, step.uid, step.gid)
        os.fchmod(fd, step.mode)
        if step.mtime_ns is not None:
            os.utime(fd, ns=(step.mtime_ns, step.mtime_ns))
        os.fsync(fd)
    finally:
        os.close(fd)
    return temp


def discard(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _staging_cause(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ENOSPC:
        return f"no space left on the device holding {path.parent}; free some and run the same command again"
    if exc.errno == errno.EROFS:
        return f"{path.parent} is on a read-only filesystem"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied in {path.parent}; run torch-lazylog as the owner of the torch install"
    return f"{exc.strerror or exc} ({path})"


def unchanged(step: Step) -> None:
    """Stop before overwriting a file that changed since it was read (a concurrent pip install)."""
    if step.was == ANY:
        return
    try:
        now = sha256(step.path.read_bytes())
    except FileNotFoundError:
        now = ABSENT
    if now != step.was:
        raise environment(
            f"Expected {step.path} to be as it was when torch-lazylog read it, but it changed meanwhile "
            "(another install or tool is writing torch). Run the same command again once it has finished"
        )


def write_all(steps: list[Step], what: str) -> None:
    """Stage every write, check every destination, then commit all in order, signals held."""
    temps = [temp_path(s.path) for s in steps if isinstance(s, Write)]  # what staging may leave
    staged: list[tuple[Step, Path | None]] = []
    try:
        for step in steps:
            staged.append((step, _stage(step) if isinstance(step, Write) else None))
    except BaseException as exc:  # an OSError, or a signal's exception: no temp file stays behind
        discard(temps)
        if not isinstance(exc, OSError):
            raise
        failed = step.path
        raise environment(
            f"Could not write {failed.name}: {_staging_cause(exc, failed)}. Nothing was changed"
        ) from exc
    try:
        for step in steps:
            unchanged(step)
    except BaseException:
        discard(temps)
        raise
    _commit(staged, what)


def _commit(staged: list[tuple[Step, Path | None]], what: str) -> None:
    """SIGINT and SIGTERM wait while files are moved into place: the set of moves is all or none."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        for step, temp in staged:
            unchanged(step)
            if temp is not None:
                os.replace(temp, step.path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(step.path)
            _fsync_dir(step.path.parent)
    except (OSError, LazylogError) as exc:
        discard([t for _, t in staged if t])  # those moved into place are gone already
        if isinstance(exc, LazylogError):
            raise
        raise environment(
            f"{what} stopped half-way: {exc.strerror or exc} ({step.path}). The next torch-lazylog command "
            "recognises this state: run the same command again to finish it"
        ) from exc
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def require_writable(paths: tuple[Path, ...], links: tuple[Path, ...]) -> None:
    """Refuse links and read-only files before writing; root ignores mode bits, this tool does not."""
    for path in links:
        if path.is_symlink():
            raise environment(
                f"Expected {path} to be a real file or directory, found a symbolic link to {os.readlink(path)}. "
                "Writing through it would change a shared store (and every environment linked to it); "
                "copy the package into place (e.g. uv's --link-mode=copy) and run again."
            )
    for path in paths:
        why = unwritable(path)
        if why:
            raise environment(f"Expected to be able to write {path}, but {why}. Nothing was changed.")


def _user(uid: int) -> str:
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def unwritable(path: Path) -> str | None:
    """Why this process cannot (or, by the file's own mode, should not) write `path`, or None."""
    st = os.stat(path)
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        return (
            "it is on a read-only filesystem; run torch-lazylog where that filesystem is writable "
            "(in a Dockerfile: a RUN step of the image build; at container start: a container whose root "
            "filesystem is not read-only)"
        )
    if not st.st_mode & 0o200:  # root could write it anyway: an image that made torch read-only meant it
        return (
            f"it is read-only (mode {oct(st.st_mode & 0o7777)}, no write bit for its owner); give it "
            "back (chmod u+w) or patch before the step that made it read-only"
        )
    if not os.access(path, os.W_OK):
        if st.st_uid != os.geteuid():
            return (
                f"it belongs to {_user(st.st_uid)} and torch-lazylog runs as {_user(os.geteuid())}; "
                f"run it as {_user(st.st_uid).split(' ')[0]} (in a Dockerfile: before a USER line)"
            )
        return "this user has no write permission there (an ACL or a security module)"
    return None
