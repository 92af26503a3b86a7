#!/usr/bin/env python3
"""Compare mutmut's results with the mutants named as equivalent; exit 1 on any other survivor.

Run after `mutmut run` in the checkout (its results and mutated copies live in ./mutants/). Every
mutant that no test kills must be excused, by a rule or by name:
- RULES below: a kind of change that is equivalent wherever it is made (a codec name's case, None
  for a start of 0, an assertion's message), each with its reason;
- .ci/mutmut-equivalent.txt: a line `<function>  # why`, then the lines the mutant changes, `- ` as
  written and `+ ` as mutated (what `mutmut show NAME` prints, without indentation). `+ *` stands
  for any mutation of the written lines, and `- *` alone for any mutant of the function (a path that
  only saves time). A mutant is known by its function and that change, never by mutmut's index
  within the function, which any edit to the function renumbers: an edit elsewhere leaves the list
  valid. The same change at two places in one function is one entry.
A named entry that now excuses no survivor is reported too, so the list stays exact. A timeout counts
as a kill (the mutant changed what the code does). At most 5% of the mutants may be excused.
"""

from __future__ import annotations

import ast
import codecs
import collections
import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMED = ROOT / ".ci" / "mutmut-equivalent.txt"
KILLED = {"killed", "timeout", "caught by type check"}
LIMIT = 0.05
# mutmut's name of a mutant: the module, then x_<function> or xǁ<class>ǁ<method>, then its index.
MUTANT = re.compile(r"(?P<module>[\w.]+?)\.(?P<function>x_\w+?|xǁ\w+?ǁ\w+?)__mutmut_(?P<index>\d+|orig)")

# A mutant's change: the function ("patcher.core.undo.UndoRecord.to_bytes"), the lines as written
# and the lines as mutated (each stripped of its indentation).
Change = tuple[str, tuple[str, ...], tuple[str, ...]]
# An entry of the list: a change, where None stands for any lines (`- *`, `+ *`).
Named = tuple[str, tuple[str, ...] | None, tuple[str, ...] | None]
ANY = ("*",)


def matches(entry: Named, change: Change) -> bool:
    function, old, new = entry
    return function == change[0] and old in (None, change[1]) and new in (None, change[2])


_STRING = re.compile(r"""(["'])((?:\\.|(?!\1).)*)\1""")  # a quoted literal, escapes and all


def _codec(name: str) -> str | None:
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def _codec_case(old: str, new: str) -> bool:
    """Only string literals changed, each a codec name in another case (codec lookup ignores case)."""
    before, after = _STRING.findall(old), _STRING.findall(new)
    if len(before) != len(after) or _STRING.sub("''", old) != _STRING.sub("''", new):
        return False
    changed = [(a[1], b[1]) for a, b in zip(before, after, strict=True) if a != b]
    return bool(changed) and all(
        a != b and _codec(a) is not None and _codec(a) == _codec(b) for a, b in changed
    )


_START = re.compile(r"\.(?:r?find|count)\([^,()]+, 0(?=[,)])")


def _none_for_zero_start(old: str, new: str) -> bool:
    """A start of 0 given as None to bytes.find, rfind or count: the same slice."""
    return any(old[: m.end() - 1] + "None" + old[m.end() :] == new for m in _START.finditer(old))


def _assert_message(old: str, new: str) -> bool:
    """Only an assertion's message changed: it shows only when the assertion fails."""
    try:
        a, b = ast.parse(old).body, ast.parse(new).body
    except SyntaxError:
        return False
    return (
        len(a) == len(b) == 1
        and isinstance(a[0], ast.Assert)
        and isinstance(b[0], ast.Assert)
        and ast.dump(a[0].test) == ast.dump(b[0].test)
        and a[0].msg is not None
    )


RULES = {
    "a codec name in another case (codec lookup ignores case)": _codec_case,
    "None for a start of 0 in bytes.find, rfind or count (the same slice)": _none_for_zero_start,
    "an assertion's message (shown only when it fails)": _assert_message,
}


def rule(change: Change) -> str | None:
    """The rule that excuses this change: one changed line, equivalent by its kind."""
    _, old, new = change
    if len(old) != 1 or len(new) != 1:
        return None
    return next((why for why, holds in RULES.items() if holds(old[0], new[0])), None)


