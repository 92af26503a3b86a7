"""What a command reports: built once, never changed; the JSON shape of every result."""

from __future__ import annotations

from typing import Literal, NamedTuple

from patcher.core.exitcodes import ExitCode
from patcher.core.fields import FIELDS, LISTS

JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]

# The install's one named state: what `state` prints in JSON, and what patcher.core.state names from
# the bytes and keeps a row of its table for (docs/states.md). Here, below the report that carries it.
State = Literal[
    "pristine",
    "patched",
    "apply-interrupted",
    "ships-lazy",
    "record-only",
    "revert-interrupted",
    "unrecorded",
    "reinstalled",
    "upgraded",
    "untrusted-eager",
    "untrusted-patched",
    "untrusted-lazy",
    "newer-eager",
    "newer-patched",
    "newer-lazy",
    "edited",
    "unknown",
]


class Support(NamedTuple):
    """The releases this tool patches, those it knows as natively lazy, and the series it refuses,
    each with its reason: a refusal's --verbose line and JSON `support`."""

    eager: tuple[str, ...]  # the releases with the eager call: the ones this tool patches
    native: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]  # (series, why)

    def text(self) -> str:
        refused = " and ".join(f"{series} ({why})" for series, why in self.refused)
        return (
            f"torch-lazylog patches {', '.join(self.eager)}, knows {', '.join(self.native)} as "
            f"natively lazy, and refuses {refused}"
        )


class Advice(NamedTuple):
    """A step only a person can take (upgrade torch, fingerprint a build), said as it is."""

    text: str


# The one next step a result names: a command of this tool, which the command line renders with the
# target options the user gave; "reinstall", what only a reinstall of torch can fix, rendered as the
# pip or uv line that fits the install; or a person's step.
Next = Literal["apply", "revert", "reinstall"] | Advice


class Report(NamedTuple):
    command: str
    state: State
    changed: bool
    message: str
    code: ExitCode = ExitCode.OK
    next: Next | None = None  # the one next step, rendered as a line by the command line
    then: tuple[str, ...] = ()  # diagnose: the steps after it (or instead, when it runs elsewhere), as lines
    torch_version: str | None = None
    torch_dir: str | None = None
    torch_path_entry: str | None = None  # the sys.path entry the target interpreter imports torch from
    graph_py: str | None = None
    sha256: str | None = None
    release: str | None = None
    match: str | None = None
    undo_record: str | None = None
    diff: str | None = None  # apply: graph.py's unified diff, made or (a dry run) to make
    problems: tuple[str, ...] = ()
    pycs: tuple[dict[str, JsonValue], ...] = ()
    checks: tuple[dict[str, JsonValue], ...] = ()
    support: Support | None = None  # a refusal of an unknown graph.py: every release
    nearest_diff: str | None = None  # a refusal: the branch's diff against the nearest release's
    table: str | None = None  # fingerprint: the releases table (or the docs' table) it made

    def to_json(self, next: str | None) -> dict[str, JsonValue]:
        """`next`: the next step as rendered for the options the user gave. The fields, in their
        order, are patcher.core.fields.FIELDS: each the report's own value, but for these."""
        rendered: dict[str, JsonValue] = {
            "exit_code": int(self.code),
            "next": next,
            "support": None if self.support is None else _support(self.support),
        }
        for name in LISTS:
            rendered[name] = list(getattr(self, name))
        return {name: rendered[name] if name in rendered else getattr(self, name) for name in FIELDS}


def _support(support: Support) -> dict[str, JsonValue]:
    refused: dict[str, JsonValue] = {series: why for series, why in support.refused}
    return {"eager": list(support.eager), "native": list(support.native), "refused": refused}
