"""What the image tests judge a built image by, shared by tests/test_image.py and
tests/test_image_layouts.py: the stand-ins' layouts, a build, a shell in a container, every command
on PATH, every path of the root filesystem against the docs' footprint list."""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests import images
from tests.docs import block

COMMAND = "/usr/local/bin/torch-lazylog"
# What the step may add beyond the files the patch rewrites or adds (issue 34: the file, about 230 KB).
MAX_BEYOND_PATCH_MB = 1.0


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a users' image keeps the torch the server imports, and how its packages are managed."""

    name: str
    base: Callable[[], str]
    python: str  # the interpreter whose torch is patched: the image's python3
    server: str  # the server's environment: every file in it is compared with the base's
    site: str  # torch's site directory (a shell glob)
    freeze: str
    uninstall: str
    vendor: bool = False  # graph.py is no release's bytes: apply reads it with libcst

    @property
    def graph(self) -> str:
        return f"{self.site}/torch/_inductor/graph.py"

    @property
    def record(self) -> str:
        return f"{self.site}/torch-*.dist-info/RECORD"


_VENV = ("/opt/venv/bin/python", "/opt/venv", "/opt/venv/lib/python3*/site-packages",
         "/opt/venv/bin/python -m pip freeze --all", "/opt/venv/bin/python -m pip uninstall -y -q torch")  # fmt: skip
LAYOUTS = [
    Layout("rocm-venv", images.rocm_base, *_VENV),
    Layout(
        "vllm-system", images.system_base, "/usr/bin/python3", "/usr/local",
        "/usr/local/lib/python3*/dist-packages", "uv pip freeze --system",
        "uv pip uninstall -q --system --break-system-packages torch",
    ),
    Layout("vendor-eager", images.vendor_eager_base, *_VENV, vendor=True),
]  # fmt: skip
ROCM = LAYOUTS[0]


def build(
    context: Path,
    tag: str,
    base: str,
    dockerfile: str = "Dockerfile.rocm",
    cache: bool = False,
    args: tuple[str, ...] = (),
    classic: bool = False,
) -> str:
    """Build with BuildKit and plain progress (or the classic builder); returns the build log. Without
    `cache` every step runs: the engine keeps its build cache between runs, and a test of what the
    steps do must see them run."""
    done = images.docker(
        "build", "--network=host", *([] if classic else ["--progress=plain"]), *([] if cache else ["--no-cache"]),
        "-f", str(context / dockerfile), "--build-arg", f"BASE_IMAGE={base}", *args, "-t", tag, str(context),
        env={"DOCKER_BUILDKIT": "0"} if classic else images.BUILDKIT,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done.stdout + done.stderr


def sh(image: str, script: str) -> subprocess.CompletedProcess[str]:
    return images.docker("run", "--rm", "--network=host", image, "sh", "-c", script, timeout=1800)


# Every command a shell finds on PATH, the first of each name as the shell takes it: name, where it
# was found, the file that resolves to. Both count: a venv's `python3` and another venv's resolve to
# the same interpreter and run differently (each finds its environment from where it was started).
_ON_PATH = r"""
seen=' '
IFS=:
for d in $PATH; do
  for f in "$d"/*; do
    n=${f##*/}
    [ -f "$f" ] && [ -x "$f" ] || continue
    case "$seen" in *" $n "*) continue ;; esac
    seen="$seen$n "
    printf '%s\t%s %s\n' "$n" "$f" "$(readlink -f "$f")"
  done
done
"""


@functools.cache
def commands(image: str) -> dict[str, str]:
    done = sh(image, _ON_PATH)
    assert done.returncode == 0, done.stderr
    return dict(line.split("\t", 1) for line in done.stdout.splitlines())


TORCH = "import sys, torch; print(torch.__version__, torch.__file__, sys.executable)"


# Every path of the image's root filesystem: kind, mode, owner, size, mtime, ctime, link target. A file
# of a lower layer keeps its inode's times in every container of every image over that layer; a file
# the step wrote is new in the step's layers. A directory's times change with its entries: only its
# kind, mode and owner count.
_TREE = (
    r"find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o "
    r"-printf '%y %m %U %G %s %T@ %C@ %l\t%p\n'"
)
# Made by the container runtime in every container, not by the image.
_RUNTIME = {
    "/",
    "/.dockerenv",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/etc/mtab",
    "/proc",
    "/sys",
    "/dev",
}


@functools.cache
def tree(image: str) -> dict[str, str]:
    done = sh(image, _TREE)
    assert done.returncode == 0, done.stderr
    tree = {}
    for line in done.stdout.splitlines():
        attributes, path = line.split("\t", 1)
        fields = attributes.split(" ")
        tree[path] = " ".join(fields[:4] if fields[0] == "d" else fields)
    return tree


def readme_footprint() -> list[str]:
    """The documented list of what the step changes: the first code span of each item."""
    return re.findall(r"^- `([^`]+)`", block("image-footprint"), re.M)


def assert_footprint(base: str, image: str) -> None:
    """`image` differs from `base` in exactly the paths the README's footprint list names."""
    listed = readme_footprint()
    assert COMMAND in listed, listed
    (site,) = {p.rsplit("/torch/", 1)[0] for p in tree(base) if p.endswith("/torch/_inductor/graph.py")}
    patterns = [p if p.startswith("/") else f"{site}/{p}" for p in listed]
    before, after = tree(base), tree(image)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    outside = [p for p in changed if p not in _RUNTIME]
    assert [p for p in outside if not any(fnmatch.fnmatch(p, pattern) for pattern in patterns)] == []
    for pattern in patterns:
        was = any(fnmatch.fnmatch(p, pattern) for p in before)
        expected = was if "__pycache__" in pattern else True  # a pyc is rebuilt where the base has one
        assert any(fnmatch.fnmatch(p, pattern) for p in outside) == expected, (pattern, outside)
