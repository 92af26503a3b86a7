"""A byte edit and its inverse: apply and revert are the same operation on swapped data."""

from __future__ import annotations

from typing import NamedTuple

from patcher.core.report import JsonValue

# surrogateescape keeps any byte (non-UTF-8 included) round-trippable through JSON.
_ANY_BYTE = ("utf-8", "surrogateescape")


class Edit(NamedTuple):
    offset: int
    old: bytes
    new: bytes

    def inverted(self) -> Edit:
        return Edit(self.offset, self.new, self.old)

    def applies_to(self, data: bytes) -> bool:
        return data[self.offset : self.offset + len(self.old)] == self.old

    def apply(self, data: bytes) -> bytes:
        if not self.applies_to(data):
            raise ValueError(f"edit at byte {self.offset} does not match the data")
        return data[: self.offset] + self.new + data[self.offset + len(self.old) :]

    def line_number(self, data: bytes) -> int:
        return data.count(b"\n", 0, self.offset) + 1

    def to_json(self) -> dict[str, JsonValue]:
        return {"new": self.new.decode(*_ANY_BYTE), "offset": self.offset, "old": self.old.decode(*_ANY_BYTE)}

    @classmethod
    def from_json(cls, data: object) -> Edit:
        if not isinstance(data, dict):
            raise ValueError("edit is not an object")
        offset, old, new = data.get("offset"), data.get("old"), data.get("new")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError("edit offset is not a non-negative integer")
        if not isinstance(old, str) or not isinstance(new, str):
            raise ValueError("edit old/new are not strings")
        return cls(offset, old.encode(*_ANY_BYTE), new.encode(*_ANY_BYTE))


def _common_prefix(a: bytes, b: bytes) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # binary search over memcmp: fast on 100 kB files
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def line_edit(before: bytes, after: bytes) -> Edit:
    """The smallest edit turning `before` into `after`, widened to whole lines."""
    prefix = _common_prefix(before, after)
    suffix = _common_prefix(before[prefix:][::-1], after[prefix:][::-1])  # of what follows the prefix
    start = before.rfind(b"\n", 0, prefix) + 1
    end = len(before) - suffix
    newline = before.find(b"\n", end)
    cut = len(before) if newline == -1 else newline + 1
    kept_tail = len(before) - cut
    return Edit(start, before[start:cut], after[start : len(after) - kept_tail])


def swapped(source: bytes, old: str, new: str) -> bytes | None:
    """`source` with the one occurrence of `old` replaced by `new`; None unless it occurs once and
    `new` not at all (the transform refuses any other file, so for a known one this is its edit)."""
    old_b, new_b = old.encode(), new.encode()
    if source.count(old_b) != 1 or new_b in source:
        return None
    return source.replace(old_b, new_b)
