"""patcher.install.definitions: every file of patches/ read from one place, wherever the package is."""

from __future__ import annotations

import pytest

from patcher.install import definitions
from tests.docs import ROOT

SHIPPED = sorted(path.name for path in (ROOT / "patches").glob("*.json"))


@pytest.mark.parametrize("name", SHIPPED)
def test_each_file_of_patches_is_read_by_its_name(name: str) -> None:
    """The patch definition and diagnose's findings table alike (one reader, not one per caller)."""
    assert definitions.text(name) == (ROOT / "patches" / name).read_text(encoding="utf-8")


def test_the_shipped_files_are_the_definition_and_the_findings() -> None:
    assert {"diagnose_findings.json"} < set(SHIPPED) and len(SHIPPED) >= 2
