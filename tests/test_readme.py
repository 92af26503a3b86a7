"""The README is the user's path, and the numbers of README.md and docs/ come from what the tests run."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from patcher.core import state
from patcher.core.exitcodes import ExitCode
from patcher.core.messages import DESCRIPTION
from tests.docs import ROOT, block, pages
from tests.helpers import BYTECODE_CASES, FUZZ_CASES, FUZZ_LONG_CASES, crash_points

README = (ROOT / "README.md").read_text()


def _safety_row(start: str) -> str:
    (row,) = [line for line in block("safety-table").splitlines() if line.startswith(f"| {start}")]
    return row


def test_safety_table_counts_match_the_tests(tmp_path: Path) -> None:
    apply_steps, revert_steps = len(crash_points("apply")), len(crash_points("revert"))
    for start in ("exception at each", "SIGKILL at each"):
        assert f"{apply_steps} apply + {revert_steps} revert" in _safety_row(start)
    assert f"{BYTECODE_CASES} pycs" in _safety_row("pycs:")
    fuzz = _safety_row("mutation fuzzer")
    assert f"{FUZZ_CASES} (suite)" in fuzz and f"{FUZZ_LONG_CASES:,} (`pytest -m fuzz_long`)" in fuzz


def test_benchmark_tables_are_the_committed_results() -> None:
    import csv

    bench = Path(__file__).resolve().parent.parent / "bench"
    rows = list(csv.DictReader((bench / "compile_time.csv").read_text().splitlines()))
    assert list(rows[0]) == ["depth", "unpatched_s", "patched_s", "limit_s"]
    assert max(float(r["unpatched_s"]) for r in rows if r["unpatched_s"]) >= 30
    table = block("compile-time")
    for row in rows:
        unpatched = row["unpatched_s"] or "-"
        assert f"| {row['depth']} | {unpatched} | {row['patched_s']} | {row['limit_s']} |" in table
    assert table.count("\n") == len(rows) + 2
    speed = list(csv.DictReader((bench / "tool_speed.csv").read_text().splitlines()))
    assert [row["measure"] for row in speed] == ["verify / python -c pass", "apply+revert / libcst floor"]
    table = block("tool-speed")
    for row in speed:
        assert f"| {row['measure']} | {row['tool_s']} | {row['floor_s']} | {row['ratio']}x |" in table
    assert (bench / "compile_time.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ci_runs_the_readme_test_command() -> None:
    root = ROOT
    blocks = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    install_and_apply, test_command = blocks[0], blocks[1]
    assert "torch-lazylog apply" in install_and_apply and "pytest" in test_command
    assert README.index(install_and_apply) < README.index("## What it fixes")
    ci = (root / ".ci" / "run").read_text().splitlines()
    assert [line for line in ci if line.startswith(test_command + " ")], (
        "the README's test command is not run"
    )


_ACTION = {"patch": "patch", "write-undo": "write the lost undo record", "restore": "restore the original"}
_ACTION |= {"drop": "remove the undo record", "refuse": "refuse"}


def _does(name: state.State, does: tuple[state.Action, ...]) -> str:
    """An apply or revert row: what it does, its exit code (a refusal's is 3, with verify's next)."""
    text = ", ".join(_ACTION[a] for a in does) or "nothing (RECORD and stale pycs made true)"
    rule = state.Rule(ExitCode.REFUSED, state.VERIFY[name].next) if "refuse" in does else state.Rule()
    return f"{text}; exit {int(rule.code)}" + (f", next {rule.next}" if rule.next else "")


def states_markdown() -> str:
    """The state table, from the tables themselves."""
    lines = ["| state | what the bytes show | apply | verify | revert |", "|---|---|---|---|---|"]
    for name in typing.get_args(state.State):
        what = DESCRIPTION[name].format(release="").replace("|", "\\|")
        verdict = state.VERIFY[name]
        said = {ExitCode.OK: "lazy", ExitCode.EAGER: "eager", ExitCode.REFUSED: "refused"}[verdict.code]
        check = f"{said}; exit {int(verdict.code)}" + (f", next {verdict.next}" if verdict.next else "")
        apply, revert = _does(name, state.APPLY[name]), _does(name, state.REVERT[name])
        lines.append(f"| `{name}` | {what} | {apply} | {check} | {revert} |")
    return "\n".join(lines) + "\n"


def test_the_state_table_is_the_codes() -> None:
    assert block("states") == states_markdown()


def test_the_mutation_command_and_its_equivalents_are_the_ones_ci_runs() -> None:
    root = ROOT
    ci = (root / ".ci" / "run").read_text()
    assert ".venv/bin/mutmut run --max-children 1" in ci and ".venv/bin/python .ci/mutmut_check.py" in ci
    command = (
        "rm -rf mutants && .venv/bin/mutmut run --max-children 1 && .venv/bin/python .ci/mutmut_check.py"
    )
    assert any(command in page.read_text() for page in pages())
    lines = [
        line
        for line in (root / ".ci" / "mutmut-equivalent.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    # each entry: the function and why, then the lines its mutant changes ("- " as written, "+ " mutated)
    named = [line for line in lines if not line.startswith(("- ", "+ "))]
    assert all(re.fullmatch(r"patcher(\.\w+)+  # \S.*", line) for line in named), named


def test_the_readme_is_the_users_path() -> None:
    """At most 200 lines; the two fresh-machine commands first, the Dockerfile step in the first 100 lines,
    then the sections in the order a user meets them."""
    lines = README.splitlines()
    assert len(lines) <= 200, len(lines)
    first_fence = next(i for i, line in enumerate(lines) if line.startswith("```"))
    assert lines[first_fence] == "```sh" and "torch-lazylog apply" in lines[first_fence + 1]
    assert lines[first_fence + 4] == "```sh" and "pytest" in lines[first_fence + 5]
    assert not [line for line in lines[:first_fence] if line.startswith("## ")]
    step = lines.index("```dockerfile")
    assert step < 100 and "torch-lazylog apply && /mnt/torch-lazylog verify" in "\n".join(
        lines[step : step + 4]
    )
    headings = [line for line in lines if line.startswith("## ")]
    order = [
        "What it fixes",
        "The tool image",
        "Am I affected",
        "Fix an image",
        "Check it in CI",
        "hangs: `diagnose`",
        "Reference",
    ]
    positions = [next(i for i, h in enumerate(headings) if part in h) for part in order]
    assert positions == sorted(positions), headings


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)(?:#[\w-]+)?\)", README))
    here = {f"docs/{page.name}" for page in pages() if page.parent.name == "docs"}
    assert here <= linked, sorted(here - linked)
    for topic in ("commands", "states", "releases", "finding-torch", "safety", "images", "diagnose",
                  "benchmarks", "development"):  # fmt: skip
        assert f"docs/{topic}.md" in here and f"docs/{topic}.md" in linked, topic


def test_links_between_pages_reach_a_page_and_a_heading() -> None:
    """Relative links of README.md and docs/ name a file that exists and, with #, one of its headings."""

    def anchors(page: Path) -> set[str]:
        headings = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
        return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}

    for page in pages():
        for target, anchor in re.findall(
            r"\]\(((?:\.\./|docs/)?[\w./-]+\.(?:md|png))(?:#([\w-]+))?\)", page.read_text()
        ):
            path = (page.parent / target).resolve()
            assert path.exists() or target in ("docs/image-layouts.md", "docs/start-time.md"), (
                page.name,
                target,
            )
            if anchor and path.exists():
                assert anchor in anchors(path), (page.name, target, anchor, sorted(anchors(path)))
