"""The JSON fields every command prints, in their order: the contract docs/commands.md lists.

Plain Python 3.6 syntax, importing nothing: the single file's first module fills these on a Python
too old to import the rest of the package (patcher.cli.zipmain), so every entry prints one shape.
"""

FIELDS = (
    "command",
    "state",
    "changed",
    "exit_code",
    "message",
    "next",
    "torch_version",
    "torch_dir",
    "torch_path_entry",
    "graph_py",
    "sha256",
    "release",
    "match",
    "undo_record",
    "diff",
    "nearest_diff",
    "problems",
    "pycs",
    "checks",
    "support",
    "table",
)
LISTS = ("problems", "pycs", "checks")  # empty lists where nothing is known; every other field null
# A report's fields the text alone prints: diagnose's steps after the first, as lines (its --json
# carries every step, with where each runs, as `steps`).
TEXT_ONLY = ("then",)


def unread(command: str, exit_code: int, message: str) -> "dict[str, object]":
    """A result about no torch read: the command, its code and sentence, the state `unknown`."""
    known = {"command": command, "state": "unknown", "changed": False, "exit_code": exit_code}
    known["message"] = message
    return {name: known.get(name, [] if name in LISTS else None) for name in FIELDS}
