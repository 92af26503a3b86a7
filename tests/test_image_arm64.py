"""The tool image for linux/arm64 (the CUDA images of GH200 and GB200 hosts), as the release pushes it:
Dockerfile.rocm's tool stage built by BuildKit with --platform linux/arm64 on an arm64 base, and run on
that base under qemu-user-static: its libcst loads, and its file patches, verifies and reverts a real
release's graph.py and dist-info, and a vendor's build of it, which only libcst reads."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import images
from tests.conftest import need_image

pytestmark = pytest.mark.image

# In the arm64 base: the machine, libcst imported from the tool's directory for this Python, then each
# command of the file on the release (/release) and on the vendor's build (/vendor): its exit code, and
# verify's JSON on one line.
SCRIPT = r"""
python3 -c 'import platform, sys
sys.path.insert(0, "/tool/torch-lazylog-libs/%d.%d" % sys.version_info[:2])
import libcst
print("machine", platform.machine(), "libcst", libcst.parse_module("x = 1\n").code.strip())'
for site in release vendor; do
    for step in "verify --json" apply "verify --json" revert "verify --json"; do
        /tool/torch-lazylog $step --torch-dir /$site/torch >/tmp/out 2>/tmp/err
        code=$?
        case $step in verify*) json=$(tr -d '\n' </tmp/out) ;; *) json= ;; esac
        echo "$site $step: exit $code $json"
    done
done
"""


def _files(site: Path) -> dict[str, bytes]:
    """graph.py and every file of torch's dist-info: what the patch and its undo record touch."""
    paths = [site / "torch" / "_inductor" / "graph.py", *sorted(site.glob("torch-*.dist-info/*"))]
    return {str(p.relative_to(site)): p.read_bytes() for p in paths if p.is_file()}


def test_the_arm64_tool_image_patches_verifies_and_reverts_on_an_arm64_base(
    release: Callable[[str], Path],
) -> None:
    tool = need_image(images.arm64_tool_image)
    base = need_image(images.arm64_base)
    for image in (tool, base):
        arch = images.docker("image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", image, timeout=60)
        assert arch.stdout.strip() == "linux/arm64", (image, arch.stdout, arch.stderr)
    sites = {}
    for name in ("release", "vendor"):
        site = release("2.10.0").parent
        sites[name] = site.rename(site.parent / name)
    graph = sites["vendor"] / "torch" / "_inductor" / "graph.py"
    graph.write_bytes(graph.read_bytes() + b"# a vendor's line\n")  # no release's bytes: libcst reads it
    before = {name: _files(site) for name, site in sites.items()}

    volume = f"torch-lazylog-test-arm64-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        # The tool image's own command (its arm64 busybox) copies the file and libcst out.
        copied = images.docker(
            "run", "--rm", "--platform", "linux/arm64", "-v", f"{volume}:/out", tool, timeout=600
        )
        assert copied.returncode == 0, copied.stderr
        mounts = [arg for name, site in sites.items() for arg in ("-v", f"{site}:/{name}")]
        done = images.docker(
            "run", "--rm", "--platform", "linux/arm64", "-v", f"{volume}:/tool:ro", *mounts, base,
            "sh", "-c", SCRIPT, timeout=1800,
        )  # fmt: skip
    finally:
        images.docker("volume", "rm", "-f", volume, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.split("\n")[:-1]
    assert lines[0] == "machine aarch64 libcst x = 1", lines
    results: dict[str, list[tuple[str, int, str]]] = {}
    for line in lines[1:]:
        match = re.fullmatch(r"(\w+) ([\w -]+): exit (\d+) (.*)", line)
        assert match, line
        results.setdefault(match[1], []).append((match[2], int(match[3]), match[4]))
    for name in ("release", "vendor"):
        steps = results[name]
        assert [(step, code) for step, code, _ in steps] == [
            ("verify --json", 1),
            ("apply", 0),
            ("verify --json", 0),
            ("revert", 0),
            ("verify --json", 1),
        ], steps
        first, patched, last = (json.loads(steps[i][2]) for i in (0, 2, 4))
        assert (first["state"], patched["state"], last["state"]) == ("pristine", "patched", "pristine")
        assert first["match"] == ("exact" if name == "release" else "site"), first
    # Reverted: graph.py and the dist-info hold the bytes they had, the undo record gone.
    assert {name: _files(site) for name, site in sites.items()} == before
