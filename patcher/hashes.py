"""Hashes as this tool and pip's RECORD write them, and release version ordering."""

from __future__ import annotations

import base64
import hashlib
import re


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(data: bytes) -> str:
    """The hash field of a RECORD row: `sha256=<urlsafe base64, no padding>`."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])
