"""The sha256 this tool names files by, and release version ordering."""

from __future__ import annotations

import hashlib
import re


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])
