"""Known by fingerprint, not by version string: vendor builds are patched, drifted sites refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

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
    assert "same patch site as torch 2.10.0" in report["message"]
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
        "expected `GraphLowering.call_function`",
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
        assert why in result.stderr
        assert "2.4.1" in result.stderr and "2.12.1" in result.stderr and "2.13.0" in result.stderr
        assert "Nothing was written" in result.stderr
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
    assert result.exit_code == 3 and report["next"] is None, report  # never touched: no reinstall
    diff = report["diff"]
    assert diff.startswith("The branch differs from the nearest release, 2.10.0:"), diff
    changed = [line[0] + line[1:].strip() for line in diff.splitlines()[3:] if line[:1] in "+-"]
    assert changed == ['-"Creating implicit fallback for:\\n%s",', '+"Creating fallback for:\\n%s",'], diff
    text = run(command, "--torch-dir", str(torch_dir))
    assert diff in text.stderr and "Nothing was written." in text.stderr


@pytest.mark.parametrize(
    ("version", "named"),
    [
        ("2.1.2", "2.1.x (its graph.py does not import LazyString)"),
        ("2.0.1", "2.0.x (it has no torch._logging, so no LazyString to import)"),
    ],
)
def test_the_releases_before_2_2_are_refused_for_their_reason(
    version: str, named: str, release: Callable[[str], Path], run: Callable[..., Result]
) -> None:
    """The real files of the last 2.1 and 2.0 releases hold the eager call, but graph.py imports no
    LazyString (and 2.0 has no torch._logging to import it from): refused, for the reason the
    message gives, and nothing written."""
    from tests import realdata

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
    assert named in result.stderr
    assert "torch-lazylog patches 2.2.0, 2.2.1" in result.stderr
    assert snapshot(torch_dir.parent) == before


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
    assert "same patch site as torch 2.12.1" in run("verify", "--torch-dir", str(torch_dir)).stdout
