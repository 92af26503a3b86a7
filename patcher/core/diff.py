"""The unified diff of apply's one-line edit, with lines split as `patch` splits them (on \\n only)."""

from __future__ import annotations

from patcher.core.edits import line_edit


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", "surrogateescape")
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    return lines + ([parts[-1]] if parts[-1] else [])


def _body(line: str, mark: str) -> str:
    return mark + line if line.endswith("\n") else mark + line + "\n\\ No newline at end of file\n"


def unified(before: bytes, after: bytes, name: str, context: int = 3) -> str:
    """One hunk around the edit; every other byte is the same, so the hunk is the whole diff."""
    edit = line_edit(before, after)
    head = _lines(before[: edit.offset])
    tail = _lines(before[edit.offset + len(edit.old) :])
    old, new = _lines(edit.old), _lines(edit.new)
    shown_head, shown_tail = head[len(head) - min(context, len(head)) :], tail[:context]
    start = len(head) - len(shown_head) + 1
    hunk = f"@@ -{start},{len(shown_head) + len(old) + len(shown_tail)} +{start},{len(shown_head) + len(new) + len(shown_tail)} @@\n"
    body = [_body(x, " ") for x in shown_head] + [_body(x, "-") for x in old] + [_body(x, "+") for x in new]
    body += [_body(x, " ") for x in shown_tail]
    return f"--- a/{name}\n+++ b/{name}\n" + hunk + "".join(body)
