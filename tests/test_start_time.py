"""docs/start-time.md's forms, run as printed on real containers of the unmodified stand-ins: the
single file mounted read-only, applied before the server starts, then the server exec'd.

The `docker run` form on the bare ROCm stand-in runs the benchmark chain (tests/scenarios/chain.py)
at a depth unpatched torch would need hours for; four ranks starting at once all succeed; the pod
spec's command and mount run the same way, and the ConfigMap holding the file stays under 1 MiB; a
read-only root filesystem gets one sentence, and each form does what the docs say then; the vendor
stand-in (a graph.py that takes libcst) says what to mount, and works once it is mounted.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # pyyaml: a dependency of libcst

from patcher.cli import pyz
from tests import docs, images, realdata
from tests.conftest import need
from tests.helpers import build_single_file

pytestmark = pytest.mark.image

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = Path(__file__).resolve().parent / "scenarios"
MOUNT = "/mnt/torch-lazylog"
DEEP = 32  # unpatched: hours (the text grows ~1.6x a level; 19 s at depth 20); patched: seconds
_names = itertools.count()


def block(name: str) -> str:
    """The fenced block between `<!-- name -->` and `<!-- /name -->` in README.md or docs/*.md."""
    return docs.body(name)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/ as the docs' `python3 -m patcher.pyz` leaves it: the single file, nothing else."""
    out = tmp_path_factory.mktemp("checkout") / "dist" / pyz.NAME
    return build_single_file(out).parent


@pytest.fixture(scope="module")
def bare() -> str:
    tag = need(images.rocm_base)
    assert isinstance(tag, str)
    return tag


def _name() -> str:
    return f"torch-lazylog-start-time-{os.getpid()}-{next(_names)}"


def docker_form(name: str, dist: Path, image: str, server: list[str], *options: str) -> list[str]:
    """The docs' `docker run` block as argv: run in dist's parent ($PWD), IMAGE and the server's command
    line replaced, `options` (a name, the scenarios' mount) added after `run`."""
    words = shlex.split(block(name).replace("\\\n", " "))
    assert words[:2] == ["docker", "run"] and "IMAGE" in words and "torch-lazylog-start" in words
    start = words.index("torch-lazylog-start")
    words = [images.DOCKER, "run", *options, *words[2 : start + 1], *server]
    return [
        w.replace("$PWD", str(dist.parent)) if "$PWD" in w else image if w == "IMAGE" else w for w in words
    ]


def _run(argv: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        name = argv[argv.index("--name") + 1] if "--name" in argv else None
        if name:
            images.docker("rm", "-f", name, timeout=60)


def _unavailable(why: str) -> None:
    raise realdata.Unavailable(why)


def _pyz(*args: str) -> list[str]:
    return ["python", "-B", f"{MOUNT}/{pyz.NAME}", *args]


def test_the_bare_stand_in_is_eager(dist: Path, bare: str) -> None:
    """Before: a plain container of the same image, the file only verifying, says eager."""
    done = _run([images.DOCKER, "run", "--rm", "-v", f"{dist}:{MOUNT}:ro", bare, *_pyz("verify", "--json")])
    assert done.returncode == 1 and json.loads(done.stdout)["state"] == "pristine", done.stderr


def test_the_docker_form_runs_the_chain_patched(dist: Path, bare: str) -> None:
    """The server: verify inside (0), then the custom-op chain at a depth unpatched torch would take
    hours for, compiled by Inductor; it completes within a generous bound and prints `done`."""
    server = [
        "sh",
        "-c",
        f"{shlex.join(_pyz('verify'))} && exec python {SCENARIOS.name}/chain.py start-time {DEEP}",
    ]
    form = docker_form(
        "start-time-docker", dist, bare, server,
        "--name", _name(), "-w", "/mnt", "-e", "TORCHINDUCTOR_CACHE_DIR=/tmp/inductor",
        "-v", f"{SCENARIOS}:/mnt/{SCENARIOS.name}:ro",
    )  # fmt: skip
    done = _run(form, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "done" and any(line.startswith("Patched graph.py line ") for line in lines), (
        done.stdout
    )
    assert any("formats the implicit-fallback log lazily" in line for line in lines), done.stdout


def test_four_ranks_applying_at_once_all_succeed(dist: Path, bare: str) -> None:
    """One container, the form's script started four times at once (ranks of one server): each exits
    0 and starts its rank, exactly one patched, and the torch verifies lazy afterwards."""
    script = shlex.split(block("start-time-docker").replace("\\\n", " "))
    form = script[script.index("-c") + 1]
    rank = shlex.join(["sh", "-c", form, "torch-lazylog-start", "python", "-c", "print('rank up')"])
    ranks = (
        f'for i in 1 2 3 4; do ({rank} > /tmp/rank$i 2>&1; echo "exit $?" >> /tmp/rank$i) & done; wait; '
        'for i in 1 2 3 4; do echo "== rank $i"; cat /tmp/rank$i; done; echo "== verify"; '
        f"{shlex.join(_pyz('verify', '--json'))}"
    )
    done = _run(
        [images.DOCKER, "run", "--name", _name(), "-v", f"{dist}:{MOUNT}:ro", bare, "sh", "-c", ranks]
    )
    ranks_out, _, verified = done.stdout.partition("== verify\n")
    outputs = ranks_out.split("== rank ")[1:]
    assert len(outputs) == 4, done.stdout
    for output in outputs:
        assert output.rstrip().endswith("rank up\nexit 0"), output
    assert sum("\nPatched graph.py line " in o for o in outputs) == 1, done.stdout
    assert sum("lazily already" in o for o in outputs) == 3, done.stdout
    assert done.returncode == 0 and json.loads(verified)["state"] == "patched", done.stderr


def test_the_configmap_holds_the_file_under_a_mebibyte(dist: Path) -> None:
    """The ConfigMap kubectl makes from the docs' line (binaryData: base64 of the file), as JSON."""
    words = shlex.split(block("start-time-configmap"))
    assert words[:3] == ["kubectl", "create", "configmap"]
    key, _, source = words[4].removeprefix("--from-file=").partition("=")
    assert key == pyz.NAME and source == f"dist/{pyz.NAME}"
    payload = (dist / pyz.NAME).read_bytes()
    configmap = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": words[3]},
        "binaryData": {key: base64.b64encode(payload).decode()},
    }  # fmt: skip
    size = len(json.dumps(configmap))
    assert size <= 1024 * 1024, f"the ConfigMap is {size} bytes"
    stated = re.search(
        r"the file is about (\d+) KB, about\s+(\d+) KB once base64",
        (ROOT / "docs" / "start-time.md").read_text(),
    )
    assert stated, "docs/start-time.md states no size for the file"
    assert abs(int(stated[1]) * 1000 - len(payload)) <= 0.1 * len(payload), (stated[1], len(payload))
    assert abs(int(stated[2]) * 1000 - size) <= 0.1 * size, (stated[2], size)


def test_the_pod_specs_command_runs_as_kubernetes_would_run_it(dist: Path, bare: str, tmp_path: Path) -> None:
    """The pod spec's container: its command as the entrypoint, its args replaced by a verify, the
    ConfigMap's volume (one file under the key kubectl names) mounted read-only at its mountPath."""
    pod = yaml.safe_load(block("start-time-pod"))
    (container,) = pod["spec"]["containers"]
    (mount,) = container["volumeMounts"]
    (volume,) = pod["spec"]["volumes"]
    configmap = shlex.split(block("start-time-configmap"))[3]
    assert volume["name"] == mount["name"] and volume["configMap"]["name"] == configmap
    assert mount["readOnly"] is True and container["image"] == "IMAGE"
    volume_dir = tmp_path / "configmap"
    volume_dir.mkdir()
    shutil.copy2(dist / pyz.NAME, volume_dir / pyz.NAME)
    command, args = container["command"], _pyz("verify")
    done = _run(
        [images.DOCKER, "run", "--name", _name(), "-v", f"{volume_dir}:{mount['mountPath']}:ro",
         "--entrypoint", command[0], bare, *command[1:], *args]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, *_, last = done.stdout.strip().splitlines()
    assert first == "--- a/torch/_inductor/graph.py" and "formats the implicit-fallback log lazily" in last


def test_a_read_only_root_filesystem_gets_one_sentence_and_the_server_does_not_start(
    dist: Path, bare: str
) -> None:
    server = ["python", "-c", "print('server started')"]
    done = _run(docker_form("start-time-docker", dist, bare, server, "--name", _name(), "--read-only"))
    assert done.returncode == 4 and "server started" not in done.stdout, done.stdout
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("torch-lazylog: error: Expected to be able to write /opt/venv/lib/python3.")
    assert "is on a read-only filesystem" in done.stderr and "at container start" in done.stderr


def test_the_lenient_form_starts_unpatched_with_the_sentence_in_the_log(dist: Path, bare: str) -> None:
    assert "--read-only" in shlex.split(block("start-time-lenient").replace("\\\n", " "))
    done = _run(docker_form("start-time-lenient", dist, bare, _pyz("verify"), "--name", _name()))
    assert done.returncode == 1 and "formats the implicit-fallback log eagerly" in done.stdout, done.stderr
    assert done.stderr.count("\n") == 1 and "is on a read-only filesystem" in done.stderr, done.stderr


def test_a_vendor_build_says_what_to_mount_then_works_with_it(dist: Path, tmp_path: Path) -> None:
    """The vendor stand-in (its lazy graph.py is no known release's bytes: reading it takes libcst):
    the form without the directory exits 4 in one sentence naming it and the pip line for the image's
    Python, the server not started; with the directory the docs' pip line makes, it starts."""
    vendor = need(images.vendor_fixed_base)
    assert isinstance(vendor, str)
    minor = images.rocm_python_minor()
    server = ["python", "-c", "print('server started')"]
    done = _run(docker_form("start-time-docker", dist, vendor, server, "--name", _name()))
    assert done.returncode == 4 and "server started" not in done.stdout, done.stdout
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"found none for this Python ({minor} on " in done.stderr
    assert f"in {MOUNT}/torch-lazylog-libs." in done.stderr
    assert (
        f"pip install --target torch-lazylog-libs --only-binary=:all: --python-version {minor} "
        in done.stderr
    )

    with_libs = tmp_path / "dist"
    shutil.copytree(dist, with_libs)
    pip = shlex.split(block("start-time-libs"))
    assert pip[:3] == ["pip", "install", "--target"] and pip[3] == "dist/torch-lazylog-libs"
    pip = [w if w != "3.12" else minor for w in pip]  # the docs' example is the ROCm images' Python
    made = subprocess.run(
        [sys.executable, "-m", *pip, "--quiet"], cwd=tmp_path, capture_output=True, text=True,
        env=realdata.pip_env(), check=False,
    )  # fmt: skip
    if made.returncode != 0:
        need(lambda: _unavailable(f"pip could not make the libcst directory: {made.stderr.strip()[-600:]}"))
    done = _run(docker_form("start-time-docker", with_libs, vendor, [*server], "--name", _name()))
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "server started", done.stderr
    assert "formats the implicit-fallback log lazily already" in done.stdout
