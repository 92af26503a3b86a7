"""The image step where people put it (issues 27 and 34, docs/image-layouts.md), built by a real
Docker engine on the stand-ins of tests/images.py: over its own output (the same step again, from
another version of the tool), over an image made with the earlier version's form (its own tool
environment, /opt/torch-lazylog), after torch was reinstalled over it (pip, uv), on a base whose last
`USER` is not root, and in a builder stage whose /opt/venv is copied into a runtime stage. Each image
is also judged by what its users run: `torch-lazylog verify` exits 0, `python3 -c 'import torch'`
loads the same torch as the base, and every name on PATH resolves as in the base (but
`torch-lazylog`, the one command the step adds).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import image_checks as checks
from tests import images, realdata
from tests.conftest import need_image
from tests.helpers import checkout_copy, readme_snippet

pytestmark = pytest.mark.image

# A module only another version of the tool has: a step over its image must not keep it.
EARLIER = "_an_earlier_version_only.py"
COMMAND = checks.COMMAND
UNDO_RECORDS = "find / -xdev -name torch_lazylog.json"
EARLIER_FORM = Path(__file__).resolve().parent / "data" / "earlier_step.dockerfile"
_MADE: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _remove_the_built_images() -> Iterator[None]:
    yield
    for tag in reversed(_MADE):
        images.docker("image", "rm", "-f", tag)


def _tag(name: str) -> str:
    tag = f"torch-lazylog-test:layouts-{name}-{os.getpid()}"
    _MADE.append(tag)
    return tag


def _step(
    kind: str,
    base: str,
    name: str,
    work: Path,
    earlier: bool = False,
    cache: bool = False,
) -> tuple[str, str]:
    """The step's image on `base` and its build log: Dockerfile.rocm's, or the README's block (the
    tool image under its README name), from this tool or, with `earlier`, another version of it. With
    `cache`, the engine may reuse an earlier run's build of the same inputs: only for an image whose
    build log is not what is tested."""
    tag = _tag(name)
    if kind == "Dockerfile.rocm":
        context = images.tool_context(work / "source")
        if earlier:
            (context / "patcher" / EARLIER).write_text('"""Only in another version of torch-lazylog."""\n')
        return tag, checks.build(context, tag, base, cache=cache)
    with images.tool_named(images.tool_image(EARLIER) if earlier else None):
        return tag, checks.build(
            images.snippet_context(work / "snippet"), tag, base, "Dockerfile", cache=cache
        )


def assert_users_see_the_base(base: str, image: str) -> None:
    """What the image's users run: `torch-lazylog verify` exits 0, every name on PATH as in the base
    but the step's one command, and `python3` (and `python`, where the base has it) imports the same
    torch."""
    code, output = _run(image, "torch-lazylog", "verify")
    assert code == 0 and "matches its undo record" in output, output
    before, after = checks.commands(base), checks.commands(image)
    assert {"python3", "sh"} <= before.keys()
    assert after == {**before, "torch-lazylog": f"{COMMAND} {COMMAND}"}
    for name in ["python3"] + (["python"] if "python" in before else []):
        was, now = (checks.sh(i, f'{name} -c "{checks.TORCH}"') for i in (base, image))
        assert was.returncode == 0 and now.returncode == 0, was.stderr + now.stderr
        assert now.stdout == was.stdout and images.ROCM_TORCH in now.stdout


def _run(image: str, *command: str, user: str | None = None) -> tuple[int, str]:
    done = images.docker("run", "--rm", *(["--user", user] if user else []), image, *command, timeout=1800)
    return done.returncode, done.stdout + done.stderr


def _hashes(layout: checks.Layout) -> str:
    return f"sha256sum {layout.graph} {layout.record} {layout.site}/torch-*.dist-info/torch_lazylog.json"


_EARLIER_IN_COMMAND = (
    "python3 -c 'import sys, zipfile; "
    f"print(sum(n.endswith(sys.argv[1]) for n in zipfile.ZipFile(sys.argv[2]).namelist()))' {EARLIER} {COMMAND}"
)


def _grew_mb(before: str, after: str) -> float:
    return images.image_mb(after) - images.image_mb(before)


@pytest.mark.parametrize("kind", ["Dockerfile.rocm", "snippet"])
def test_the_step_built_again_over_its_own_output(kind: str, tmp_path: Path) -> None:
    """The step over an image another version of the tool made: the command replaced whole, torch
    already lazy (nothing to do), the footprint of one step, the file's size added again and no more."""
    base, layout = need_image(checks.ROCM.base), checks.ROCM
    once, _ = _step(kind, base, f"once-{kind}", tmp_path / "once", earlier=True, cache=True)
    twice, log = _step(kind, once, f"twice-{kind}", tmp_path / "twice")
    assert checks.sh(once, _EARLIER_IN_COMMAND).stdout == "1\n", "the first image lacks the other tool"
    assert checks.sh(twice, _EARLIER_IN_COMMAND).stdout == "0\n", "the other tool's command stayed"
    assert "formats the implicit-fallback log lazily already" in log and "nothing to do" in log
    hashes = checks.sh(once, _hashes(layout))
    assert hashes.returncode == 0 and len(hashes.stdout.splitlines()) == 3, hashes.stderr
    assert checks.sh(twice, _hashes(layout)).stdout == hashes.stdout
    checks.assert_footprint(base, twice)
    again = _grew_mb(once, twice)
    assert again <= checks.MAX_BEYOND_PATCH_MB, f"the step again adds {again:.2f} MB"
    assert_users_see_the_base(base, twice)


