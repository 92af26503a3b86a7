"""Dockerfile.rocm and the README's snippet, built by a real Docker engine on stand-ins for the users'
base images (tests/images.py), each built once and kept by the engine between runs:
- rocm-venv: `/opt/venv` on the ROCm images' Python with real torch 2.10.0, as `rocm/pytorch` has it;
- vllm-system: the system Python with torch 2.10.0 put into its dist-packages by
  `uv pip install --system`, as vLLM's ROCm image has it (no /opt/venv).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import images, realdata
from tests.conftest import need

ROOT = Path(__file__).resolve().parent.parent
PATCH_STEP = "RUN torch-lazylog apply && torch-lazylog verify"
DEFAULT_PYTHON = "/opt/venv/bin/python"
# Done-when of the lean step (issue 16): what Dockerfile.rocm's step adds to the image.
MAX_ADDED_MB = 15

pytestmark = pytest.mark.image


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a users' image keeps the torch the server imports, and how its packages are managed."""

    name: str
    base: Callable[[], str]
    python: str  # the interpreter whose torch is patched (Dockerfile.rocm's PYTHON)
    server: str  # the server's environment: every file in it is compared with the base's
    site: str  # torch's site directory (a shell glob)
    freeze: str
    uninstall: str

    @property
    def graph(self) -> str:
        return f"{self.site}/torch/_inductor/graph.py"

    @property
    def record(self) -> str:
        return f"{self.site}/torch-*.dist-info/RECORD"

    def build_args(self) -> list[str]:
        return [] if self.python == DEFAULT_PYTHON else ["--build-arg", f"PYTHON={self.python}"]


LAYOUTS = [
    Layout(
        "rocm-venv", images.rocm_base, DEFAULT_PYTHON, "/opt/venv", "/opt/venv/lib/python3*/site-packages",
        "/opt/venv/bin/python -m pip freeze --all", "/opt/venv/bin/python -m pip uninstall -y -q torch",
    ),
    Layout(
        "vllm-system", images.system_base, "/usr/bin/python3", "/usr/local",
        "/usr/local/lib/python3*/dist-packages", "uv pip freeze --system",
        "uv pip uninstall -q --system --break-system-packages torch",
    ),
]  # fmt: skip
ROCM = LAYOUTS[0]


def _base(make: Callable[[], str]) -> str:
    tag = need(make)
    assert isinstance(tag, str)
    return tag


def _context(destination: Path) -> Path:
    return images.tool_context(destination)


def _snippet_context(destination: Path) -> Path:
    context = need(lambda: images.snippet_context(destination))
    assert isinstance(context, Path)
    return context


def _tag(name: str) -> str:
    """An image name of this run's own: runs sharing the engine never remove each other's images."""
    return f"torch-lazylog-test:{name}-{os.getpid()}"


def _build(
    context: Path,
    tag: str,
    base: str,
    dockerfile: str = "Dockerfile.rocm",
    cache: bool = False,
    args: tuple[str, ...] = (),
) -> str:
    """Build with BuildKit and plain progress; returns the build log. Without `cache` every step runs:
    the engine keeps its build cache between runs, and a test of what the steps do must see them run."""
    done = images.docker(
        "build", "--network=host", "--progress=plain", *([] if cache else ["--no-cache"]),
        "-f", str(context / dockerfile), "--build-arg", f"BASE_IMAGE={base}", *args, "-t", tag, str(context),
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
def _listing(image: str, root: str) -> dict[str, str]:
    """Every file under root: size and mtime."""
    done = _sh(image, f"find {root} -type f -printf '%p\\t%s %T@\\n'")
    assert done.returncode == 0, done.stderr
    return dict(line.split("\t", 1) for line in done.stdout.splitlines())


def _changed_but_for_the_patch(base: str, image: str, layout: Layout) -> list[str]:
    """The server environment's files that differ from the base's, other than the patch's own."""
    before, after = _listing(base, layout.server), _listing(image, layout.server)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    patch = re.compile(
        r"/torch/_inductor/graph\.py$|/torch/_inductor/__pycache__/graph\.[^/]+\.pyc$"
        r"|/torch-[^/]+\.dist-info/(RECORD|torch_lazylog\.json)$"
    )
    assert {p.rsplit("/", 1)[-1] for p in changed} >= {"graph.py", "RECORD", "torch_lazylog.json"}, changed
    return [p for p in changed if not patch.search(p)]


def _freeze(image: str, layout: Layout) -> str:
    done = _sh(image, layout.freeze)
    assert done.returncode == 0, done.stderr
    assert "torch==" in done.stdout
    return done.stdout


@pytest.fixture(scope="module", params=LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Layout, str, str, str]]:
    """(layout, base, image, build log) of Dockerfile.rocm on that layout's torch 2.10.0 stand-in."""
    layout: Layout = request.param
    base = _base(layout.base)
    context = _context(tmp_path_factory.mktemp("image") / "context")
    tag = _tag(f"rocm-{layout.name}")
    log = _build(context, tag, base, args=tuple(layout.build_args()))
    yield layout, base, tag, log
    images.docker("image", "rm", "-f", tag)


