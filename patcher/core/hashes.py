"""The sha256 this tool names files by, and release version ordering.

sha256 comes from CPython's own implementation (`_sha2`, `_sha256` before 3.12) when it has one,
and from hashlib otherwise: importing hashlib starts OpenSSL, which costs `verify` more than all the
hashing it does (a few hundred kB). The digests are the same.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any


def _builtin_sha256() -> Callable[[bytes], Any]:
    try:
        from _sha2 import sha256 as builtin  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        try:
            from _sha256 import sha256 as builtin  # type: ignore[import-not-found, no-redef, unused-ignore]
        except ImportError:  # pragma: no cover - a Python built without its own sha256
            from hashlib import sha256 as builtin
    constructor: Callable[[bytes], Any] = builtin
    return constructor


_SHA256 = _builtin_sha256()


@functools.lru_cache(maxsize=16)
def sha256_digest(data: bytes) -> bytes:
    """Each file's bytes are hashed once per command, however many facts ask (bytes cache their
    own hash, so the lookup is cheap after the first)."""
    digest: bytes = _SHA256(data).digest()
    return digest


def sha256(data: bytes) -> str:
    return sha256_digest(data).hex()


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])