def test_the_step_over_an_image_made_with_the_earlier_form(tmp_path: Path) -> None:
    """The earlier README block (its own environment in /opt/torch-lazylog, a link on PATH, a
    variable), then the README's block: the link replaced by the file, torch lazy already, the
    earlier environment left as it was (its layer cannot be taken back), and only the file added."""
    base, layout = need_image(checks.ROCM.base), checks.ROCM
    context = tmp_path / "earlier"
    (context / "dist").mkdir(parents=True)
    source = checkout_copy(tmp_path / "checkout")
    realdata.pip(["wheel", "--quiet", "--no-deps", "-w", str(context / "dist"), str(source)], "setuptools")
    (context / "Dockerfile").write_text(f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\n{EARLIER_FORM.read_text()}")
    earlier = _tag("earlier-form")
    checks.build(context, earlier, base, "Dockerfile", cache=True)
    link = checks.sh(earlier, f"readlink {COMMAND}")
    assert link.stdout == "/opt/torch-lazylog/bin/torch-lazylog\n", "the earlier form made no link"
    now, log = _step("snippet", earlier, "over-earlier-form", tmp_path / "now")
    assert "formats the implicit-fallback log lazily already" in log and "nothing to do" in log
    assert checks.sh(now, f"[ -f {COMMAND} ] && [ ! -L {COMMAND} ] && echo file").stdout == "file\n"
    assert checks.sh(now, _hashes(layout)).stdout == checks.sh(earlier, _hashes(layout)).stdout
    tree = "find /opt/torch-lazylog -printf '%p %s %T@\\n' | sort | sha256sum"
    assert checks.sh(now, tree).stdout == checks.sh(earlier, tree).stdout
    again = _grew_mb(earlier, now)
    assert again <= checks.MAX_BEYOND_PATCH_MB, f"the step over the earlier form adds {again:.2f} MB"
    code, output = _run(now, "torch-lazylog", "verify")
    assert code == 0 and "matches its undo record" in output, output


# How each layout reinstalls torch (the wheels from the loopback cache of tests/images.py).
_REINSTALL = {
    "rocm-venv": "",  # the documented block's own line (pip)
    "vllm-system": (
        "ARG WHEELS\nRUN uv pip install --system --break-system-packages --reinstall --no-deps --no-index"
        f' --find-links "${{WHEELS}}torch-{images.ROCM_TORCH}/" torch=={images.ROCM_TORCH}\n'
    ),
}


def _reinstall_dockerfile(layout: checks.Layout, base: str) -> str:
    """docs/image-layouts.md's derived image up to its step, on `base`: torch reinstalled."""
    block = images.documented_dockerfile("image-layout-derived")
    derived = block[: block.index(readme_snippet())]
    if _REINSTALL[layout.name]:
        lines = [line for line in derived.splitlines(keepends=True) if not line.startswith("RUN ")]
        derived = "".join(lines) + _REINSTALL[layout.name]
    else:  # pip reaches the served wheels through its own variables (a build arg is one in RUN)
        served = f"ARG WHEELS\nARG PIP_NO_INDEX=1\nARG PIP_FIND_LINKS=${{WHEELS}}torch-{images.ROCM_TORCH}/\n"
        derived = derived.replace("FROM ${BASE_IMAGE}\n", "FROM ${BASE_IMAGE}\n" + served)
    runs = [line for line in derived.splitlines() if line.startswith("RUN ")]
    assert derived.count("FROM ${BASE_IMAGE}") == 1 and len(runs) == 1 and "reinstall" in runs[0], derived
    return derived


@pytest.mark.parametrize("layout", checks.LAYOUTS[:2], ids=[layout.name for layout in checks.LAYOUTS[:2]])
def test_torch_reinstalled_over_the_step_is_patched_again_with_a_fresh_undo_record(
    layout: checks.Layout, tmp_path: Path
) -> None:
    base = need_image(layout.base)
    once, _ = _step("Dockerfile.rocm", base, f"reinstall-once-{layout.name}", tmp_path / "once", cache=True)
    context = tmp_path / "reinstall"
    context.mkdir()
    (context / "Dockerfile").write_text(_reinstall_dockerfile(layout, base))
    reinstalled = _tag(f"reinstalled-{layout.name}")
    done = images.build_with_wheels(context, reinstalled, ("--build-arg", f"BASE_IMAGE={once}"))
    assert done.returncode == 0, done.stderr[-3000:]
    # torch's own files again: verify says eager (exit 1), never lazy; pip and uv took the record away
    code, output = _run(reinstalled, "torch-lazylog", "verify")
    assert code == 1, output
    assert "formats the implicit-fallback log eagerly" in output and "lazily" not in output, output
    assert checks.sh(reinstalled, UNDO_RECORDS).stdout == ""
    pristine = checks.sh(reinstalled, f"sha256sum {layout.graph} {layout.record}")
    # graph.py is torch's own again (RECORD is the installer's new one: its rows may differ)
    graph = f"sha256sum {layout.graph}"
    assert checks.sh(reinstalled, graph).stdout == checks.sh(base, graph).stdout != ""
    again, log = _step("Dockerfile.rocm", reinstalled, f"again-{layout.name}", tmp_path / "again")
    assert "Patched graph.py" in log, log[-3000:]
    code, output = _run(again, "torch-lazylog", "verify")
    assert code == 0 and "matches its undo record" in output, output
    assert len(checks.sh(again, UNDO_RECORDS).stdout.splitlines()) == 1
    # the undo record describes the reinstalled torch: revert gives back its bytes
    reverted = checks.sh(
        again, f"torch-lazylog revert >/dev/null && sha256sum {layout.graph} {layout.record}"
    )
    assert reverted.returncode == 0 and reverted.stdout == pristine.stdout, reverted.stderr
    assert_users_see_the_base(base, again)


def _documented_build(name: str, base: str, work: Path, args: tuple[str, ...] = ()) -> tuple[str, str]:
    """docs/image-layouts.md's block `name`, the README's step in it, built on `base`."""
    context = images.snippet_context(work / "context", "")
    (context / "Dockerfile").write_text(images.documented_dockerfile(name))
    tag = _tag(name)
    with images.tool_named():
        return tag, checks.build(context, tag, base, "Dockerfile", cache=True, args=args)


def test_a_non_root_base_keeps_its_user_who_can_verify_and_diagnose(tmp_path: Path) -> None:
    base = need_image(images.non_root_base)
    image, _ = _documented_build("image-layout-non-root", base, tmp_path)
    user = images.docker("image", "inspect", "--format", "{{json .Config.User}}", image)
    assert (
        json.loads(user.stdout)
        == images.NON_ROOT_USER
        == json.loads(images.docker("image", "inspect", "--format", "{{json .Config.User}}", base).stdout)
    )
    assert _run(image, "id", "-un") == (0, f"{images.NON_ROOT_USER}\n")
    code, output = _run(image, "torch-lazylog", "diagnose", "--help")
    assert code == 0 and "Usage:" in output, output
    assert_users_see_the_base(base, image)
    grew = _grew_mb(base, image) - images.patch_bytes(image, checks.ROCM.site) / 1e6
    assert grew <= checks.MAX_BEYOND_PATCH_MB, f"{grew:.2f} MB beyond the patch"


def test_dockerfile_rocm_on_a_non_root_base_stops_with_one_sentence(tmp_path: Path) -> None:
    """Dockerfile.rocm writes /opt and the base's torch as root: on a base whose last USER is not
    root it stops at its first step, saying so and naming the form that works, not at a denied write."""
    base = need_image(images.non_root_base)
    context = images.tool_context(tmp_path / "source")
    done = images.docker(
        "build", "--network=host", "--progress=plain", "-f", str(context / "Dockerfile.rocm"),
        "--build-arg", f"BASE_IMAGE={base}", "-t", _tag("rocm-non-root"), str(context), env=images.BUILDKIT,
    )  # fmt: skip
    assert done.returncode != 0
    assert (
        "torch-lazylog: error: Expected Dockerfile.rocm to run as root, but the base's USER is "
        f"{images.NON_ROOT_USER}: nothing was built. Add the README's step between USER root and USER "
        f"{images.NON_ROOT_USER} instead (docs/image-layouts.md)"
    ) in done.stderr, done.stderr[-3000:]
    assert "Permission denied" not in done.stderr


def test_a_builder_stages_venv_copied_into_the_runtime_stage_verifies_lazy(tmp_path: Path) -> None:
    builder, runtime = need_image(checks.ROCM.base), need_image(images.runtime_base)
    # The block's own check in the runtime stage fails the build unless the copy is lazy; the engine
    # may reuse an earlier run's build of the same inputs (the copy is the venv's 7 GB), so the image
    # is checked again here, by what its users run.
    image, _ = _documented_build(
        "image-layout-multi-stage", builder, tmp_path, ("--build-arg", f"RUNTIME_IMAGE={runtime}")
    )
    assert checks.sh(image, "ls -d /opt/torch-lazylog 2>&1 || true").stdout.count("No such") == 1
    assert_users_see_the_base(builder, image)
