#!/usr/bin/env python3
"""Compare mutmut's results with the mutants named as equivalent; exit 1 on any other survivor.

Run after `mutmut run` in the checkout (its results live in ./mutants/). Every mutant that no test
kills must be named, with its reason, in .ci/mutmut-equivalent.txt (`<mutant name>  # why`); a
named mutant that is now killed is reported too, so the list stays exact. A timeout counts as a
kill (the mutant changed what the code does). At most 5% of the mutants may be named.
"""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMED = ROOT / ".ci" / "mutmut-equivalent.txt"
KILLED = {"killed", "timeout", "caught by type check"}
LIMIT = 0.05


def named() -> dict[str, str]:
    out: dict[str, str] = {}
    for number, line in enumerate(NAMED.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, _, why = text.partition("#")
        if not why.strip():
            sys.exit(f"{NAMED.name}:{number}: {name.strip()} is named without a reason")
        # "# 3.12+: why": equivalent only from that Python on (a builtin's argument handling changed);
        # on an older one the name is neither excused nor stale.
        since = why.strip().split(":", 1)[0]
        if since.endswith("+") and since[:-1].replace(".", "").isdigit():
            wanted = tuple(int(part) for part in since[:-1].split("."))
            if sys.version_info[: len(wanted)] < wanted:
                continue
        out[name.strip()] = why.strip()
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


def module(name: str) -> str:
    return name.split(".x_")[0].split(".xǁ")[0]


def main() -> int:
    mutmut = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / ".venv" / "bin" / "mutmut")
    found, equivalent = results(mutmut), named()
    if not found:
        print("mutmut-check: no results (run `mutmut run` first)")
        return 1
    survivors = {n for n, s in found.items() if s not in KILLED}
    unnamed = sorted(survivors - set(equivalent))
    stale = sorted(set(equivalent) - survivors)
    per: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for name, status in found.items():
        kind = (
            "equivalent"
            if name in equivalent and name in survivors
            else "killed"
            if status in KILLED
            else "survived"
        )
        per[module(name)][kind] += 1
        per[module(name)]["total"] += 1
    for mod in sorted(per):
        c = per[mod]
        print(
            f"{mod}: {c['total']} mutants, {c['killed']} killed, {c['equivalent']} named equivalent, {c['survived']} survived"
        )
    total = len(found)
    share = len(survivors & set(equivalent)) / total
    print(
        f"all: {total} mutants, {total - len(survivors)} killed, {len(survivors & set(equivalent))} named equivalent ({share:.1%})"
    )
    for name in unnamed:
        print(f"survived, not named as equivalent: {name} ({found[name]}); see `mutmut show {name}`")
    for name in stale:
        print(
            f"named as equivalent but {found.get(name, 'not generated')}: {name} (remove it from {NAMED.name})"
        )
    if share > LIMIT:
        print(f"more than {LIMIT:.0%} of the mutants are named as equivalent")
    return 1 if unnamed or stale or share > LIMIT else 0


if __name__ == "__main__":
    sys.exit(main())
