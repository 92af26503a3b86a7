"""Dockerfile.rocm and the README's snippet, built by a real Docker engine on a stand-in ROCm base.

The base (tests/images.py) is Debian with /opt/venv holding real torch from the package index, as
the rocm/pytorch images have it; it is built once and kept by the engine between runs.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import images, realdata
from tests.conftest import need
from tests.helpers import readme_snippet

ROOT = Path(__file__).resolve().parent.parent
GRAPH = "/opt/venv/lib/python3*/site-packages/torch/_inductor/graph.py"
RECORD = "/opt/venv/lib/python3*/site-packages/torch-*.dist-info/RECORD"
PATCH_STEP = "RUN torch-lazylog apply && torch-lazylog verify"

pytestmark = pytest.mark.image


def _base(version: str) -> str:
    tag = need(lambda: images.base_image(version))
    assert isinstance(tag, str)
    return tag


def _context(destination: Path) -> Path:
    """The build context Dockerfile.rocm expects: the tool's source, as the repository has it."""
    destination.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "Dockerfile.rocm", ".dockerignore"):
        shutil.copy2(ROOT / name, destination / name)
    for name in ("patcher", "patches"):
        shutil.copytree(ROOT / name, destination / name, ignore=shutil.ignore_patterns("__pycache__"))
    return destination


def _tag(name: str) -> str:
    """An image name of this run's own: runs sharing the engine never remove each other's images."""
    return f"torch-lazylog-test:{name}-{os.getpid()}"


