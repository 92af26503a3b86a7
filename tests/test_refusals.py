"""Known by fingerprint, not by version string: vendor builds are patched, drifted sites refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests import realdata
from tests.conftest import snapshot

ROCM_VERSION = "2.10.0+rocm7.2.4.git3d3aa833"


def _edit(path: Path, old: bytes, new: bytes, count: int = 1) -> None:
    data = path.read_bytes()
    assert data.count(old) >= 1, old
    path.write_bytes(data.replace(old, new, count))


def _vendorize(torch_dir: Path) -> None:
    """What a ROCm fork looks like: another version string and unrelated edits elsewhere in graph.py."""
    version = torch_dir / "version.py"
    version.write_text(
        version.read_text().replace("__version__ = '2.10.0'", f"__version__ = '{ROCM_VERSION}'")
    )
    graph = torch_dir / "_inductor" / "graph.py"
    _edit(
        graph,
        b"# Note: [Input Alignment handling in Inductor]",
        b"# Note: [Input Alignment handling in Inductor] (ROCm)",
    )
    graph.write_bytes(graph.read_bytes() + b"\n\ndef _rocm_helper() -> int:\n    return 42\n")


def test_vendor_build_is_patched_and_names_the_nearest_release(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    _vendorize(torch_dir)
    assert ROCM_VERSION in (torch_dir / "version.py").read_text()
    pristine = snapshot(torch_dir.parent)

    verify = run("verify", "--torch-dir", str(torch_dir), "--json")
    assert verify.exit_code == 1
    assert json.loads(verify.stdout)["match"] == "site"

    applied = run("apply", "--torch-dir", str(torch_dir), "--json")
    assert applied.exit_code == 0, applied.output
    report = json.loads(applied.stdout)
    assert (report["state"], report["release"], report["match"]) == ("patched", "2.10.0", "site")
    assert report["torch_version"] == ROCM_VERSION
    assert "(a build with release 2.10.0's patch site)" in report["message"]
    assert run("verify", "--torch-dir", str(torch_dir)).exit_code == 0
    assert run("revert", "--torch-dir", str(torch_dir)).exit_code == 0
    assert snapshot(torch_dir.parent) == pristine


DRIFTS = [
    pytest.param(
        b"error.operator_str(target, args, kwargs),\n",
        b"error.operator_str(target, args, kwargs), target,\n",
        "the log call differs",
        id="extra-argument",
    ),
    pytest.param(
        b'"Creating implicit fallback for:\\n%s"',
        b'"Creating fallback for:\\n%s"',
        "the log call differs",
        id="log-text",
    ),
    pytest.param(
        b"def call_function(self, target: Callable, args: Any, kwargs: dict[str, Any])",
        b"def call_function_inner(self, target: Callable, args: Any, kwargs: dict[str, Any])",
        "`GraphLowering.call_function` passes no",
        id="moved-out-of-call_function",
    ),
    pytest.param(
        b"                make_fallback(target, layout_constraint=decided_constraint)\n",
        b"                make_fallback(target, layout_constraint=decided_constraint, warn=True)\n",
        "nearest release, 2.10.0",
        id="branch-changed",
    ),
    pytest.param(
        b"from torch._logging import LazyString, trace_structured\n",
        b"from torch._logging import trace_structured\n",
        "does not import `LazyString`",
        id="no-lazystring-import",
    ),
]


@pytest.mark.parametrize(("old", "new", "why"), DRIFTS)
def test_drifted_site_is_refused_and_nothing_written(
    old: bytes, new: bytes, why: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    _edit(torch_dir / "_inductor" / "graph.py", old, new)
    before = snapshot(torch_dir.parent)
    for command in ("apply", "verify", "revert"):
        result = run(command, "--torch-dir", str(torch_dir))
        assert result.exit_code == 3, (command, result.output)
        first, advice = result.stderr.splitlines()[:2]
        assert (
            why in result.stderr
            and first.endswith("Nothing was written.")
            and _short(first, torch_dir) <= 300
        )
        # 2.10.0's own graph.py, changed: only a reinstall restores it
        assert first.startswith(
            f"torch-lazylog: error: Expected graph.py of torch 2.10.0 at {torch_dir} as released"
        )
        assert advice.startswith("Only a reinstall of torch can fix this: "), advice
    dry = run("apply", "--dry-run", "--torch-dir", str(torch_dir), "--json")
    assert dry.exit_code == 3
    assert json.loads(dry.stdout)["state"] == "unknown"
    assert snapshot(torch_dir.parent) == before


@pytest.mark.parametrize("command", ["apply", "verify", "revert"])
def test_a_changed_log_text_is_refused_with_the_diff_of_its_branch(
    command: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    torch_dir = release("2.10.0")
    _edit(
        torch_dir / "_inductor" / "graph.py",
        b'"Creating implicit fallback for:\\n%s"',
        b'"Creating fallback for:\\n%s"',
    )
    result = run(command, "--torch-dir", str(torch_dir), "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 3, report
    assert report["next"].startswith("reinstall torch"), report  # what restores a release's file
    diff = report["nearest_diff"]
    assert diff.startswith("The branch differs from the nearest release, 2.10.0:"), diff
    changed = [line[0] + line[1:].strip() for line in diff.splitlines()[3:] if line[:1] in "+-"]
    assert changed == ['-"Creating implicit fallback for:\\n%s",', '+"Creating fallback for:\\n%s",'], diff
    text = run(command, "--torch-dir", str(torch_dir))
    assert diff in text.stderr and "Nothing was written." in text.stderr


@pytest.mark.parametrize(
    ("version", "named"),
    [
        (
            "2.1.2",
            "its graph.py does not import LazyString, and the patch adds no import, as in every 2.1.x release",
        ),
        ("2.0.1", "it has no torch._logging, so no LazyString to import, as in every 2.0.x release"),
    ],
)
def test_the_releases_before_2_2_are_refused_for_their_reason(
    version: str, named: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """The real files of the last 2.1 and 2.0 releases hold the eager call, but graph.py imports no
    LazyString (and 2.0 has no torch._logging to import it from): refused, each for its own series'
    reason, and nothing written."""
    torch_dir = release(version)
    source = (torch_dir / "_inductor" / "graph.py").read_bytes()
    assert b"log.info(\n" in source and b"error.operator_str(target, args, kwargs)," in source
    assert b"LazyString" not in source
    import zipfile

    with zipfile.ZipFile(realdata.wheel(version)) as archive:
        has_logging = "torch/_logging/__init__.py" in archive.namelist()
    assert has_logging == ("torch._logging" not in named)
    before = snapshot(torch_dir.parent)
    result = run("apply", "--torch-dir", str(torch_dir))
    assert result.exit_code == 3, result.output
    assert f"found torch {version} at {torch_dir}: {named}. Nothing was written." in result.stderr
    assert snapshot(torch_dir.parent) == before


def _short(line: str, torch_dir: Path) -> int:
    """A line's length with the torch directory as long as an image's venv site (44 characters), not
    a test's deep temporary one."""
    return len(line.replace(str(torch_dir), "/" + "d" * 43))


