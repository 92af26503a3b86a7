"""What README.md and docs/ print works as printed, and the measurement tables are their CSVs'.

Each shell block says where it runs by its fence: ```sh runs here, from the checkout, as printed
(the cheap ones run below for real; the expensive ones are the commands CI or a real test already
runs, matched here); ```sh placeholder needs a value (a PID), run here with one; ```sh image needs
an image (IMAGE): the image tests run it as printed, through tests/docs.py's `command`, with their
own image. The measurement tables and the figures beside them are bench/tables.py's, made from the
CSVs; nothing here reads the pages' own wording."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import tables
from tests.docs import ROOT, Fenced, block, commands, fenced, page_with
from tests.helpers import checkout_copy

KINDS = {"sh", "sh image", "sh placeholder", "console", "dockerfile", "diff", "yaml", "text"}

# ```sh image blocks, by marker: the test file that runs each through `command(NAME, ...)`.
IMAGE_RUNS = {
    "tool-image": "tests/images.py",
    "pyz-verify": "tests/images.py",
    "ci-runtime": "tests/test_image.py",
    "diagnose-demo": "tests/test_diagnose_e2e.py",
    "start-time-docker": "tests/test_start_time.py",
    "start-time-lenient": "tests/test_start_time.py",
    "image-unrun": "tests/test_image_unrun.py",
}
# The docs' other Dockerfiles and manifests, by marker: the image test that builds or runs each.
BUILT_ELSEWHERE = {
    "classic-step": "tests/test_image.py",
    "classic-step-vendor": "tests/test_image.py",
    "image-layout-derived": "tests/test_image_layouts.py",
    "image-layout-non-root": "tests/test_image_layouts.py",
    "image-layout-multi-stage": "tests/test_image_layouts.py",
    "start-time-pod": "tests/test_start_time.py",
    "probe-healthcheck": "tests/test_probe_live.py",
    "probe-pod": "tests/test_probe_live.py",
}

# ```sh blocks too expensive to run here (a 7 GB torch venv, the whole suite, minutes of mutants or
# compiles): each is matched to where it really runs, by a check that fails when the two drift apart.
_CI = (ROOT / ".ci" / "run").read_text()


def _first_command_is_the_e2e_venv() -> bool:
    realdata = (ROOT / "tests" / "realdata.py").read_text()
    e2e = (ROOT / "tests" / "test_e2e.py").read_text()
    # torch==2.10.0 from the index (its wheels, then a venv from them), then the tool's apply and verify
    return 'f"torch=={version}"' in realdata and 'torch_venv("2.10.0")' in e2e


def _runs_in_ci(command: str) -> bool:
    return any(line.startswith(command + " ") or line == command for line in _CI.splitlines())


def _bench_compile_time_starts() -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "bench.compile_time", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode == 0 and "usage:" in done.stdout


def _merge_tier_is_the_forges_pull_request_job() -> bool:
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    return (
        "\nstep_merge() {" in _CI
        and "- run: bash .ci/run install\n      - run: bash .ci/run merge\n" in workflow
    )


EXPENSIVE = {
    ".ci/run install && .ci/run merge": _merge_tier_is_the_forges_pull_request_job,
    "python3 -m venv torch-env && torch-env/bin/pip install 'torch==2.10.0' . && torch-env/bin/torch-lazylog apply"
    " && torch-env/bin/torch-lazylog verify": _first_command_is_the_e2e_venv,
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m coverage run -m pytest": (
        lambda: _runs_in_ci(
            "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m coverage run -m pytest"
        )
    ),
    "rm -rf mutants && .venv/bin/mutmut run --max-children 1 && .venv/bin/python .ci/mutmut_check.py": (
        lambda: (
            "rm -rf mutants && .venv/bin/mutmut run --max-children 1" in _CI
            and ".venv/bin/python .ci/mutmut_check.py" in _CI
        )
    ),
    ".venv/bin/pip install -e '.[test,bench]' && .venv/bin/python -m bench.compile_time": _bench_compile_time_starts,
}

# ```sh blocks run here for real that need the package registry (pip installs): e2e.
NEEDS_REGISTRY = ("pip install",)


def _shell_blocks(info: str) -> list[Fenced]:
    return [b for b in fenced() if b.info == info]


def _id(b: Fenced) -> str:
    return f"{b.page.name}:{b.body.splitlines()[0][:40]}"


def test_every_block_says_where_it_runs() -> None:
    blocks = fenced()
    assert [(b.page.name, b.info) for b in blocks if b.info not in KINDS] == []
    (step,) = [b for b in blocks if b.info == "dockerfile" and b.page.name == "README.md"]
    from tests.helpers import readme_snippet

    assert readme_snippet() == step.body  # the one the image tests build
    for name, runner in {**IMAGE_RUNS, **BUILT_ELSEWHERE}.items():
        source = (ROOT / runner).read_text()
        assert page_with(name) and re.search(rf'\w+\(\s*"{name}"', source), name
    elsewhere = [b.body for name in BUILT_ELSEWHERE for b in fenced() if f"\n{b.body}```" in block(name)]
    others = [b for b in blocks if b.info in ("dockerfile", "yaml") and b is not step]
    assert [_id(b) for b in others if b.body not in elsewhere] == []
    shown = {b.body for name in IMAGE_RUNS for b in fenced() if f"```sh image\n{b.body}" in block(name)}
    assert [_id(b) for b in _shell_blocks("sh image") if b.body not in shown] == []


_HERE = [b for b in _shell_blocks("sh") if b.body.strip() not in EXPENSIVE]


@pytest.mark.parametrize(
    "shown",
    [
        pytest.param(b, marks=[pytest.mark.e2e] if any(n in b.body for n in NEEDS_REGISTRY) else [])
        for b in _HERE
    ],
    ids=[_id(b) for b in _HERE],
)
def test_a_block_meant_to_run_here_runs_as_printed(shown: Fenced, tmp_path: Path) -> None:
    work = checkout_copy(tmp_path / "checkout")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    # The pages' `python3` is one with the tool's dependencies ("a Python that has click"): the test
    # environment's, not whichever the machine happens to have first on PATH.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", shown.body], cwd=work, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, f"{shown.body}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
    if "patcher.pyz" in shown.body:  # what the text says it writes
        assert (work / "dist" / "torch-lazylog.pyz").is_file()


@pytest.mark.parametrize("command", sorted(EXPENSIVE))
def test_an_expensive_block_is_what_ci_or_a_real_test_runs(command: str) -> None:
    assert command in [b.body.strip() for b in _shell_blocks("sh")], "no page shows it any more"
    assert EXPENSIVE[command](), command


# A PID namespace of its own, with its own /proc: the line without a PID sees only itself there.
# Unprivileged, a user namespace comes first (it maps the caller to root inside it).
ALONE = [
    "unshare",
    *([] if os.geteuid() == 0 else ["--user", "--map-root-user"]),
    "--pid",
    "--fork",
    "--mount-proc",
]


@pytest.mark.parametrize("name", ["diagnose-pid", "diagnose-pid-docs"])
def test_the_diagnose_lines_run_with_a_pid(name: str) -> None:
    """`torch-lazylog diagnose PID` with the PID of a Python that has not imported torch, and the line
    without a PID where no process has torch loaded: each exits 4 naming what it did not find."""
    tool = Path(sys.executable).parent / "torch-lazylog"
    assert tool.exists(), "the test venv has no torch-lazylog console script"
    env = dict(os.environ, PATH=f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    with_pid, without = commands(name)
    assert with_pid.endswith(" PID") and without == with_pid.removesuffix(" PID")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        line = with_pid.replace("PID", str(sleeper.pid))
        done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 4 and "has not imported torch" in done.stderr, done
    finally:
        sleeper.kill()
        sleeper.wait()
    # Without a PID it reads every torch process it can see: in a PID namespace of its own, none.
    done = subprocess.run(
        [*ALONE, "bash", "-c", without], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 4, done
    assert "found none this user may read." in done.stderr and "Traceback" not in done.stderr, done


@pytest.mark.parametrize("name", sorted(tables.TABLES))
def test_each_measurement_table_is_made_from_its_csv(name: str) -> None:
    """What the pages show between the markers is what `python -m bench.tables` makes from the CSVs."""
    made = tables.TABLES[name]()
    assert block(name) == made, f"{name} differs from its CSV: run `python -m bench.tables`"
    page = page_with(name).read_text(encoding="utf-8")
    assert tables.written(name, page) == page


@pytest.mark.image
def test_ptrace_rights_in_a_container_are_as_documented() -> None:
    """docs/diagnose.md: in a container, the process's own uid reads it without `--cap-add SYS_PTRACE`
    (no Yama restriction here); another uid may not. py-spy (a static binary) is mounted in, and reads
    the container's PID 1, a Python."""
    from patcher.diagnose import stacks
    from tests import images
    from tests.conftest import need

    need(images.engine)
    base = need(images.os_image)
    assert isinstance(base, str)
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    if scope.exists() and scope.read_text().strip() != "0":
        pytest.fail(
            f"this kernel restricts ptrace (Yama mode {scope.read_text().strip()}): the page's case differs"
        )
    text = (ROOT / "docs" / "diagnose.md").read_text()
    assert "works without `--cap-add SYS_PTRACE`" in text and "**Another user**" in text
    name = f"torch-lazylog-docs-ptrace-{os.getpid()}"
    started = images.docker(
        "run", "-d", "--rm", "--name", name, "-v", f"{stacks.find()}:/mnt/py-spy:ro", base,
        "python3", "-c", "import time; time.sleep(600)",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        own = images.docker("exec", name, "/mnt/py-spy", "dump", "--pid", "1", timeout=120)
        assert own.returncode == 0 and "sleep" in own.stdout, own.stdout + own.stderr
        other = images.docker(
            "exec", "--user", "nobody", name, "/mnt/py-spy", "dump", "--pid", "1", timeout=120
        )
        assert other.returncode != 0 and "Permission Denied" in other.stderr, other.stdout + other.stderr
    finally:
        images.docker("rm", "-f", name, timeout=120)


def test_the_single_files_lines_run_as_printed(release: Callable[[str], Path], tmp_path: Path) -> None:
    """docs/start-time.md's lines for the single file, run with the file built here, on a real 2.10.0
    tree: --help exits 0, verify says eager (1), apply patches (0); --runtime needs a torch that
    imports, which tests/test_pyz.py's e2e test runs the same line in."""
    import shlex

    out = tmp_path / "torch-lazylog"  # as the tool image names it
    built = subprocess.run([sys.executable, "-m", "patcher.pyz", str(out)], cwd=ROOT, capture_output=True)
    assert built.returncode == 0, built.stderr
    env = dict(os.environ, TORCH_LAZYLOG_TORCH_DIR=str(release("2.10.0")))
    expected: dict[tuple[str, ...], int] = {("--help",): 0, ("verify",): 1, ("apply",): 0}
    lines = [shlex.split(line) for line in commands("pyz-commands")]
    assert all(words[:2] == ["python3", "torch-lazylog"] for words in lines), lines
    for words in (w[2:] for w in lines):
        if words == ["verify", "--runtime"]:
            assert '"verify", "--runtime"' in (ROOT / "tests" / "test_pyz.py").read_text()
            continue
        done = subprocess.run(
            [sys.executable, str(out), *words], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == expected[tuple(words)], (words, done.stdout, done.stderr)
    again = subprocess.run([sys.executable, str(out), "verify"], cwd=tmp_path, env=env, capture_output=True)
    assert again.returncode == 0, again.stderr
