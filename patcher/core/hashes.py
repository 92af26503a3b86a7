"""The sha256 this tool names files by, and release version ordering."""

from __future__ import annotations

import hashlib
import re


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


_MASK = (1 << 64) - 1


def _rotl(x: int, bits: int) -> int:
    return ((x << bits) | (x >> (64 - bits))) & _MASK


def siphash(key: int, data: bytes, c: int, d: int) -> int:
    """SipHash-c-d of `data` with the key (key, 0), as CPython keys a hash-based pyc's source hash
    (PEP 552, `_Py_KeyedHash`): -1-3 from Python 3.11 on, -2-4 before. Only for a pyc written by a
    Python of the other kind than the one running (install.pyc.source_hash uses this Python's own)."""
    v = [key ^ 0x736F6D6570736575, 0x646F72616E646F6D, key ^ 0x6C7967656E657261, 0x7465646279746573]

    def rounds(count: int) -> None:
        for _ in range(count):
            v[0] = (v[0] + v[1]) & _MASK
            v[1], v[0] = _rotl(v[1], 13) ^ v[0], _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & _MASK
            v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _MASK
            v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _MASK
            v[1], v[2] = _rotl(v[1], 17) ^ v[2], _rotl(v[2], 32)

    whole = len(data) - len(data) % 8
    last = int.from_bytes(data[whole:], "little") | ((len(data) & 0xFF) << 56)
    for word in [*(int.from_bytes(data[i : i + 8], "little") for i in range(0, whole, 8)), last]:
        v[3] ^= word
        rounds(c)
        v[0] ^= word
    v[2] ^= 0xFF
    rounds(d)
    return v[0] ^ v[1] ^ v[2] ^ v[3]
