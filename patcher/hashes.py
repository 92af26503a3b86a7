"""The sha256 this tool names files by, and release version ordering.

sha256 comes from CPython's own implementation (`_sha2`, `_sha256` before 3.12) when it has one,
and from hashlib otherwise: importing hashlib starts OpenSSL, which costs `verify` more than all the
hashing it does (a few hundred kB). The digests are the same.
"""

from __future__ import annotations

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


def sha256_digest(data: bytes) -> bytes:
    digest: bytes = _SHA256(data).digest()
    return digest


def sha256(data: bytes) -> str:
    text: str = _SHA256(data).hexdigest()
    return text


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])
