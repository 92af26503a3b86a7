"""The wheel, its install, and the Docker build step, exercised as users run them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

import patcher
from patcher.core.exitcodes import ExitCode
from tests import realdata
from tests.conftest import need, snapshot
from tests.helpers import checkout_copy, readme_snippet

ROOT = Path(__file__).resolve().parent.parent
HADOLINT = Path(sys.executable).parent / "hadolint"
WHEEL_NAME = f"torch_lazylog-{patcher.__version__}-py3-none-any.whl"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, source = tmp_path_factory.mktemp("dist"), checkout_copy(tmp_path_factory.mktemp("checkout"))
    need(
        lambda: realdata.pip(
            ["wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(source)], "setuptools"
        )
    )
    (built,) = out.glob("*.whl")
    assert built.name == WHEEL_NAME
    return built


def _build_sdist(out: Path, source: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        env=realdata.pip_env(),
        check=False,
    )
    if done.returncode != 0:  # its isolated build environment fetches setuptools, as pip wheel does
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise realdata.Unavailable(f"could not fetch setuptools from the package registry: {why}")


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, source = tmp_path_factory.mktemp("sdist"), checkout_copy(tmp_path_factory.mktemp("checkout"))
    need(lambda: _build_sdist(out, source))
    (built,) = out.glob("*.tar.gz")
    return built


def _venv(path: Path, with_pip: bool = True) -> Path:
    subprocess.run(
        [sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), str(path)],
        check=True,
        capture_output=True,
    )
    return path / "bin" / "python"


def _purelib(venv: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))


def _standin(tmp_path: Path, version: str = "2.10.0") -> Path:
    """A venv standing in for the image's /opt/venv, with a real torch release tree in it."""
    venv = tmp_path / "opt-venv"
    _venv(venv)
    site = need(lambda: realdata.release_tree(version, tmp_path / "release"))
    assert isinstance(site, Path)
    for item in site.parent.iterdir():
        shutil.move(str(item), _purelib(venv) / item.name)
    return venv


def test_the_tool_image_installs_the_tested_click_and_libcst_within_the_packages_ranges() -> None:
    """Dockerfile.rocm fetches click and libcst into the tool image from .ci/image-click.txt and
    .ci/image-libcst.txt, every requirement there pinned and hashed (--require-hashes): each the
    version the suite runs with (.ci/constraints.txt, which .ci/run installs), inside the range
    pyproject.toml's dependencies name; libcst for the Pythons the package supports up to the newest
    tested here."""
    from importlib import metadata

    from packaging.requirements import Requirement

    dockerfile = (ROOT / "Dockerfile.rocm").read_text()
    constraints = (ROOT / ".ci" / "constraints.txt").read_text()
    for name in ("click", "libcst"):
        lock = (ROOT / ".ci" / f"image-{name}.txt").read_text()
        assert "--require-hashes --no-deps --target" in dockerfile and f"-r image-{name}.txt" in dockerfile
        requirements = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", lock.split("\n\n", 1)[1].strip())
        assert requirements and all("\\\n    --hash=sha256:" in r for r in requirements), requirements
        pinned = re.findall(rf"^{name}==(\S+) \\$", lock, re.M)[0]
        assert re.search(rf"^{name}=={re.escape(pinned)}$", constraints, re.M), (name, pinned)
        (required,) = [Requirement(r) for r in metadata.requires("torch-lazylog") or [] if r.startswith(name)]
        assert required.specifier.contains(pinned), (name, pinned, str(required))
    minors = re.search(r"for minor in ([\d. ]+); do", dockerfile)
    assert minors and minors[1].split() == ["3.10", "3.11", "3.12", "3.13"]
    assert metadata.metadata("torch-lazylog")["Requires-Python"] == ">=3.10"


def test_the_tool_images_tag_is_the_tools_version() -> None:
    """The README and docs name the tool image `torch-lazylog:<version>`: this version's."""
    from importlib import metadata

    from tests import docs, images

    version = metadata.version("torch-lazylog")
    assert f"torch-lazylog:{version}" == images.TOOL_NAME
    named = {m for page in docs.pages() for m in re.findall(r"torch-lazylog:(\d[\w.]*)", docs.text(page))}
    assert named == {version}, named


def test_hadolint_passes_dockerfile_rocm() -> None:
    done = subprocess.run([str(HADOLINT), str(ROOT / "Dockerfile.rocm")], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_hadolint_passes_the_readme_snippet(tmp_path: Path) -> None:
    probe = tmp_path / "Dockerfile"
    probe.write_text(
        "FROM rocm/pytorch:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0\n" + readme_snippet()
    )
    done = subprocess.run([str(HADOLINT), str(probe)], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "")
    assert readme_snippet().count("torch-lazylog apply") == 1


def test_wheel_ships_the_patch_definitions_and_nothing_else(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "patcher/patches/lazy_implicit_fallback.json" in names
    assert "patcher/patches/lazy_implicit_fallback.releases.json" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "patches/"))]
    metadata = zipfile.ZipFile(wheel).read(f"torch_lazylog-{patcher.__version__}.dist-info/METADATA").decode()
    requires = [
        line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")
    ]
    runtime = sorted(r for r in requires if "extra ==" not in r)
    assert runtime == ["click<9,>=8.1", "libcst<2,>=1.5"]
    assert not any(r.startswith("torch") for r in requires)


