"""In the stand-in images (tests/images.py): the reinstall advice followed as printed, and the
single file (from the tool image, in a volume) run read-only by each image's own Python.

Each layout the image tests build: the /opt/venv stand-in (pip), the vLLM-shaped system Python
(externally managed, torch installed by uv), and /opt/venv with pip removed (no installer at all).
graph.py is put in the `edited` state (edited after apply), verify prints the advice, and the advice
is run as printed, adding only the installer's dry-run flag, in that same container. No image is
built here but Dockerfile.rocm's small layer over a cached base, removed afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import images
from tests.conftest import need_image
from tests.docs import command

pytestmark = pytest.mark.image
ROOT = Path(__file__).resolve().parent.parent
NO_PIP = "rm -rf /opt/venv/bin/pip* /opt/venv/lib/python3*/site-packages/pip /opt/venv/lib/python3*/site-packages/pip-*"


@dataclasses.dataclass(frozen=True)
class Layout:
    name: str
    base: Callable[[], str]
    python: str  # the image's python3 (what runs the tool), the one whose torch the server imports
    site: str  # torch's site directory (a shell glob)
    prepare: str = "true"  # what the layout does to the image first


LAYOUTS = [
    Layout("rocm-venv", images.rocm_base, "/opt/venv/bin/python3", "/opt/venv/lib/python3*/site-packages"),
    Layout("vllm-system", images.system_base, "/usr/bin/python3", "/usr/local/lib/python3*/dist-packages"),
    Layout(
        "venv-without-pip",
        images.rocm_base,
        "/opt/venv/bin/python3",
        "/opt/venv/lib/python3*/site-packages",
        NO_PIP,
    ),
]


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[Layout], str]]:
    """Dockerfile.rocm's image on a layout's cached base (one small layer), built once per base;
    removed at the end."""
    built: dict[str, str] = {}

    def make(layout: Layout) -> str:
        base = need_image(layout.base)
        if base not in built:
            context = images.tool_context(tmp_path_factory.mktemp("context") / "context")
            tag = f"torch-lazylog-test:advice-{layout.name}-{os.getpid()}"
            done = images.docker(
                "build", "--network=host", "--progress=plain", "-f", str(context / "Dockerfile.rocm"),
                "--build-arg", f"BASE_IMAGE={base}", "-t", tag, str(context),
                env=images.BUILDKIT,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-4000:]
            built[base] = tag
        return built[base]

    yield make
    for tag in built.values():
        images.docker("image", "rm", "-f", tag, timeout=300)


@pytest.fixture(scope="module")
def volume() -> Iterator[str]:
    """The tool in a named volume, as the README's first "Am I affected?" line fills it."""
    with images.tool_volume() as name:
        yield name


