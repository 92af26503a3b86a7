"""docs/probe.md's forms on real torch 2.10.0 in real containers, as its user and with every capability
dropped: the image of its HEALTHCHECK block over the non-root stand-in (with g++, which Inductor compiles with on the CPU), probed with `docker exec
--user` running its pod's startupProbe command (the tool from the init container's volume, as the
kubelet runs it). One image, four containers started at once and read together: a compiling server
(and one under a seccomp profile without ptrace and process_vm_readv), one waiting on a stale JIT
lock, one in the eager formatting. py-spy, a static binary, is mounted on the image's PATH as the
page says to install it."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # pyyaml: a dependency of libcst

from tests.conftest import need_image
from tests.docs import body, command

pytestmark = pytest.mark.image

SCENARIOS = Path(__file__).parent / "scenarios"
VENV_PY = "/opt/venv/bin/python"
TAG = "probe-live"


def _probe_command() -> list[str]:
    pod = yaml.safe_load(body("probe-pod"))
    (server,) = pod["spec"]["containers"]
    startup, liveness = server["startupProbe"]["exec"]["command"], server["livenessProbe"]["exec"]["command"]
    assert startup == liveness
    (mount,) = server["volumeMounts"]
    assert startup[2].startswith(mount["mountPath"] + "/"), startup
    return list(startup)


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The four containers by role, from the image of the HEALTHCHECK block."""
    from patcher.diagnose import stacks
    from tests import images

    base = need_image(images.compiler_base)
    work = tmp_path_factory.mktemp("probe")
    context = images.snippet_context(work / "context", "")
    tag = f"torch-lazylog-probe-test:{os.getpid()}"
    profile = work / "no-ptrace.json"
    profile.write_text(json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["ptrace", "process_vm_readv"], "action": "SCMP_ACT_ERRNO"}],
    }))  # fmt: skip
    names: dict[str, str] = {}
    # This checkout's tool image by its own tag, in place of the docs' name (which suites of other
    # checkouts hold under a lock for minutes): the volume filled by the README's line, the block built.
    tool = images.tool_image()
    volume = f"torch-lazylog-probe-{os.getpid()}"
    fill = command("pyz-verify", {"torch-lazylog:/out": f"{volume}:/out", images.TOOL_NAME: tool})
    assert fill[:2] == ["docker", "run"] and tool in fill, fill
    (context / "Dockerfile").write_text(
        images.documented_dockerfile("probe-healthcheck").replace(
            f"--from={images.TOOL_NAME} ", f"--from={tool} "
        )
    )
    try:
        filled = images.docker(*fill[1:], timeout=300)
        assert filled.returncode == 0, filled.stderr
        built = images.docker(
            "build", "--network=host", "-f", str(context / "Dockerfile"), "--build-arg", f"BASE_IMAGE={base}",
            "-t", tag, str(context), env={"DOCKER_BUILDKIT": "0"},
        )  # fmt: skip
        assert built.returncode == 0, built.stderr[-3000:]
        mount = _probe_command()[2].rsplit("/", 1)[0]
        common = [
            "--cap-drop", "ALL", "--user", images.NON_ROOT_USER, "-e", "TORCHINDUCTOR_CACHE_DIR=/tmp/inductor",
            "-v", f"{SCENARIOS}:/scenario:ro", "-v", f"{volume}:{mount}:ro", "-v", f"{stacks.find()}:/usr/local/bin/py-spy:ro",
        ]  # fmt: skip
        runs = {
            "compiling": [tag, VENV_PY, "/scenario/stalls.py", TAG, "compile"],
            "no-ptrace": ["--no-healthcheck", "--security-opt", f"seccomp={profile}", tag, VENV_PY, "/scenario/stalls.py", TAG, "compile"],
            "stale-lock": [
                "-e", "TORCH_EXTENSIONS_DIR=/tmp/ext", tag, "sh", "-c",
                f"mkdir -p /tmp/ext/x && : > /tmp/ext/x/lock && exec {VENV_PY} /scenario/stalls.py {TAG} lock /scenario/answer.cpp",
            ],
            "eager": ["--no-healthcheck", tag, VENV_PY, "/scenario/chain.py", TAG, "26"],
        }  # fmt: skip
        for role, args in runs.items():
            name = f"torch-lazylog-probe-{role}-{os.getpid()}"
            started = images.docker("run", "-d", "--name", name, *common, *args)
            assert started.returncode == 0, started.stderr
            names[role] = name
        yield names
    finally:
        for name in names.values():
            images.docker("rm", "-f", name, timeout=120)
        images.docker("image", "rm", "-f", tag, timeout=120)
        images.docker("volume", "rm", "-f", volume, timeout=120)


def _read(name: str) -> tuple[int, list[str]]:
    from tests import images

    done = images.docker("exec", "--user", images.NON_ROOT_USER, name, *_probe_command(), timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines()


def _until(name: str, ok: bool, timeout: float = 420) -> list[str]:
    """Reads until one exits 0 (`ok`) or non-zero; its lines."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        code, lines = _read(name)
        if (code == 0) == ok and lines:
            return lines
        time.sleep(3)
    pytest.fail(f"{name}: no {'zero' if ok else 'non-zero'} read in {timeout:.0f} s: {lines}")


def _health(name: str) -> str:
    from tests import images

    return images.docker("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip()


def test_compiling_is_ok_stuck_is_not_and_healthcheck_agrees(probed: dict[str, str]) -> None:
    from tests import images

    # the compile loop, once torch is loaded and it compiles: every read 0, while the others get there
    first = _until(probed["compiling"], ok=True)[0]
    assert first.startswith(("ok: PID 1:", "warning: PID 1:")), first
    lock = _until(probed["stale-lock"], ok=False)
    assert lock[0].startswith("stuck: PID 1: TL-D101") and "/tmp/ext/x/lock" in lock[0], lock
    stuck_at = time.monotonic()
    codes = []
    for _ in range(4):
        for role in ("compiling", "stale-lock"):
            code, lines = _read(probed[role])
            codes.append((role, code, " | ".join(lines)))  # the first line, and why when it is not
        time.sleep(2)
    assert [c for c in codes if (c[0] == "compiling") != (c[1] == 0)] == [], codes
    assert all("/tmp/ext/x/lock" in line for role, _, line in codes if role == "stale-lock"), codes
    # seccomp without ptrace: still 0, and says what it could not read
    _until(probed["no-ptrace"], ok=True, timeout=300)
    reads = [_read(probed["no-ptrace"]) for _ in range(3)]
    assert all(c == 0 for c, _ in reads), reads
    assert any("stacks could not be read" in " ".join(lines) for _, lines in reads), reads
    # the HEALTHCHECK of the page's block: healthy while compiling, unhealthy when stuck, within a minute
    end = stuck_at + 60
    while time.monotonic() < end and (_health(probed["stale-lock"]), _health(probed["compiling"])) != (
        "unhealthy",
        "healthy",
    ):
        time.sleep(2)
    log = images.docker("inspect", "--format", "{{json .State.Health.Log}}", probed["compiling"]).stdout
    assert (_health(probed["stale-lock"]), _health(probed["compiling"])) == ("unhealthy", "healthy"), log
    # the eager formatting: once a read says stuck, every read does, naming the fix
    eager = _until(probed["eager"], ok=False, timeout=600)
    for lines in [eager, *(_read(probed["eager"])[1] for _ in range(3))]:
        assert (
            lines[0].startswith("stuck: PID 1: TL-D001")
            and " apply --python /opt/venv/bin/python" in lines[0]
        ), lines