def test_the_wheel_carries_the_license_text(wheel: Path) -> None:
    """PEP 639: the text under *.dist-info/licenses/, named by License-File: in METADATA."""
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "BSD 3-Clause License" in text and "the torch-lazylog developers" in text
    dist_info = f"torch_lazylog-{patcher.__version__}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(f"{dist_info}/licenses/LICENSE").decode() == text
        metadata = archive.read(f"{dist_info}/METADATA").decode()
    fields = [line.split(":", 1) for line in metadata.split("\n\n", 1)[0].splitlines()]
    assert ["License-File", " LICENSE"] in fields
    assert ["License-Expression", " BSD-3-Clause"] in fields


def test_the_sdist_carries_the_license_text(sdist: Path) -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    top = f"torch_lazylog-{patcher.__version__}"
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"{top}/LICENSE")
        assert member is not None and member.read().decode() == text
        info = archive.extractfile(f"{top}/PKG-INFO")
        assert info is not None
        assert "License-File: LICENSE" in info.read().decode().splitlines()


def test_installed_wheel_runs_apply_verify_revert(wheel: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    need(lambda: realdata.pip(["install", "--quiet", str(wheel)], "click and libcst", python=python))
    torch_dir = need(lambda: realdata.release_tree("2.12.1", tmp_path / "site"))
    assert isinstance(torch_dir, Path)
    pristine = snapshot(torch_dir.parent)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    where = subprocess.run(
        [str(python), "-c", "import patcher; print(patcher.__file__)"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
    )
    assert where.stdout.startswith(str(_purelib(tmp_path / "venv")))  # the install, not the checkout
    tool = str(tmp_path / "venv" / "bin" / "torch-lazylog")

    def run(*args: str) -> int:
        return subprocess.run(
            [tool, *args, "--torch-dir", str(torch_dir)], cwd=elsewhere, capture_output=True
        ).returncode

    assert [run("verify"), run("apply"), run("verify"), run("revert"), run("verify")] == [1, 0, 0, 0, 1]
    assert snapshot(torch_dir.parent) == pristine


@pytest.fixture(scope="module")
def without_dependencies(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed with `pip install --no-deps` into a venv of its own: no click, no libcst."""
    python = _venv(tmp_path_factory.mktemp("no-deps") / "venv")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        env=realdata.pip_env(),
    )
    return python


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["torch-lazylog", "verify"], id="verify"),
        pytest.param(["torch-lazylog", "apply"], id="apply"),
        pytest.param(["torch-lazylog", "--help"], id="help"),
        pytest.param(["python", "-m", "patcher", "verify"], id="python-m"),
    ],
)
def test_a_wheel_installed_without_its_dependencies_says_so_in_one_sentence(
    args: list[str], without_dependencies: Path, tmp_path: Path
) -> None:
    """The console script and `python -m patcher` answer with one sentence on stderr and exit 4
    (ENVIRONMENT), never a traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    python = without_dependencies
    absent = subprocess.run([str(python), "-c", "import click"], capture_output=True, env=env, cwd=tmp_path)
    assert absent.returncode == 1 and b"No module named 'click'" in absent.stderr
    done = subprocess.run(
        [str(python.parent / args[0]), *args[1:]], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    line = f"torch-lazylog: error: Expected click to parse `{args[-1]}`, but it is not installed for this Python."
    assert (done.returncode, done.stdout) == (ExitCode.ENVIRONMENT, "")
    assert done.stderr.startswith(line) and done.stderr.count("\n") == 1, done.stderr


def _torch_files(venv: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for base in (_purelib(venv) / "torch", *_purelib(venv).glob("torch-*.dist-info")):
        for path in base.rglob("*"):
            if path.is_file():
                st = path.stat()
                out[str(path)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def test_installing_the_wheel_beside_torch_changes_no_torch_file(wheel: Path, tmp_path: Path) -> None:
    """pip installs the tool and its two dependencies beside an installed torch 2.13.0 and leaves
    every torch file alone (a venv of its own holding the real release's files and dist-info)."""
    venv = _standin(tmp_path, "2.13.0")
    python = str(venv / "bin" / "python")
    record = next(_purelib(venv).glob("torch-*.dist-info")) / "RECORD"
    before_record, before_files = record.read_bytes(), _torch_files(venv)
    report = tmp_path / "report.json"
    need(
        lambda: realdata.pip(
            ["install", "--quiet", "--report", str(report), str(wheel)], "click and libcst", python=python
        )
    )
    installed = [item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]]
    assert "torch-lazylog" in installed and "torch" not in installed
    assert record.read_bytes() == before_record
    assert _torch_files(venv) == before_files
