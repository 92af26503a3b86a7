"""Dockerfile.rocm, the README's block (BuildKit) and the classic builder's form (docs/images.md),
built by a real Docker engine on stand-ins for the users' base images (tests/images.py), each built
once and kept by the engine between runs, the tool taken from the tool image the README makes:
- rocm-venv: `/opt/venv` on the ROCm images' Python with real torch 2.10.0, as `rocm/pytorch` has it;
- vllm-system: the system Python with torch 2.10.0 put into its dist-packages by
  `uv pip install --system`, as vLLM's ROCm image has it (no /opt/venv);
- vendor-eager: rocm-venv with a vendor's build of graph.py, which only libcst reads.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import images
from tests.conftest import need
from tests.docs import block, command
from tests.image_checks import (
    COMMAND,
    LAYOUTS,
    MAX_BEYOND_PATCH_MB,
    ROCM,
    TORCH,
    Layout,
    assert_footprint,
    build,
    commands,
    sh,
)

ROOT = Path(__file__).resolve().parent.parent
# Dockerfile.rocm's patch step, the README's second line.
PATCH_STEP = (
    "RUN --mount=type=bind,from=torch-lazylog,target=/mnt"
    " /mnt/torch-lazylog apply && /mnt/torch-lazylog verify"
)
pytestmark = pytest.mark.image


def _base(make: Callable[[], str]) -> str:
    tag = need(make)
    assert isinstance(tag, str)
    return tag


def _context(destination: Path) -> Path:
    return images.tool_context(destination)


def classic_form(layout: Layout) -> str:
    """docs/images.md's form for the classic builder: the one with libcst for a vendor's build."""
    from tests.docs import body

    return body("classic-step-vendor") if layout.vendor else body("classic-step")


def _tag(name: str) -> str:
    """An image name of this run's own: runs sharing the engine never remove each other's images."""
    return f"torch-lazylog-test:{name}-{os.getpid()}"


def _step_cached(log: str, step: str) -> bool:
    def words(line: str) -> list[str]:
        return line.replace("\\", " ").split()

    ids = [m[1] for m in re.finditer(r"^#(\d+) \[[^\]]*\] (.*)$", log, re.M) if words(m[2]) == words(step)]
    assert ids, f"no step {step!r} in the build log"
    return any(re.search(rf"^#{i} CACHED$", log, re.M) for i in ids)


def _freeze(image: str, layout: Layout) -> str:
    done = sh(image, layout.freeze)
    assert done.returncode == 0, done.stderr
    assert "torch==" in done.stdout
    return done.stdout


@dataclasses.dataclass(frozen=True)
class Built:
    layout: Layout
    kind: str  # "Dockerfile.rocm", "snippet" (the README's block) or "classic" (the classic builder's)
    base: str
    image: str
    log: str


KINDS = ("Dockerfile.rocm", "snippet", "classic")
_BUILT: dict[tuple[str, str], Built] = {}


@pytest.fixture(scope="module", autouse=True)
def _remove_the_built_images() -> Iterator[None]:
    yield
    for built in _BUILT.values():
        images.docker("image", "rm", "-f", built.image)
    _BUILT.clear()


def _image(layout: Layout, kind: str, factory: pytest.TempPathFactory) -> Built:
    """The image of that step on that layout's torch 2.10.0 stand-in, built once for this module."""
    if (layout.name, kind) not in _BUILT:
        base = _base(layout.base)
        root = factory.mktemp(f"{kind}-{layout.name}") / "context"
        tag = _tag(f"{kind.split('.')[0].lower()}-{layout.name}")
        if kind == "Dockerfile.rocm":
            log = build(_context(root), tag, base)
        else:
            snippet = classic_form(layout) if kind == "classic" else None
            with images.tool_named():
                log = build(
                    images.snippet_context(root, snippet), tag, base, "Dockerfile", classic=kind == "classic"
                )
        _BUILT[layout.name, kind] = Built(layout, kind, base, tag, log)
    return _BUILT[layout.name, kind]