def _named(text: str) -> list[str]:
    """The releases of the table a text names, each as a whole version."""
    import re

    from tests import realdata

    return [v for v in realdata.ALL_RELEASES if re.search(rf"(?<![\d.]){re.escape(v)}(?![\d])", text)]


def _changed_site(torch_dir: Path) -> None:
    _edit(
        torch_dir / "_inductor" / "graph.py",
        b'"Creating implicit fallback for:\\n%s"',
        b'"Creating implicit fallback (edited):\\n%s"',
    )


@pytest.mark.parametrize(
    ("version", "change", "advice"),
    [
        (
            "2.0.1",
            None,
            "Next: upgrade torch to a release torch-lazylog patches (2.2.0 to 2.12.1), or to 2.13.0 or later",
        ),
        (
            "2.1.2",
            None,
            "Next: upgrade torch to a release torch-lazylog patches (2.2.0 to 2.12.1), or to 2.13.0 or later",
        ),
        (
            "2.10.0",
            _changed_site,
            "Only a reinstall of torch can fix this: reinstall torch in the environment that has it",
        ),
    ],
    ids=["2.0.1", "2.1.2", "edited-site"],
)
@pytest.mark.parametrize("command", ["apply", "verify", "revert"])
def test_a_refusal_is_one_line_and_its_advice_and_the_list_is_in_verbose_and_json(
    command: str,
    version: str,
    change: Callable[[Path], None] | None,
    advice: str,
    release: Callable[[str], Path],
    run: Callable[..., Result],
) -> None:
    """A refused release or an edited site: one line of at most about 300 characters that says what
    was found and why, then one line of what to do that only a person can do (upgrade, reinstall);
    the whole release list only with --verbose and in JSON."""
    torch_dir = release(version)
    if change is not None:
        change(torch_dir)
    result = run(command, "--torch-dir", str(torch_dir))
    assert result.exit_code == 3, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("torch-lazylog: error: Expected ") and _short(lines[0], torch_dir) <= 300
    assert lines[1].startswith(advice), lines[1]
    # no list: the advice's range at most, and the torch's own version
    assert set(_named(result.stderr)) <= {"2.2.0", "2.12.1", "2.13.0", version}, result.stderr
    verbose = run(command, "--verbose", "--torch-dir", str(torch_dir))
    releases = next(line for line in verbose.stderr.splitlines() if line.startswith("torch-lazylog patches "))
    assert _named(releases) == realdata.ALL_RELEASES, releases
    assert "refuses 2.1.x (" in releases and " and 2.0.x (" in releases
    report = json.loads(run(command, "--json", "--torch-dir", str(torch_dir)).stdout)
    support = report["support"]
    assert support["eager"] + support["native"] == realdata.ALL_RELEASES, support
    assert set(support["refused"]) == {"2.0.x", "2.1.x"}
    assert (
        report["next"] == lines[1].split(": ", 1)[1]
        and report["message"] == lines[0].split(": error: ", 1)[1]
    )


