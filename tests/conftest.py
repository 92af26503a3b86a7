from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from patcher.cli.app import cli
from tests import realdata


def need(call: Callable[[], object]) -> object:
    """Real data or bust: under CI=true a missing download fails the test, elsewhere it skips."""
    try:
        return call()
    except realdata.Unavailable as exc:
        if realdata.IN_CI:
            pytest.fail(f"real data unavailable under CI: {exc}")
        pytest.skip(str(exc))


def need_image(make: Callable[[], str]) -> str:
    """A stand-in image's tag, through need(): a failure under CI=true, a skip elsewhere."""
    tag = need(make)
    assert isinstance(tag, str)
    return tag


# The markers of the test being run: a torch venv is built only for a test marked e2e or image, so
# the quick loop (`-m "not e2e and not image"`) never builds one.
_MARKERS: set[str] = set()


def pytest_runtest_setup(item: pytest.Item) -> None:
    _MARKERS.clear()
    _MARKERS.update(mark.name for mark in item.iter_markers())


def torch_venv(version: str) -> Path:
    """A shared torch venv of the cache: read and patched by this checkout's tool, never installed into."""
    assert _MARKERS & {"e2e", "image"}, (
        "a test that uses a torch venv is marked e2e (the quick loop has none)"
    )
    venv = need(lambda: realdata.torch_venv(version))
    assert isinstance(venv, Path)
    return venv


@pytest.fixture
def shared_torch_venvs() -> Iterator[None]:
    """Tests that apply and revert on the cached torch venvs every checkout shares hold them alone
    (`pytestmark = pytest.mark.usefixtures("shared_torch_venvs")`), so two suites running at once
    never interleave their steps on one venv."""
    with realdata.cache_lock("e2e-torch-venvs"):
        yield


def need_other_python() -> Path:
    """A CPython on this machine other than the runner: a failure under CI=true, a skip elsewhere."""
    others = realdata.other_pythons()
    if others:
        return others[0]
    if realdata.IN_CI:
        pytest.fail("this machine has no CPython besides the one running the tests")
    pytest.skip("this machine has no CPython besides the one running the tests")


@pytest.fixture
def release(tmp_path: Path) -> Callable[[str], Path]:
    """release("2.10.0") -> the torch directory of a fresh copy of that real release."""

    def make(version: str) -> Path:
        return need(lambda: realdata.release_tree(version, tmp_path / f"site-{version}"))  # type: ignore[return-value]

    return make


@pytest.fixture
def run() -> Callable[..., Result]:
    """run("apply", "--torch-dir", d) through the real click entry point."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, list(args), catch_exceptions=False)

    return invoke


def snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file below root: bytes, mode and mtime (ns)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            out[str(path.relative_to(root))] = (path.read_bytes(), st.st_mode, st.st_mtime_ns)
    return out


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(autouse=True)
def _no_ambient_failpoints(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("TORCH_LAZYLOG_TEST_FAULTS", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    yield


def changed_files(
    before: dict[str, tuple[bytes, int, int]], after: dict[str, tuple[bytes, int, int]]
) -> set[str]:
    keys = set(before) | set(after)
    return {k for k in keys if before.get(k) != after.get(k)}
