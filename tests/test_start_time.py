"""docs/start-time.md's forms, run as printed on real containers of the unmodified stand-ins: the
tool copied into a volume by the tool image, mounted read-only, applied before the server starts,
then the server exec'd.

The `docker run` form on the bare ROCm stand-in runs the benchmark chain (tests/scenarios/chain.py)
at a depth unpatched torch would need hours for; four ranks starting at once all succeed; the pod
spec's init container and server container run as the kubelet would run them, on a vendor's build
(which takes the libcst the volume carries); a read-only root filesystem gets one sentence, and each
form does what the docs say then; without the libcst directory a vendor's build gets one sentence.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import subprocess
from collections.abc import Iterator

import pytest
import yaml  # type: ignore[import-untyped]  # pyyaml: a dependency of libcst

from tests import docs, images
from tests.conftest import need

pytestmark = pytest.mark.image

SCENARIOS = docs.ROOT / "tests" / "scenarios"
MOUNT = "/mnt/torch-lazylog"
DEEP = 32  # unpatched: hours (the text grows ~1.6x a level; 19 s at depth 20); patched: seconds
_names = itertools.count()


def block(name: str) -> str:
    """The fenced block between `<!-- name -->` and `<!-- /name -->` in README.md or docs/*.md."""
    return docs.body(name)


@pytest.fixture(scope="module")
def volume() -> Iterator[str]:
    """The tool in a named volume, as the README's line fills it from the tool image."""
    with images.tool_volume() as name:
        yield name


@pytest.fixture(scope="module")
def bare() -> str:
    tag = need(images.rocm_base)
    assert isinstance(tag, str)
    return tag


@pytest.fixture(scope="module")
def vendor() -> str:
    tag = need(images.vendor_eager_base)
    assert isinstance(tag, str)
    return tag


def _name() -> str:
    return f"torch-lazylog-start-time-{os.getpid()}-{next(_names)}"


def docker_form(name: str, volume: str, image: str, server: list[str], *options: str) -> list[str]:
    """The docs' `docker run` block as argv: the volume, IMAGE and the server's command line replaced,
    `options` (a name, the scenarios' mount) added after `run`."""
    words = shlex.split(block(name).replace("\\\n", " "))
    assert words[:2] == ["docker", "run"] and "IMAGE" in words and "torch-lazylog-start" in words
    mount = f"torch-lazylog:{MOUNT}:ro"
    assert mount in words, words
    start = words.index("torch-lazylog-start")
    words = [images.DOCKER, "run", *options, *words[2 : start + 1], *server]
    return [f"{volume}:{MOUNT}:ro" if w == mount else image if w == "IMAGE" else w for w in words]


def _run(argv: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        name = argv[argv.index("--name") + 1] if "--name" in argv else None
        if name:
            images.docker("rm", "-f", name, timeout=60)


def _pyz(*args: str) -> list[str]:
    return ["python3", "-B", f"{MOUNT}/torch-lazylog", *args]


def test_the_bare_stand_in_is_eager(volume: str, bare: str) -> None:
    """Before: a plain container of the same image, the file only verifying, says eager."""
    done = _run([images.DOCKER, "run", "--rm", "-v", f"{volume}:{MOUNT}:ro", bare, *_pyz("verify", "--json")])
    assert done.returncode == 1 and json.loads(done.stdout)["state"] == "pristine", done.stderr


def test_the_docker_form_runs_the_chain_patched(volume: str, bare: str) -> None:
    """The server: verify inside (0), then the custom-op chain at a depth unpatched torch would take
    hours for, compiled by Inductor; it completes within a generous bound and prints `done`."""
    server = [
        "sh",
        "-c",
        f"{shlex.join(_pyz('verify'))} && exec python3 {SCENARIOS.name}/chain.py start-time {DEEP}",
    ]
    form = docker_form(
        "start-time-docker", volume, bare, server,
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


def test_four_ranks_applying_at_once_all_succeed(volume: str, bare: str) -> None:
    """One container, the form's script started four times at once (ranks of one server): each exits
    0 and starts its rank, exactly one patched, and the torch verifies lazy afterwards."""
    script = shlex.split(block("start-time-docker").replace("\\\n", " "))
    form = script[script.index("-c") + 1]
    rank = shlex.join(["sh", "-c", form, "torch-lazylog-start", "python3", "-c", "print('rank up')"])
    ranks = (
        f'for i in 1 2 3 4; do ({rank} > /tmp/rank$i 2>&1; echo "exit $?" >> /tmp/rank$i) & done; wait; '
        'for i in 1 2 3 4; do echo "== rank $i"; cat /tmp/rank$i; done; echo "== verify"; '
        f"{shlex.join(_pyz('verify', '--json'))}"
    )
    done = _run(
        [images.DOCKER, "run", "--name", _name(), "-v", f"{volume}:{MOUNT}:ro", bare, "sh", "-c", ranks]
    )
    ranks_out, _, verified = done.stdout.partition("== verify\n")
    outputs = ranks_out.split("== rank ")[1:]
    assert len(outputs) == 4, done.stdout
    for output in outputs:
        assert output.rstrip().endswith("rank up\nexit 0"), output
    assert sum("\nPatched graph.py line " in o for o in outputs) == 1, done.stdout
    assert sum("lazily already" in o for o in outputs) == 3, done.stdout
    assert done.returncode == 0 and json.loads(verified)["state"] == "patched", done.stderr


def test_the_pod_runs_as_kubernetes_would_run_it_and_patches_a_vendor_build(vendor: str) -> None:
    """The pod spec's init container (the tool image's own command, the emptyDir on its mountPath),
    then its server container (its command as the entrypoint, its args replaced by a verify, the
    emptyDir read-only on its mountPath), on the vendor stand-in: libcst from the copy reads it."""
    pod = yaml.safe_load(block("start-time-pod"))
    (init,) = pod["spec"]["initContainers"]
    (container,) = pod["spec"]["containers"]
    (volume,) = pod["spec"]["volumes"]
    (init_mount,) = init["volumeMounts"]
    (mount,) = container["volumeMounts"]
    assert volume["emptyDir"] == {} and init_mount["name"] == mount["name"] == volume["name"]
    assert init["image"] == images.TOOL_NAME and "command" not in init and "args" not in init
    assert mount["readOnly"] is True and container["image"] == "IMAGE"
    empty_dir = f"torch-lazylog-test-pod-{os.getpid()}-{next(_names)}"  # a fresh volume, as emptyDir is
    try:
        with images.tool_named() as tool:
            done = _run(
                [
                    images.DOCKER,
                    "run",
                    "--name",
                    _name(),
                    "-v",
                    f"{empty_dir}:{init_mount['mountPath']}",
                    tool,
                ]
            )
        assert done.returncode == 0, done.stderr
        command, args = container["command"], _pyz("verify")
        done = _run(
            [images.DOCKER, "run", "--name", _name(), "-v", f"{empty_dir}:{mount['mountPath']}:ro",
             "--entrypoint", command[0], vendor, *command[1:], *args]
        )  # fmt: skip
    finally:
        images.docker("volume", "rm", "-f", empty_dir, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert (
        lines[0] == "--- a/torch/_inductor/graph.py"
        and "(a build with release 2.10.0's patch site)" in done.stdout
    )
    assert "formats the implicit-fallback log lazily" in lines[-1], done.stdout


def test_a_read_only_root_filesystem_gets_one_sentence_and_the_server_does_not_start(
    volume: str, bare: str
) -> None:
    server = ["python3", "-c", "print('server started')"]
    done = _run(docker_form("start-time-docker", volume, bare, server, "--name", _name(), "--read-only"))
    assert done.returncode == 4 and "server started" not in done.stdout, done.stdout
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("torch-lazylog: error: Expected to be able to write /opt/venv/lib/python3.")
    assert "is on a read-only filesystem" in done.stderr and "at container start" in done.stderr


def test_the_lenient_form_starts_unpatched_with_the_sentence_in_the_log(volume: str, bare: str) -> None:
    assert "--read-only" in shlex.split(block("start-time-lenient").replace("\\\n", " "))
    done = _run(docker_form("start-time-lenient", volume, bare, _pyz("verify"), "--name", _name()))
    assert done.returncode == 1 and "formats the implicit-fallback log eagerly" in done.stdout, done.stderr
    assert done.stderr.count("\n") == 1 and "is on a read-only filesystem" in done.stderr, done.stderr


def test_a_vendor_build_is_patched_from_the_volume_and_without_its_libcst_gets_one_sentence(
    volume: str, vendor: str
) -> None:
    """The vendor stand-in (its graph.py is no known release's bytes: reading it takes libcst): the
    docker form patches it with the libcst the volume carries and starts the server; a volume holding
    the file alone gets one sentence naming the tool image, and the server does not start."""
    server = ["python3", "-c", "print('server started')"]
    done = _run(docker_form("start-time-docker", volume, vendor, server, "--name", _name()))
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "server started", done.stderr
    assert (
        "Patched graph.py line " in done.stdout
        and "(a build with release 2.10.0's patch site)" in done.stdout
    )
    alone = f"torch-lazylog-test-alone-{os.getpid()}-{next(_names)}"
    try:
        copied = _run([images.DOCKER, "run", "--name", _name(), "-v", f"{volume}:/from:ro", "-v", f"{alone}:/to",
                       vendor, "cp", "/from/torch-lazylog", "/to/"])  # fmt: skip
        assert copied.returncode == 0, copied.stderr
        done = _run(docker_form("start-time-docker", alone, vendor, server, "--name", _name()))
    finally:
        images.docker("volume", "rm", "-f", alone, timeout=120)
    assert done.returncode == 4 and "server started" not in done.stdout, done.stdout
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    minor = images.rocm_python_minor()
    assert f"found none for this Python ({minor} on " in done.stderr
    assert (
        f"in {MOUNT}/torch-lazylog-libs." in done.stderr and "run the file from the tool image" in done.stderr
    )