class Container:
    """One running container of an image, the host's CA bundle and the tool's volume (on /mnt)
    mounted read-only."""

    def __init__(self, image: str, volume: str) -> None:
        self.name = f"torch-lazylog-advice-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        done = images.docker(
            "run", "-d", "--name", self.name, "--network=host",
            "-v", f"{images.CA_BUNDLE}:/etc/ssl/certs/ca-certificates.crt:ro",
            "-v", f"{volume}:/mnt:ro", image, "sleep", "3600",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    def run(self, *argv: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
        return images.docker("exec", self.name, *argv, timeout=timeout)

    def sh(self, script: str) -> subprocess.CompletedProcess[str]:
        return self.run("sh", "-c", script)

    def remove(self) -> None:
        images.docker("rm", "-f", self.name, timeout=120)


@pytest.fixture
def container(volume: str) -> Iterator[Callable[[str], Container]]:
    made: list[Container] = []

    def make(image: str) -> Container:
        made.append(Container(image, volume))
        return made[-1]

    yield make
    for one in made:
        one.remove()


def _edited(box: Container, layout: Layout) -> dict[str, object]:
    """After the image step (apply), graph.py edited, then verify: the report of the state only a
    reinstall can fix, from the tool image's file (libcst beside it reads the edited file). The
    image's own command, without libcst, says so in one sentence."""
    assert box.sh(layout.prepare).returncode == 0
    edit = box.sh(f"echo '# edited after apply' >> $(echo {layout.site}/torch/_inductor/graph.py)")
    assert edit.returncode == 0, edit.stderr
    alone = box.run("torch-lazylog", "verify")
    assert alone.returncode == 4 and "run the file from the tool image" in alone.stderr, alone.stderr
    verify = box.run("python3", "-B", "/mnt/torch-lazylog", "verify", "--json")
    assert verify.returncode == 3, verify.stdout + verify.stderr
    report: dict[str, object] = json.loads(verify.stdout)
    assert report["state"] == "edited"
    return report


@pytest.mark.parametrize("layout", LAYOUTS[:2], ids=[layout.name for layout in LAYOUTS[:2]])
def test_the_reinstall_advice_runs_as_printed(
    layout: Layout, stepped: Callable[[Layout], str], container: Callable[[str], Container]
) -> None:
    box = container(stepped(layout))
    advice = _edited(box, layout)["next"]
    assert isinstance(advice, str) and "torch==2.10.0" in advice, advice
    done = box.run(*shlex.split(advice), "--dry-run")  # as printed, plus the installer's dry run
    assert done.returncode == 0, f"{advice}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    if layout.name == "vllm-system":  # uv installed it; Debian's Python is externally managed
        assert advice.startswith("uv pip install --python ") and "--break-system-packages" in advice
        refused = box.run(*shlex.split(advice.replace(" --break-system-packages", "")), "--dry-run")
        assert refused.returncode != 0 and "externally managed" in refused.stderr, refused.stderr
    else:
        assert advice == f"{layout.python} -m pip install --force-reinstall --no-deps torch==2.10.0"


def test_without_pip_the_advice_says_what_to_do(
    stepped: Callable[[Layout], str], container: Callable[[str], Container]
) -> None:
    layout = LAYOUTS[2]
    box = container(stepped(layout))
    advice = _edited(box, layout)["next"]
    assert isinstance(advice, str)
    assert advice.startswith(
        f"reinstall torch==2.10.0 for {layout.python} with the tool that installed it (pip)"
    )
    assert "has no pip and no uv is on PATH" in advice
    # what a command would have been cannot run there
    assert box.run(layout.python, "-m", "pip", "--version").returncode != 0
    assert box.sh("command -v uv").returncode != 0


def _verify_untouched(image: str, volume: str) -> tuple[int, str, str]:
    """The README's "Am I affected?" line (named, not removed, to be diffed), then `docker diff` of
    that container."""
    name = f"torch-lazylog-pyz-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    values: dict[str, str | list[str]] = {
        "--rm": ["--name", name], "torch-lazylog:/mnt:ro": f"{volume}:/mnt:ro", "IMAGE": image,
    }  # fmt: skip
    shown = command("pyz-verify", values, line=1)
    assert shown[0] == "docker" and "/mnt/torch-lazylog" in shown and f"{volume}:/mnt:ro" in shown, shown
    try:
        done = images.docker(*shown[1:], timeout=600)
        diff = images.docker("diff", name, timeout=120)
        assert diff.returncode == 0, diff.stderr
        return done.returncode, done.stdout + done.stderr, diff.stdout
    finally:
        images.docker("rm", "-f", name, timeout=120)


@pytest.mark.parametrize("layout", LAYOUTS[:2], ids=[layout.name for layout in LAYOUTS[:2]])
def test_the_single_file_verifies_a_bare_base_and_writes_nothing(layout: Layout, volume: str) -> None:
    code, output, diff = _verify_untouched(need_image(layout.base), volume)
    assert code == 1, output
    assert "formats the implicit-fallback log eagerly" in output and "(release 2.10.0's file)" in output
    assert diff == "", diff


@pytest.mark.parametrize("layout", LAYOUTS[:2], ids=[layout.name for layout in LAYOUTS[:2]])
def test_the_single_file_verifies_the_image_after_the_step(
    layout: Layout, volume: str, stepped: Callable[[Layout], str]
) -> None:
    """0 after the image step: Dockerfile.rocm's image on the stand-in."""
    code, output, diff = _verify_untouched(stepped(layout), volume)
    assert code == 0, output
    assert "formats the implicit-fallback log lazily" in output and "matches its undo record" in output
    assert diff == "", diff
