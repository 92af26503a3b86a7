"""Fixtures of the core tests: the two-release table made from tests/core/world.py's graph.py."""

from __future__ import annotations

import pytest

from patcher.core.spec import PatchSpec
from patcher.install import definitions as spec_module
from patcher.install.fingerprint import build_releases
from tests.core import world


@pytest.fixture(scope="session")
def spec() -> PatchSpec:
    """The shipped patch definition with a table of two releases: 9.0.0 (eager) and 9.1.0 (lazy)."""
    real = spec_module.load()
    assert real.id == world.PATCH_ID
    return real._replace(releases=build_releases([("9.0.0", world.SOURCE), ("9.1.0", world.NATIVE)], real))