def _build(
    context: Path, tag: str, base: str, dockerfile: str = "Dockerfile.rocm", cache: bool = False
) -> str:
    """Build with BuildKit and plain progress; returns the build log. Without `cache` every step runs:
    the engine keeps its build cache between runs, and a test of what the steps do must see them run."""
    done = images.docker(
        "build", "--network=host", "--progress=plain", *([] if cache else ["--no-cache"]),
        "-f", str(context / dockerfile), "--build-arg", f"BASE_IMAGE={base}", "-t", tag, str(context),
        env=images.BUILDKIT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stderr


def _step_cached(log: str, step: str) -> bool:
    ids = [m[1] for m in re.finditer(r"^#(\d+) \[[^\]]*\] (.*)$", log, re.M) if m[2].strip() == step]
    assert ids, f"no step {step!r} in the build log"
    return any(re.search(rf"^#{i} CACHED$", log, re.M) for i in ids)


def _sh(image: str, script: str) -> subprocess.CompletedProcess[str]:
    return images.docker("run", "--rm", "--network=host", image, "sh", "-c", script, timeout=1800)


@functools.cache
def _listing(image: str) -> dict[str, str]:
    """Every file under /opt/venv: size and mtime."""
    done = _sh(image, "find /opt/venv -type f -printf '%p\\t%s %T@\\n'")
    assert done.returncode == 0, done.stderr
    return dict(line.split("\t", 1) for line in done.stdout.splitlines())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """(base, image, build log) of Dockerfile.rocm on the torch 2.10.0 stand-in."""
    base = _base("2.10.0")
    context = _context(tmp_path_factory.mktemp("image") / "context")
    tag = _tag("rocm-2.10.0")
    log = _build(context, tag, base)
    yield base, tag, log
    images.docker("image", "rm", "-f", tag)


def test_dockerfile_rocm_builds_and_the_image_verifies(built: tuple[str, str, str]) -> None:
    _, image, log = built
    assert "Patched graph.py" in log and "matches its undo record" in log
    verify = images.docker("run", "--rm", image, "torch-lazylog", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    runtime = images.docker("run", "--rm", image, "torch-lazylog", "verify", "--runtime", timeout=1800)
    assert runtime.returncode == 0, runtime.stdout + runtime.stderr
    assert "5 checks passed" in runtime.stdout


def test_the_servers_environment_is_unchanged_but_for_the_patch(built: tuple[str, str, str]) -> None:
    base, image, _ = built
    freeze = "/opt/venv/bin/python -m pip freeze --all"
    before, after = _sh(base, freeze), _sh(image, freeze)
    assert before.returncode == after.returncode == 0
    assert after.stdout == before.stdout and "torch==" in before.stdout
    changed = {
        path
        for path in set(_listing(base)) | set(_listing(image))
        if _listing(base).get(path) != _listing(image).get(path)
    }
    kinds = {re.sub(r"^.*/(torch-[^/]+\.dist-info|torch)/", "", path) for path in changed}
    assert {k for k in kinds if "__pycache__" not in k} == {
        "_inductor/graph.py",
        "RECORD",
        "torch_lazylog.json",
    }, sorted(changed)
    assert all(re.search(r"_inductor/__pycache__/graph\.[^/]+\.pyc$", k) for k in kinds if "__pycache__" in k)


def test_revert_in_the_image_restores_the_base_bytes(built: tuple[str, str, str]) -> None:
    base, image, _ = built
    hashes = f"sha256sum {GRAPH} {RECORD}"
    original = _sh(base, hashes)
    reverted = _sh(
        image,
        f"torch-lazylog revert >/dev/null && {hashes} && torch-lazylog verify >/dev/null; echo verify=$?",
    )
    assert original.returncode == 0 and reverted.returncode == 0, reverted.stderr
    lines = reverted.stdout.splitlines()
    assert lines[:-1] == original.stdout.splitlines() and len(lines) == 3
    assert lines[-1] == "verify=1"


def test_the_build_cache_keeps_the_patch_only_while_the_tool_is_the_same(
    built: tuple[str, str, str], tmp_path: Path
) -> None:
    base, _, _ = built
    context = _context(tmp_path / "context")
    tag = _tag("cache")
    try:
        _build(context, tag, base)
        assert _step_cached(_build(context, tag, base, cache=True), PATCH_STEP), (
            "a rebuild of the same context reran the patch"
        )
        definition = context / "patches" / "lazy_implicit_fallback.json"
        # Edits of this run's own: the engine caches by content, across runs of the same commit.
        edit = uuid.uuid4().hex
        definition.write_text(definition.read_text().replace('"summary": "', f'"summary": "(edited {edit}) '))
        assert not _step_cached(_build(context, tag, base, cache=True), PATCH_STEP), (
            "a new patches/ kept the old patch layer"
        )
        init = context / "patcher" / "__init__.py"
        init.write_text(init.read_text() + f"\n# a change to the tool, {edit}\n")
        assert not _step_cached(_build(context, tag, base, cache=True), PATCH_STEP), (
            "a new tool kept the old patch layer"
        )
    finally:
        images.docker("image", "rm", "-f", tag)


def test_the_readme_snippet_builds_as_printed(built: tuple[str, str, str], tmp_path: Path) -> None:
    base, _, _ = built
    context = tmp_path / "context"
    (context / "dist").mkdir(parents=True)
    need(
        lambda: realdata.pip(
            ["wheel", "--quiet", "--no-deps", "-w", str(context / "dist"), str(ROOT)], "setuptools"
        )
    )
    (context / "Dockerfile").write_text(f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\n{readme_snippet()}")
    tag = _tag("snippet")
    try:
        log = _build(context, tag, base, "Dockerfile")
        assert "Patched graph.py" in log
        verify = images.docker("run", "--rm", tag, "torch-lazylog", "verify", "--runtime", timeout=1800)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert (
            _sh(tag, "/opt/venv/bin/python -m pip freeze --all").stdout
            == _sh(base, "/opt/venv/bin/python -m pip freeze --all").stdout
        )
    finally:
        images.docker("image", "rm", "-f", tag)


def test_a_natively_lazy_base_builds_and_apply_changes_nothing(tmp_path: Path) -> None:
    base = _base("2.13.0")
    context = _context(tmp_path / "context")
    tag = _tag("rocm-2.13.0")
    try:
        log = _build(context, tag, base)
        assert "formats the implicit-fallback log lazily already" in log and "nothing to do" in log
        hashes = f"sha256sum {GRAPH} {RECORD}"
        assert _sh(tag, hashes).stdout == _sh(base, hashes).stdout
        assert images.docker("run", "--rm", tag, "torch-lazylog", "verify").returncode == 0
    finally:
        images.docker("image", "rm", "-f", tag)
