"""The README's numbers come from what the tests run."""

from __future__ import annotations

from pathlib import Path

from tests.test_safety_bytecode import BYTECODE_CASES
from tests.test_safety_crash import _expected_points
from tests.test_safety_fuzz import FUZZ_CASES, FUZZ_LONG_CASES

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _safety_row(start: str) -> str:
    section = README[README.index("## Safety") :]
    (row,) = [line for line in section.splitlines() if line.startswith(f"| {start}")]
    return row


def test_safety_table_counts_match_the_tests(tmp_path: Path) -> None:
    apply_steps, revert_steps = len(_expected_points("apply")), len(_expected_points("revert"))
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
    for row in rows:
        unpatched = row["unpatched_s"] or "-"
        assert f"| {row['depth']} | {unpatched} | {row['patched_s']} | {row['limit_s']} |" in README
    speed = list(csv.DictReader((bench / "tool_speed.csv").read_text().splitlines()))
    assert [row["measure"] for row in speed] == ["verify / python -c pass", "apply+revert / libcst floor"]
    for row in speed:
        assert f"| {row['measure']} | {row['tool_s']} | {row['floor_s']} | {row['ratio']}x |" in README
    assert (bench / "compile_time.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ci_runs_the_readme_test_command() -> None:
    import re

    root = Path(__file__).resolve().parent.parent
    blocks = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    install_and_apply, test_command = blocks[0], blocks[1]
    assert "torch-lazylog apply" in install_and_apply and "pytest" in test_command
    assert README.index(install_and_apply) < README.index("## What it fixes")
    ci = (root / ".ci" / "run").read_text().splitlines()
    assert [line for line in ci if line.startswith(test_command + " ")], (
        "the README's test command is not run"
    )


def test_the_state_table_is_the_codes() -> None:
    from patcher.core.messages import states_markdown

    table = README[
        README.index("<!-- states -->\n") + len("<!-- states -->\n") : README.index("<!-- /states -->")
    ]
    assert table == states_markdown()


def test_the_mutation_command_and_its_equivalents_are_the_ones_ci_runs() -> None:
    import re

    root = Path(__file__).resolve().parent.parent
    ci = (root / ".ci" / "run").read_text()
    assert ".venv/bin/mutmut run --max-children 1" in ci and ".venv/bin/python .ci/mutmut_check.py" in ci
    assert (
        "rm -rf mutants && .venv/bin/mutmut run --max-children 1 && .venv/bin/python .ci/mutmut_check.py"
        in README
    )
    named = [
        line
        for line in (root / ".ci" / "mutmut-equivalent.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert all(re.fullmatch(r"patcher\.\S+__mutmut_\d+\s+# \S.*", line) for line in named), named
    stated = README[README.index("<!-- equivalent -->") : README.index("<!-- /equivalent -->")]
    assert f"{len(named)} of " in stated, stated