def test_dockerfile_rocm_builds_and_the_image_verifies(built: tuple[Layout, str, str, str]) -> None:
    _, _, image, log = built
    assert "Patched graph.py" in log and "matches its undo record" in log
    verify = images.docker("run", "--rm", image, "torch-lazylog", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    runtime = images.docker("run", "--rm", image, "torch-lazylog", "verify", "--runtime", timeout=1800)
    assert runtime.returncode == 0, runtime.stdout + runtime.stderr
    assert "5 checks passed" in runtime.stdout


def test_the_servers_environment_is_unchanged_but_for_the_patch(built: tuple[Layout, str, str, str]) -> None:
    layout, base, image, _ = built
    assert _freeze(image, layout) == _freeze(base, layout)
    assert _changed_but_for_the_patch(base, image, layout) == []


def test_the_tools_environment_holds_the_tool_and_its_two_dependencies_only(
    built: tuple[Layout, str, str, str],
) -> None:
    layout, base, image, _ = built
    done = _sh(
        image,
        "cd /opt/torch-lazylog && ls lib/python3*/site-packages && echo --- && ls bin && echo --- "
        "&& head -1 bin/torch-lazylog && readlink -f bin/python && readlink -f " + layout.python,
    )
    assert done.returncode == 0, done.stderr
    site, scripts, rest = done.stdout.split("---\n")
    names = {re.sub(r"-[0-9][^-]*\.dist-info$", ".dist-info", name) for name in site.split()}
    assert names == {
        "patcher", "torch_lazylog.dist-info", "click", "click.dist-info", "libcst", "libcst.dist-info",
    }, site  # fmt: skip
    assert not [s for s in scripts.split() if s.startswith(("pip", "easy_install", "wheel"))], scripts
    shebang, interpreter, target = rest.split()
    assert shebang == "#!/opt/torch-lazylog/bin/python"
    assert interpreter == target, "the tool's environment is not made with the image's own Python"
    added = images.image_mb(image) - images.image_mb(base)
    assert added <= MAX_ADDED_MB, f"the tool's step adds {added:.1f} MB"


def test_dockerfile_and_readme_install_the_dependency_ranges_of_pyproject() -> None:
    wanted = " ".join(f"'{requirement}'" for requirement in realdata.tool_dependencies())
    assert wanted in (ROOT / "Dockerfile.rocm").read_text()
    assert wanted in images.readme_snippet()


def test_revert_in_the_image_restores_the_base_bytes(built: tuple[Layout, str, str, str]) -> None:
    layout, base, image, _ = built
    hashes = f"sha256sum {layout.graph} {layout.record}"
    original = _sh(base, hashes)
    reverted = _sh(
        image,
        f"torch-lazylog revert >/dev/null && {hashes} && torch-lazylog verify >/dev/null; echo verify=$?",
    )
    assert original.returncode == 0 and reverted.returncode == 0, reverted.stderr
    lines = reverted.stdout.splitlines()
    assert lines[:-1] == original.stdout.splitlines() and len(lines) == 3
    assert lines[-1] == "verify=1"


def test_uninstalling_torch_leaves_no_file_of_it_nor_of_the_undo_record(
    built: tuple[Layout, str, str, str],
) -> None:
    """pip and uv remove what RECORD lists: after apply, the patched graph.py and the undo record."""
    layout, _, image, _ = built
    script = f"""
set -e
cd {layout.site}
record=$(echo torch-*.dist-info/RECORD)
grep -q '/torch_lazylog.json,' "$record"
cut -d, -f1 "$record" > /tmp/files
{layout.uninstall}
while read -r f; do [ ! -e "$f" ] || echo "left: $f"; done < /tmp/files
ls -d torch torch-*.dist-info 2>/dev/null | sed 's/^/left: /' || true
find / -xdev \\( -name torch_lazylog.json -o -name .torch_lazylog.json \\) | sed 's/^/left: /'
echo done
"""
    done = _sh(image, script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["done"], done.stdout


@pytest.mark.parametrize("layout", LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def test_the_readme_snippet_builds_as_printed(layout: Layout, tmp_path: Path) -> None:
    base = _base(layout.base)
    context = _snippet_context(tmp_path / "context")
    tag = _tag(f"snippet-{layout.name}")
    try:
        log = _build(context, tag, base, "Dockerfile", args=tuple(layout.build_args()))
        assert "Patched graph.py" in log
        verify = images.docker("run", "--rm", tag, "torch-lazylog", "verify")
        assert verify.returncode == 0, verify.stdout + verify.stderr
        runtime = images.docker("run", "--rm", tag, "torch-lazylog", "verify", "--runtime", timeout=1800)
        assert runtime.returncode == 0, runtime.stdout + runtime.stderr
        assert _freeze(tag, layout) == _freeze(base, layout)
        assert _changed_but_for_the_patch(base, tag, layout) == []
        added = images.image_mb(tag) - images.image_mb(base)
        assert added <= MAX_ADDED_MB, f"the snippet's step adds {added:.1f} MB"
    finally:
        images.docker("image", "rm", "-f", tag)


def test_the_build_cache_keeps_the_patch_only_while_the_tool_is_the_same(tmp_path: Path) -> None:
    base = _base(ROCM.base)
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


def test_a_natively_lazy_base_builds_and_apply_changes_nothing(tmp_path: Path) -> None:
    base = _base(lambda: images.base_image("2.13.0"))
    context = _context(tmp_path / "context")
    tag = _tag("rocm-2.13.0")
    try:
        log = _build(context, tag, base)
        assert "formats the implicit-fallback log lazily already" in log and "nothing to do" in log
        hashes = f"sha256sum {ROCM.graph} {ROCM.record}"
        assert _sh(tag, hashes).stdout == _sh(base, hashes).stdout
        assert images.docker("run", "--rm", tag, "torch-lazylog", "verify").returncode == 0
    finally:
        images.docker("image", "rm", "-f", tag)


# Every file of the torch install the tool could touch, with size and mtime: "nothing written".
_TORCH_FILES = (
    f"cd {ROCM.site} && find torch/_inductor torch-*.dist-info -type f | sort"
    " | xargs stat -c '%n %s %Y' && find torch/_inductor torch-*.dist-info -type f | sort | xargs sha256sum"
)


_VENDOR_CHECK = r"""
import base64, glob, hashlib, os
(site,) = glob.glob("/opt/venv/lib/python3*/site-packages")
text = open(site + "/torch/_inductor/graph.py", "rb").read()
(info,) = glob.glob(site + "/torch-*.dist-info")
digest = base64.urlsafe_b64encode(hashlib.sha256(text).digest()).rstrip(b"=").decode()
rows = [r for r in open(info + "/RECORD").read().splitlines() if r.startswith("torch/_inductor/graph.py,")]
print(rows == [f"torch/_inductor/graph.py,sha256={digest},{len(text)}"])
print(text.count(b"LazyString(error.operator_str, target, args, kwargs),"), text.count(b"error.operator_str(target"))
print(text.startswith(b"# "), os.path.exists(info + "/torch_lazylog.json"))
"""


def test_the_vendor_stand_in_ships_the_lazy_call_with_a_matching_record() -> None:
    """The base of the issue-15 test is what it claims, whatever the engine does with it."""
    base = _base(images.vendor_fixed_base)
    done = _sh(base, f"/opt/venv/bin/python -c '{_VENDOR_CHECK}'")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1", "0", "True", "False"]


def test_a_vendor_torch_that_ships_the_fix_builds_and_nothing_is_written(tmp_path: Path) -> None:
    """Issue 15: a vendor's 2.10.0 whose graph.py is already lazy (and edited elsewhere), RECORD
    matching it, no undo record: apply and revert write nothing, verify passes."""
    base = _base(images.vendor_fixed_base)
    pristine = _sh(base, _TORCH_FILES)
    assert pristine.returncode == 0, pristine.stderr
    tag = _tag("vendor-lazy")
    try:
        _build(_context(tmp_path / "context"), tag, base)  # apply && verify exit 0
        assert _sh(tag, _TORCH_FILES).stdout == pristine.stdout
        done = _sh(tag, f"torch-lazylog revert && torch-lazylog verify && {_TORCH_FILES}")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.endswith(pristine.stdout)
    finally:
        images.docker("image", "rm", "-f", tag)
