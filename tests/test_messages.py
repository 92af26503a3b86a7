"""patcher.core.messages: the reinstall advice, by the tool that installed torch (moved from the old state tests)."""

from __future__ import annotations

from patcher.cli.advice import reinstall
from patcher.core.errors import Install


def test_the_reinstall_advice_uses_the_tool_that_installed_torch() -> None:
    assert (
        reinstall("/v/bin/python", Install("2.10.0"), False)
        == "/v/bin/python -m pip install --force-reinstall --no-deps torch==2.10.0"
    )
    assert reinstall("/usr/bin/python3", Install("2.10.0", installer="uv"), True) == (
        "uv pip install --python /usr/bin/python3 --reinstall --no-deps torch==2.10.0"
    )
    assert "not on the public package index" in reinstall(
        "/v/bin/python", Install("2.10.0+rocm7.2.4", vendor=True), False
    )
    assert "add --python" in reinstall(None, Install("2.10.0"), False)