@pytest.fixture(scope="module", params=LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Dockerfile.rocm on each layout."""
    return _image(request.param, "Dockerfile.rocm", tmp_path_factory)


STEPS = [(layout, kind) for layout in LAYOUTS for kind in KINDS]


@pytest.fixture(scope="module", params=STEPS, ids=[f"{kind}-{layout.name}" for layout, kind in STEPS])
def stepped(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Dockerfile.rocm and the README's snippet, each on each layout."""
    layout, kind = request.param
    return _image(layout, kind, tmp_path_factory)


def test_the_image_verifies(stepped: Built) -> None:
    assert "Patched graph.py" in stepped.log and "matches its undo record" in stepped.log
    verify = images.docker("run", "--rm", stepped.image, "torch-lazylog", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "formats the implicit-fallback log lazily" in verify.stdout
    if stepped.kind != "snippet":
        return  # the runtime proof compiles through Inductor: once a layout, on the README's block
    shown = command("ci-runtime", {"IMAGE": stepped.image})  # the README's CI line, as printed
    assert shown[0] == "docker"
    runtime = images.docker(*shown[1:], timeout=1800)
    assert runtime.returncode == 0, runtime.stdout + runtime.stderr
    assert "5 checks passed" in runtime.stdout


def test_the_step_adds_one_command_and_every_other_name_resolves_as_in_the_base(stepped: Built) -> None:
    before, after = commands(stepped.base), commands(stepped.image)
    assert {"python3", "sh"} <= before.keys(), "the stand-in has no python3 on PATH"
    assert after == {**before, "torch-lazylog": f"{COMMAND} {COMMAND}"}


def test_the_images_own_python_imports_the_same_torch_after_the_step(stepped: Built) -> None:
    """What the image's users run: `python3 -c 'import torch'`, and `python` where the base has one."""
    names = ["python3"] + (["python"] if "python" in commands(stepped.base) else [])
    for name in names:
        before, after = (sh(image, f'{name} -c "{TORCH}"') for image in (stepped.base, stepped.image))
        assert before.returncode == 0, f"{name} in the base: {before.stderr}"
        assert after.returncode == 0, f"{name} after the step: {after.stderr}"
        assert after.stdout == before.stdout and "2.10.0" in after.stdout


def test_the_step_changes_exactly_what_the_readme_lists(stepped: Built) -> None:
    assert_footprint(stepped.base, stepped.image)


# What a container of the image starts with. The rest of the configuration is the builder's record
# (the classic builder and BuildKit write `Image` differently).
_RUN_CONFIG = ("Cmd", "Entrypoint", "WorkingDir", "User", "Shell", "ExposedPorts", "Volumes", "StopSignal")


def _config(image: str) -> tuple[list[str], dict[str, object]]:
    """The image's environment variables, and the rest of what a container of it starts with."""
    done = images.docker("image", "inspect", "--format", "{{json .Config}}", image, timeout=60)
    assert done.returncode == 0, done.stderr
    config: dict[str, object] = json.loads(done.stdout)
    env = config.get("Env") or []
    assert isinstance(env, list)
    # A container of an image that sets no PATH gets the engine's default; BuildKit writes it down.
    if not any(str(e).startswith("PATH=") for e in env):
        env.insert(0, f"PATH={images.DEFAULT_PATH}")
    return [str(e) for e in env], {key: config.get(key) for key in _RUN_CONFIG}


def test_the_image_configuration_is_the_bases(stepped: Built) -> None:
    assert _config(stepped.image) == _config(stepped.base)


def test_the_servers_environment_is_unchanged_but_for_the_patch(stepped: Built) -> None:
    assert _freeze(stepped.image, stepped.layout) == _freeze(stepped.base, stepped.layout)


def _added_beyond_the_patch_mb(built: Built) -> float:
    return (
        images.image_mb(built.image)
        - images.image_mb(built.base)
        - images.patch_bytes(built.image, built.layout.site) / 1e6
    )


def test_the_image_grows_by_the_patch_and_the_file(stepped: Built) -> None:
    """At most the patch plus 1 MB; the classic builder's vendor form, plus the libcst layer the docs
    state (and no libcst in the image's filesystem, as on every image here)."""
    beyond = _added_beyond_the_patch_mb(stepped)
    size = sh(stepped.image, f"wc -c < {COMMAND}")
    assert size.returncode == 0 and int(size.stdout) < MAX_BEYOND_PATCH_MB * 1e6 / 2
    found = sh(
        stepped.image,
        "find / -xdev -name 'libcst*' | head -3; python3 -c 'import libcst' 2>/dev/null || echo none",
    )
    assert found.stdout == "none\n", found.stdout
    if stepped.kind == "classic" and stepped.layout.vendor:
        stated = re.fullmatch(r"about (\d+) MB", block("classic-libs-mb"))
        assert stated, block("classic-libs-mb")
        assert abs(beyond - int(stated[1])) <= 0.1 * beyond, f"{beyond:.1f} MB beyond the patch"
    else:
        assert beyond <= MAX_BEYOND_PATCH_MB, f"the step adds {beyond:.2f} MB beyond the patch"


def test_revert_in_the_image_restores_the_base_bytes(built: Built) -> None:
    """revert gives back the base's graph.py and RECORD; verify then says eager, or, for a vendor's
    build (read with libcst, which the image does not keep), says in one sentence how to check it."""
    layout, base, image = built.layout, built.base, built.image
    hashes = f"sha256sum {layout.graph} {layout.record}"
    original = sh(base, hashes)
    reverted = sh(
        image,
        f"torch-lazylog revert >/dev/null && {hashes} && torch-lazylog verify >/dev/null 2>/tmp/err;"
        " echo verify=$? && cat /tmp/err",
    )
    assert original.returncode == 0 and reverted.returncode == 0, reverted.stderr
    lines = reverted.stdout.splitlines()
    assert lines[:2] == original.stdout.splitlines() and len(original.stdout.splitlines()) == 2
    if layout.vendor:
        assert lines[2] == "verify=4" and "run the file from the tool image" in lines[3], lines
    else:
        assert lines[2:] == ["verify=1"], lines


def test_uninstalling_torch_leaves_no_file_of_it_nor_of_the_undo_record(built: Built) -> None:
    """pip and uv remove what RECORD lists: after apply, the patched graph.py and the undo record."""
    layout, image = built.layout, built.image
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
    done = sh(image, script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["done"], done.stdout


def test_the_build_cache_keeps_the_patch_only_while_the_tool_is_the_same(tmp_path: Path) -> None:
    base = _base(ROCM.base)
    context = _context(tmp_path / "context")
    tag = _tag("cache")
    try:
        build(context, tag, base)
        assert _step_cached(build(context, tag, base, cache=True), PATCH_STEP), (
            "a rebuild of the same context reran the patch"
        )
        definition = context / "patches" / "lazy_implicit_fallback.json"
        # Edits of this run's own: the engine caches by content, across runs of the same commit.
        edit = uuid.uuid4().hex
        definition.write_text(definition.read_text().replace('"summary": "', f'"summary": "(edited {edit}) '))
        assert not _step_cached(build(context, tag, base, cache=True), PATCH_STEP), (
            "a new patches/ kept the old patch layer"
        )
        init = context / "patcher" / "__init__.py"
        init.write_text(init.read_text() + f"\n# a change to the tool, {edit}\n")
        assert not _step_cached(build(context, tag, base, cache=True), PATCH_STEP), (
            "a new tool kept the old patch layer"
        )
    finally:
        images.docker("image", "rm", "-f", tag)


def test_a_natively_lazy_base_builds_and_apply_changes_nothing(tmp_path: Path) -> None:
    base = _base(lambda: images.venv_on_path(images.base_image("2.13.0"), "2.13.0"))
    context = _context(tmp_path / "context")
    tag = _tag("rocm-2.13.0")
    try:
        log = build(context, tag, base)
        assert "formats the implicit-fallback log lazily already" in log and "nothing to do" in log
        hashes = f"sha256sum {ROCM.graph} {ROCM.record}"
        assert sh(tag, hashes).stdout == sh(base, hashes).stdout
        assert images.docker("run", "--rm", tag, "torch-lazylog", "verify").returncode == 0
    finally:
        images.docker("image", "rm", "-f", tag)


# Every file of the torch install the tool could touch, with size and mtime: "nothing written".
TORCH_FILES = (
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
    done = sh(base, f"/opt/venv/bin/python -c '{_VENDOR_CHECK}'")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1", "0", "True", "False"]


def test_a_vendor_torch_that_ships_the_fix_builds_and_nothing_is_written(tmp_path: Path) -> None:
    """Issue 15: a vendor's 2.10.0 whose graph.py is already lazy (and edited elsewhere), RECORD
    matching it, no undo record: apply and verify (from the tool image, libcst beside the file) write
    nothing; revert writes nothing. The image's own command, without libcst, says in one sentence
    how to check it instead of a verdict it cannot make."""
    base = _base(images.vendor_fixed_base)
    pristine = sh(base, TORCH_FILES)
    assert pristine.returncode == 0, pristine.stderr
    tag = _tag("vendor-lazy")
    try:
        build(_context(tmp_path / "context"), tag, base)  # apply && verify exit 0
        assert sh(tag, TORCH_FILES).stdout == pristine.stdout
        with images.tool_volume() as volume:
            done = images.docker(
                "run", "--rm", "-v", f"{volume}:/mnt:ro", tag, "sh", "-c",
                f"python3 -B /mnt/torch-lazylog revert && python3 -B /mnt/torch-lazylog verify && {TORCH_FILES}",
                timeout=600,
            )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.endswith(pristine.stdout)
        alone = images.docker("run", "--rm", tag, "torch-lazylog", "verify", timeout=600)
        assert alone.returncode == 4 and alone.stdout == "", alone.stdout
        assert alone.stderr.count("\n") == 1 and "run the file from the tool image" in alone.stderr, (
            alone.stderr
        )
    finally:
        images.docker("image", "rm", "-f", tag)


def test_the_tool_image_holds_the_file_libcst_for_each_python_and_copies_them_out() -> None:
    """The README's tool image: the single file, libcst for Pythons 3.10 to 3.13, busybox and the
    licenses, at the size the README states; run, it copies the file and libcst into /out."""
    tool = _base(images.tool_image)
    stated = re.fullmatch(r"about (\d+) MB", block("tool-image-mb"))
    assert stated, block("tool-image-mb")
    assert round(images.image_mb(tool) / 10) * 10 == int(stated[1]), f"{images.image_mb(tool):.1f} MB"
    inspect = images.docker("image", "inspect", "--format", "{{json .Config.Cmd}}", tool, timeout=60)
    assert json.loads(inspect.stdout) == [
        "/bin/busybox",
        "cp",
        "-a",
        "/torch-lazylog",
        "/torch-lazylog-libs",
        "/out/",
    ]
    volume = f"torch-lazylog-test-tool-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        copied = images.docker("run", "--rm", "-v", f"{volume}:/out", tool, timeout=300)
        assert copied.returncode == 0, copied.stderr
        listing = images.docker(
            "run", "--rm", "-v", f"{volume}:/out:ro", "--entrypoint", "/bin/busybox", tool, "sh", "-c",
            "cd /out && ls -d torch-lazylog torch-lazylog-libs/*/libcst && head -c 30 torch-lazylog | head -1"
            " && ls /licenses",
            timeout=300,
        )  # fmt: skip
    finally:
        images.docker("volume", "rm", "-f", volume, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.split("\n") == [
        "torch-lazylog",
        *[f"torch-lazylog-libs/3.{minor}/libcst" for minor in (10, 11, 12, 13)],
        "#!/usr/bin/env -S python3 -B",
        "busybox",
        "torch-lazylog",
        "",
    ], listing.stdout