def test_a_vendor_build_with_an_unknown_site_is_told_the_fingerprint_workflow(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """A vendor's build (a local version in its METADATA) whose site no release has: one line, then
    the fingerprint workflow, and the diff that workflow starts from."""
    torch_dir = release("2.10.0")
    _vendorize(torch_dir)
    metadata = next(torch_dir.parent.glob("torch-*.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 2.10.0\n", f"Version: {ROCM_VERSION}\n", 1))
    _changed_site(torch_dir)
    result = run("apply", "--torch-dir", str(torch_dir))
    assert result.exit_code == 3, result.output
    first, advice, header = result.stderr.splitlines()[:3]
    assert (
        f"knows, found torch {ROCM_VERSION} at {torch_dir}: the log call differs from the known one." in first
    )
    assert _short(first, torch_dir) <= 300, first
    assert advice.startswith("Next: compare its implicit-fallback branch with the nearest release's") and (
        "docs/releases.md#a-vendor-build" in advice
    ), advice
    assert header == "The branch differs from the nearest release, 2.10.0:"


def test_a_patched_vendor_build_is_named_and_recorded_by_its_own_version(
    release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """A vendor 2.12.1 patched: its lazy branch is also what 2.13.0 and later ship, yet verify names
    it 2.12.1, and its undo record (written by apply, or again after it was lost) says 2.12.1."""
    torch_dir = release("2.12.1")
    version = torch_dir / "version.py"
    version.write_text(
        version.read_text().replace("__version__ = '2.12.1'", "__version__ = '2.12.1+rocm7.14.0'")
    )
    graph = torch_dir / "_inductor" / "graph.py"
    graph.write_bytes(graph.read_bytes() + b"\n# a vendor's line\n")
    undo = torch_dir.parent / "torch-2.12.1.dist-info" / "torch_lazylog.json"

    def named(command: str) -> tuple[int, str, str, str]:
        done = run(command, "--torch-dir", str(torch_dir), "--json")
        report = json.loads(done.stdout)
        return done.exit_code, report["state"], report["release"], report["match"]

    assert named("apply") == (0, "patched", "2.12.1", "site")
    assert json.loads(undo.read_bytes())["release"] == "2.12.1"
    assert named("verify") == (0, "patched", "2.12.1", "site")
    undo.unlink()
    assert named("verify") == (0, "unrecorded", "2.12.1", "site")
    assert named("apply") == (0, "patched", "2.12.1", "site")
    assert json.loads(undo.read_bytes())["release"] == "2.12.1"
    assert "(a build with release 2.12.1's patch site)" in run("verify", "--torch-dir", str(torch_dir)).stdout