def named(text: str) -> dict[Named, str]:
    out: dict[Named, str] = {}
    entries: list[tuple[int, str, str, dict[str, list[str]]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(("- ", "+ ")):
            if not entries:
                sys.exit(f"{NAMED.name}:{number}: a changed line before any function")
            entries[-1][3][line[0]].append(line[2:].strip())
        elif line.strip() and not line.startswith("#"):
            function, _, why = line.partition("#")
            if not why.strip():
                sys.exit(f"{NAMED.name}:{number}: {function.strip()} is named without a reason")
            entries.append((number, function.strip(), why.strip(), {"-": [], "+": []}))
    for number, function, why, lines in entries:
        old, new = lines["-"], lines["+"]
        if not old and not new:
            sys.exit(f"{NAMED.name}:{number}: {function} is named without the lines it changes")
        # "# 3.12+: why": equivalent only from that Python on (a builtin's argument handling changed);
        # on an older one the name is neither excused nor stale.
        since = why.split(":", 1)[0]
        if since.endswith("+") and since[:-1].replace(".", "").isdigit():
            wanted = tuple(int(part) for part in since[:-1].split("."))
            if sys.version_info[: len(wanted)] < wanted:
                continue
        if old == list(ANY):
            key: Named = (function, None, None)
        else:
            key = (function, tuple(old), None if new == list(ANY) else tuple(new))
        if key in out:
            sys.exit(f"{NAMED.name}:{number}: {function} names the same change twice")
        out[key] = why
    return out


def results(mutmut: str) -> dict[str, str]:
    done = subprocess.run([mutmut, "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"mutmut results failed ({done.returncode}): {done.stderr.strip()}")
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name.startswith("patcher."):
            found[name] = status
    return found


def _function(mangled: str) -> str:
    """x_hash_field -> hash_field; xǁUndoRecordǁto_bytes -> UndoRecord.to_bytes"""
    return mangled[2:] if mangled.startswith("x_") else ".".join(mangled.split("ǁ")[1:])


def changes(names: list[str], mutants: Path) -> dict[str, Change]:
    """Each mutant's change, read from mutmut's mutated copy of its module: the lines where its
    function differs from the function as written (mutmut keeps both there)."""
    by_module: dict[str, list[re.Match[str]]] = collections.defaultdict(list)
    for name in names:
        match = MUTANT.fullmatch(name)
        if match is None:
            sys.exit(f"mutmut-check: a mutant name not in mutmut's form: {name}")
        by_module[match["module"]].append(match)
    out: dict[str, Change] = {}
    for module, matches in by_module.items():
        text = (mutants / Path(*module.split("."))).with_suffix(".py").read_text(encoding="utf-8")
        lines = text.splitlines()
        sources: dict[str, list[str]] = {}
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
                body = lines[node.lineno - 1 : node.end_lineno]
                plain = _function(node.name.rpartition("__mutmut_")[0]).rpartition(".")[2]
                sources[node.name] = [body[0].replace(node.name, plain, 1), *body[1:]]
        for match in matches:
            generated = match[0].rpartition(".")[2]
            orig, mutant = sources[f"{match['function']}__mutmut_orig"], sources[generated]
            old: list[str] = []
            new: list[str] = []
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
                None, orig, mutant, autojunk=False
            ).get_opcodes():
                if tag != "equal":
                    old += [line.strip() for line in orig[i1:i2]]
                    new += [line.strip() for line in mutant[j1:j2]]
            out[match[0]] = (f"{module}.{_function(match['function'])}", tuple(old), tuple(new))
    return out


def entry(change: Change, why: str) -> str:
    function, old, new = change
    return "\n".join([f"{function}  # {why}", *(f"- {line}" for line in old), *(f"+ {line}" for line in new)])


def module(name: str) -> str:
    return name.split(".x_")[0].split(".xǁ")[0]


def main() -> int:
    mutmut = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / ".venv" / "bin" / "mutmut")
    found, equivalent = results(mutmut), named(NAMED.read_text(encoding="utf-8"))
    if not found:
        print("mutmut-check: no results (run `mutmut run` first)")
        return 1
    survivors = {n for n, s in found.items() if s not in KILLED}
    change = changes(sorted(survivors), ROOT / "mutants")
    by_rule = collections.Counter(why for n in survivors if (why := rule(change[n])))
    entries = {n: [e for e in equivalent if matches(e, change[n])] for n in survivors if not rule(change[n])}
    excused = {n for n in survivors if rule(change[n]) or entries[n]}
    unnamed = sorted(survivors - excused)
    stale = [e for e in equivalent if not any(e in used for used in entries.values())]
    per: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for name, status in found.items():
        kind = "equivalent" if name in excused else "killed" if status in KILLED else "survived"
        per[module(name)][kind] += 1
        per[module(name)]["total"] += 1
    for mod in sorted(per):
        c = per[mod]
        print(
            f"{mod}: {c['total']} mutants, {c['killed']} killed, {c['equivalent']} equivalent, {c['survived']} survived"
        )
    total = len(found)
    share = len(excused) / total
    print(
        f"all: {total} mutants, {total - len(survivors)} killed, {len(excused)} equivalent ({share:.1%}):"
        f" {sum(by_rule.values())} by {len(by_rule)} rules, the rest by {len(equivalent)} named entries"
    )
    for why, count in sorted(by_rule.items()):
        print(f"  {count} by rule: {why}")
    for name in unnamed:
        print(f"survived ({found[name]}), not named as equivalent (`mutmut show {name}`):")
        print(entry(change[name], "why it changes nothing a caller can observe"))
    for key in stale:
        print(f"named as equivalent but killed or no longer made (remove it from {NAMED.name}):")
        function, old, new = key
        print(entry((function, old or ANY, ANY if new is None and old else new or ()), equivalent[key]))
    if share > LIMIT:
        print(f"more than {LIMIT:.0%} of the mutants are named as equivalent")
    return 1 if unnamed or stale or share > LIMIT else 0


if __name__ == "__main__":
    sys.exit(main())
