"""verify --image (issue 62): an image read from its layers, nothing run, nothing unpacked.

The unit tests (references, whiteouts, symlinks, the image's sys.path) take milliseconds. The live
ones build small images over the project's Debian base holding a real torch 2.10.0 site (graph.py,
version.py, its dist-info) in a venv first on PATH, before and after the README's step, and a layer
over the patched one that deletes torch or replaces its site directory (an opaque directory); then
read them as `docker save` archives, OCI layouts and OCI archives (skopeo) with no engine reachable,
and from a registry server (Debian's docker-registry) on loopback. The 7.6 GB stand-in base, with the
step and without, is read from that registry, pushed there by the engine. Each answer is held to
verify's own in a container of the same image.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patcher.core.errors import LazylogError
from patcher.image import judge, ref, source
from patcher.image.tree import Tree, keeps
from tests import images, realdata
from tests.conftest import need_image
from tests.helpers import readme_snippet

# ---- pure: references, whiteouts, links, sys.path (milliseconds) --------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "docker-archive:/x/img.tar", ref.Ref("docker-archive", path="/x/img.tar"), id="docker-archive"
        ),
        pytest.param("oci-archive:img.tar", ref.Ref("oci-archive", path="img.tar"), id="oci-archive"),
        pytest.param("oci:/layout", ref.Ref("oci", path="/layout"), id="oci-no-tag"),
        pytest.param("oci:/layout:v1", ref.Ref("oci", path="/layout", tag="v1"), id="oci-tag"),
        pytest.param("oci:rel/dir", ref.Ref("oci", path="rel/dir"), id="oci-relative"),
        pytest.param(
            "docker://127.0.0.1:5000/team/img:2.10",
            ref.Ref("docker", host="127.0.0.1:5000", name="team/img", tag="2.10"),
            id="registry-tag",
        ),
        pytest.param(
            "docker://reg.example/img@sha256:" + "a" * 64,
            ref.Ref("docker", host="reg.example", name="img", digest="sha256:" + "a" * 64),
            id="registry-digest",
        ),
        pytest.param(
            "docker://localhost/img", ref.Ref("docker", host="localhost", name="img"), id="registry-localhost"
        ),
    ],
)
def test_references_parse(text: str, expected: ref.Ref) -> None:
    assert ref.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        pytest.param("ubuntu:22.04", "names no transport", id="no-transport"),
        pytest.param("docker:img", "does not start with docker://", id="no-slashes"),
        pytest.param("docker://img:latest", "is not HOST/NAME", id="no-host"),
        pytest.param("docker://library/img", "names no registry host", id="hub-path"),
        pytest.param("docker://h.io/Upper", "is not HOST/NAME", id="bad-name"),
        pytest.param("oci-archive:", "names no path", id="no-path"),
    ],
)
def test_bad_references_are_one_sentence(text: str, why: str) -> None:
    with pytest.raises(LazylogError) as caught:
        ref.parse(text)
    assert caught.value.code == 4 and why in caught.value.message and repr(text) in caught.value.message


def test_loopback_hosts_are_plain_http() -> None:
    assert ref.parse("docker://127.0.0.1:5000/a").loopback
    assert ref.parse("docker://localhost:5000/a").loopback
    assert not ref.parse("docker://registry.example:5000/a").loopback


def _layer(*members: tuple[str, bytes | str | None]) -> io.BytesIO:
    """A layer's tar: (name, bytes) a file, (name, None) a directory, (name, "->target") a symlink."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            info.mtime = 1_700_000_000
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content.removeprefix("->")
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    data.seek(0)
    return data


IMAGE_PYTHON = "3.9"  # the image's own interpreter, never the runner's
SITE = f"opt/venv/lib/python{IMAGE_PYTHON}/site-packages"
GRAPH = f"{SITE}/torch/_inductor/graph.py"
PYC = (
    f"{SITE}/torch/_inductor/__pycache__/graph.cpython-{IMAGE_PYTHON.replace('.', '')}.pyc"  # its name there
)


def test_only_the_decisions_files_are_kept() -> None:
    tree = Tree()
    tree.apply(
        _layer(
            (GRAPH, b"eager"),
            (f"{SITE}/torch/_inductor/lowering.py", b"x" * 1000),
            (PYC, b"h" * 16 + b"code" * 100),
            (f"{SITE}/torch-2.10.0.dist-info/RECORD", b"rows"),
        ),
        "layer 1",
    )
    assert set(tree.files) == {
        GRAPH,
        PYC,
        f"{SITE}/torch-2.10.0.dist-info/RECORD",
    }
    assert tree.files[PYC].data == b"h" * 16
    assert keeps("usr/lib/python3/dist-packages/numpy/core.py") is None


def test_a_later_file_replaces_an_earlier_one() -> None:
    tree = Tree()
    tree.apply(_layer((GRAPH, b"eager")), "layer 1")
    tree.apply(_layer((GRAPH, b"lazy")), "layer 2")
    assert tree.files[GRAPH].data == b"lazy"


def test_a_whiteout_deletes_a_directory_below() -> None:
    tree = Tree()
    tree.apply(_layer((GRAPH, b"eager"), (f"{SITE}/torch-2.10.0.dist-info/RECORD", b"rows")), "layer 1")
    tree.apply(_layer((f"{SITE}/.wh.torch", b"")), "layer 2")
    assert list(tree.files) == [f"{SITE}/torch-2.10.0.dist-info/RECORD"]


def test_a_whiteout_deletes_only_below_its_own_layer() -> None:
    tree = Tree()
    tree.apply(_layer((GRAPH, b"old")), "layer 1")
    tree.apply(_layer((GRAPH, b"new"), (f"{SITE}/torch/_inductor/.wh.graph.py", b"")), "layer 2")
    assert tree.files[GRAPH].data == b"new"


def test_an_opaque_directory_hides_everything_below_it() -> None:
    tree = Tree()
    tree.apply(_layer((GRAPH, b"old"), (f"{SITE}/torch-2.10.0.dist-info/RECORD", b"rows")), "layer 1")
    tree.apply(_layer((f"{SITE}/", None), (f"{SITE}/.wh..wh..opq", b""), (GRAPH, b"new")), "layer 2")
    assert {p: e.data for p, e in tree.files.items()} == {GRAPH: b"new"}


def test_a_file_over_a_directory_deletes_it() -> None:
    tree = Tree()
    tree.apply(_layer((GRAPH, b"old")), "layer 1")
    tree.apply(_layer((f"{SITE}/torch", b"not a package")), "layer 2")
    assert GRAPH not in tree.files


def test_links_resolve_as_the_image_would() -> None:
    tree = Tree()
    tree.apply(
        _layer(
            ("usr/bin/python3.9", b"ELF"),
            ("usr/bin/python3", "->python3.9"),
            ("opt/venv/bin/python", "->/usr/bin/python3"),
            ("opt/venv/bin/python3", "->python"),
        ),
        "layer 1",
    )
    assert tree.resolve("/opt/venv/bin/python3") == "/usr/bin/python3.9"


def test_a_compression_it_cannot_read_is_one_sentence() -> None:
    with pytest.raises(LazylogError) as caught:
        source.check_compression("application/vnd.oci.image.layer.v1.tar+zstd", "sha256:ab")
    assert caught.value.code == 4 and "zstd" in caught.value.message
    with pytest.raises(LazylogError) as garbage:
        Tree().apply(io.BytesIO(b"\x28\xb5\x2f\xfd" + b"\0" * 600), "layer 1 of x")
    assert garbage.value.code == 4 and "layer 1 of x" in garbage.value.message


def test_an_archive_from_a_pipe_is_one_sentence(tmp_path: Path) -> None:
    """`docker save IMAGE | torch-lazylog verify --image docker-archive:/dev/stdin`: refused with what
    to do instead (read in place, an archive needs a file), not the OS's "Illegal seek"."""
    archive = tmp_path / "image.tar"
    with tarfile.open(archive, "w") as tar:
        tar.addfile(tarfile.TarInfo("manifest.json"))
    for transport in ("docker-archive", "oci-archive"):
        done = subprocess.run(
            [sys.executable, "-m", "patcher", "verify", "--image", f"{transport}:/dev/stdin"],
            input=archive.read_bytes(), capture_output=True, timeout=60,
        )  # fmt: skip
        said = done.stderr.decode()
        assert done.returncode == 4, said
        assert "docker save -o image.tar IMAGE" in said and "Illegal seek" not in said, said
        assert said.count("\n") == 1 and "Traceback" not in said, said


@pytest.mark.parametrize(
    ("status", "said"),
    [(401, "refused access (HTTP 401"), (403, "log in with `docker login h.io`"), (404, "has no such image")],
)
def test_a_registrys_refusal_is_one_sentence(status: int, said: str) -> None:
    from patcher.image.registry import refused

    error = refused("docker://h.io/a:1", "h.io", status, "Reason")
    assert error.code == 4 and said in error.message and "docker://h.io/a:1" in error.message


def _config(env: list[str], user: str = "") -> dict[str, Any]:
    return {"config": {"Env": env, "User": user}}


def test_the_venv_first_on_path_is_python3() -> None:
    tree = Tree()
    tree.apply(
        _layer(
            ("usr/bin/python3.9", b""),
            ("usr/bin/python3", "->python3.9"),
            ("opt/venv/bin/python3", "->/usr/bin/python3"),
            ("opt/venv/pyvenv.cfg", b"home = /usr/bin\ninclude-system-site-packages = false\n"),
        ),
        "layer 1",
    )
    found = judge.python(tree, _config(["PATH=/opt/venv/bin:/usr/bin"]), None)
    assert found.executable == "/opt/venv/bin/python3" and found.minor == "3.9"
    assert found.path == ("/opt/venv/lib/python3.9/site-packages",)
    given = judge.python(tree, _config(["PATH=/opt/venv/bin:/usr/bin"]), "/usr/bin/python3")
    assert given.executable == "/usr/bin/python3" and "/usr/lib/python3/dist-packages" in given.path
    system = judge.python(tree, _config(["PATH=/usr/bin", "PYTHONPATH=/extra"], user="app"), None)
    assert system.path == (
        "/extra",
        "/home/app/.local/lib/python3.9/site-packages",
        "/usr/local/lib/python3.9/dist-packages",
        "/usr/lib/python3/dist-packages",
        "/usr/lib/python3.9/dist-packages",
        "/usr/lib/python3.9/site-packages",
    )


# ---- live: real images, a real registry ----------------------------------------------------------

NOWHERE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}  # no engine is reachable from the tool

_SMALL_BASE = """\
FROM {os}
RUN python3 -m venv --without-pip /opt/venv
RUN --mount=type=bind,source=site,target=/site cp -a /site/. "$(echo /opt/venv/lib/python3*/site-packages)/"
ENV PATH=/opt/venv/bin:$PATH
COPY --from=torch-lazylog:0.1.0 /torch-lazylog /usr/local/bin/
"""
_DELETED = "FROM {patched}\nRUN rm -rf /opt/venv/lib/python3*/site-packages/torch\n"
_REPLACED = """\
FROM {patched}
RUN --mount=type=bind,source=site,target=/site d="$(echo /opt/venv/lib/python3*/site-packages)" \\
    && rm -rf "$d" && mkdir "$d" && cp -a /site/. "$d/"
"""


def _tag(name: str) -> str:
    return f"torch-lazylog-test:unrun-{name}-{os.getpid()}"


def _build(context: Path, tag: str, dockerfile: str) -> str:
    (context / "Dockerfile").write_text(dockerfile)
    done = images.docker("build", "--network=host", "-t", tag, str(context), env=images.BUILDKIT)
    assert done.returncode == 0, done.stderr[-2000:]
    return tag


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patcher", "verify", "--json", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **NOWHERE},
        cwd=images.ROOT,
    )


def _documented(line: int, values: dict[str, str | list[str]]) -> subprocess.CompletedProcess[str]:
    """The README's `line` (0: CI's, 1: a fleet's) with this test's references, no engine in reach."""
    from tests.docs import command

    argv = command("image-unrun", {"torch-lazylog": [sys.executable, "-m", "patcher"], **values}, line)
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=600, env={**os.environ, **NOWHERE}, cwd=images.ROOT
    )


def _lines(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def _in_container(tag: str) -> dict[str, Any]:
    done = images.docker(
        "run", "--rm", "--network=none", tag, "torch-lazylog", "verify", "--json", timeout=300
    )
    assert done.returncode in (0, 1), done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def _without_image_fields(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k not in ("image", "platform", "installs")}


def _containers(tags: dict[str, str]) -> list[str]:
    """Containers of these images (their tags are this run's own: other suites share the engine)."""
    found: list[str] = []
    for tag in tags.values():
        done = images.docker("ps", "-aq", "--filter", f"ancestor={tag}", timeout=60)
        found += done.stdout.split()
    return found


@pytest.mark.image
def test_the_stand_in_base_before_and_after_the_step(tmp_path: Path) -> None:
    """The full case, first of the live ones (the small images' archives are not yet on the disk
    beside it): the 2.10.0 stand-in base (a real torch install and pip's pycs, about 7.6 GB) and
    the README's step over it, pushed by the engine to a registry on loopback and read from there,
    each as verify in its container answers. `docker push` streams the layers (about 4 GB gzipped);
    `docker save` stages the whole image in the engine before the archive is written, twice its size
    on the disk at once, which a CI runner's disk may not have. Archives and layouts are the small
    images' (below); bench/image_unrun.py reads this base too."""
    base = need_image(images.rocm_base)
    patched = _tag("standin-patched")
    root = tmp_path / "context"
    root.mkdir()
    storage = tmp_path / "registry"
    storage.mkdir()
    pushed: list[str] = []
    try:
        with images.tool_named():
            _build(root, patched, f"FROM {base}\n{readme_snippet()}")
        with images.tool_volume() as volume:
            shown = images.docker(
                "run", "--rm", "--network=none", "-v", f"{volume}:/mnt:ro", base,
                "python3", "-B", "/mnt/torch-lazylog", "verify", "--json", timeout=300,
            )  # fmt: skip
        eager_there = json.loads(shown.stdout)
        patched_there = _in_container(patched)
        with registry(storage) as host:
            for name, tag in (("eager", base), ("patched", patched)):
                # The patched image's push sends only the step's layers: the registry holds the base's.
                pushed.append(f"{host}/standin:{name}-{os.getpid()}")
                assert images.docker("tag", tag, pushed[-1], timeout=60).returncode == 0
                done = images.docker("push", "--quiet", pushed[-1], timeout=1800)
                assert done.returncode == 0, f"docker push {pushed[-1]}: {done.stderr}"
            done = _run(*[w for name in pushed for w in ("--image", f"docker://{name}")])
    finally:
        for name in [*pushed, patched]:
            images.docker("image", "rm", name, timeout=120)
        shutil.rmtree(storage, ignore_errors=True)  # some 4 GB, gone before the next test
    assert done.returncode == 1, done.stderr  # the worse of the two
    eager, lazy = _lines(done)
    assert [eager["image"], lazy["image"]] == [f"docker://{name}" for name in pushed]
    assert eager["exit_code"] == 1 and eager["pycs"], eager  # pip's pycs, read from their headers
    assert eager["next"].endswith(" apply") and eager_there["next"].endswith(" apply")
    assert _without_image_fields(eager) | {"next": None} == eager_there | {"next": None}
    assert lazy["exit_code"] == 0 and _without_image_fields(lazy) == patched_there


class Small:
    """The small images, written as `docker save` archives, OCI archives and one OCI layout."""

    def __init__(self, root: Path, tags: dict[str, str]) -> None:
        self.root, self.tags = root, tags
        self.layout = root / "layout"
        self.expected: dict[str, dict[str, Any]] = {}

    def archive(self, name: str) -> str:
        return f"docker-archive:{self.root / (name + '.docker.tar')}"

    def oci_archive(self, name: str) -> str:
        return f"oci-archive:{self.root / (name + '.oci.tar')}"

    def oci(self, name: str) -> str:
        return f"oci:{self.layout}:{name}"


def _skopeo(*args: str, engine: bool = False) -> None:
    """skopeo, with no engine in reach unless it reads from it (`docker-daemon:`)."""
    done = subprocess.run(
        ["skopeo", *args],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, **({} if engine else NOWHERE)},
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Small]:
    base = need_image(images.os_image)
    root = tmp_path_factory.mktemp("unrun")
    context = root / "context"
    realdata.release_tree(images.ROCM_TORCH, context / "site")
    tags: dict[str, str] = {}
    try:
        with images.tool_named():
            tags["eager"] = _build(context, _tag("eager"), _SMALL_BASE.format(os=base))
            tags["patched"] = _build(context, _tag("patched"), f"FROM {tags['eager']}\n{readme_snippet()}")
        tags["deleted"] = _build(context, _tag("deleted"), _DELETED.format(patched=tags["patched"]))
        tags["replaced"] = _build(context, _tag("replaced"), _REPLACED.format(patched=tags["patched"]))
        made = Small(root, tags)
        for name, tag in tags.items():
            if name in ("eager", "patched"):
                made.expected[name] = _in_container(tag)
            saved = root / f"{name}.docker.tar"
            done = images.docker("save", "-o", str(saved), tag, timeout=600)
            assert done.returncode == 0, done.stderr
            _skopeo("copy", f"docker-archive:{saved}", f"oci:{made.layout}:{name}")
            _skopeo("copy", f"docker-archive:{saved}", f"oci-archive:{root / (name + '.oci.tar')}")
        _index(made.layout, {"linux/amd64": "eager", "linux/arm64": "patched"}, "multi")
        yield made
    finally:
        for tag in tags.values():
            images.docker("image", "rm", "-f", tag, timeout=120)
        shutil.rmtree(root, ignore_errors=True)  # some 2 GB of archives and layouts, gone with the module


def _index(layout: Path, platforms: dict[str, str], tag: str) -> None:
    """An image index in the layout over two of its images, each under a platform of its own."""
    index = json.loads((layout / "index.json").read_text())
    named = {m["annotations"][source.REF_NAME]: m for m in index["manifests"]}
    entries = []
    for platform, name in platforms.items():
        system, arch = platform.split("/")
        entry = {k: v for k, v in named[name].items() if k != "annotations"}
        entries.append(entry | {"platform": {"os": system, "architecture": arch}})
    body = json.dumps({"schemaVersion": 2, "mediaType": source.INDEX_TYPES[0], "manifests": entries}).encode()
    digest = hashlib.sha256(body).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(body)
    index["manifests"].append(
        {
            "mediaType": source.INDEX_TYPES[0],
            "digest": f"sha256:{digest}",
            "size": len(body),
            "annotations": {source.REF_NAME: tag},
        }
    )
    (layout / "index.json").write_text(json.dumps(index))


@pytest.mark.image
def test_archives_and_layouts_answer_as_verify_in_the_container(small: Small) -> None:
    refs = [f(name) for name in ("eager", "patched") for f in (small.archive, small.oci, small.oci_archive)]
    done = _run(*[w for r in refs for w in ("--image", r)])
    assert done.returncode == 1, done.stderr  # the worst of the six
    answers = _lines(done)
    assert [a["image"] for a in answers] == refs
    for answer in answers:
        name = "eager" if "eager" in answer["image"] else "patched"
        assert answer["exit_code"] == (1 if name == "eager" else 0), answer
        assert _without_image_fields(answer) == small.expected[name]
        assert answer["installs"] == [
            {
                "torch_dir": answer["torch_dir"],
                "imported": True,
                "state": answer["state"],
                "exit_code": answer["exit_code"],
            }
        ]
    ci = _documented(0, {"oci-archive:image.oci.tar": small.oci_archive("patched")})
    assert ci.returncode == 0 and "formats the implicit-fallback log lazily" in ci.stdout, ci
    assert _containers(small.tags) == []  # none was created to read them (verify's own ran with --rm)


@pytest.mark.image
def test_a_later_layer_that_deletes_or_replaces_torch_decides(small: Small) -> None:
    deleted = _run("--image", small.oci_archive("deleted"))
    assert deleted.returncode == 4, deleted.stdout
    (answer,) = _lines(deleted)
    assert "to find torch" in answer["message"] and answer["installs"] == []
    replaced = _run("--image", small.archive("replaced"), "--image", small.oci("replaced"))
    assert replaced.returncode == 1
    for answer in _lines(replaced):
        assert answer["state"] == "pristine" and answer["exit_code"] == 1, answer


@pytest.mark.image
def test_an_index_answers_per_platform(small: Small) -> None:
    done = _run("--image", small.oci("multi"))
    assert done.returncode == 1
    assert [(a["platform"], a["exit_code"]) for a in _lines(done)] == [("linux/amd64", 1), ("linux/arm64", 0)]
    arm = _run("--image", small.oci("multi"), "--platform", "linux/arm64")
    assert arm.returncode == 0 and [a["platform"] for a in _lines(arm)] == ["linux/arm64"]
    absent = _run("--image", small.oci("multi"), "--platform", "linux/s390x")
    assert absent.returncode == 4 and "linux/s390x" in _lines(absent)[0]["message"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def registry(root: Path) -> Iterator[str]:
    """Debian's docker-registry on a free loopback port, its storage under `root`."""
    port = _free_port()
    config = root / "registry.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {root / 'storage'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    server = subprocess.Popen(
        ["/usr/bin/docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert server.poll() is None and time.monotonic() < deadline, "the registry did not start"
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.image
def test_a_registry_answers_as_verify_in_the_container(small: Small, tmp_path: Path) -> None:
    with registry(tmp_path) as host:
        for name in ("eager", "patched"):
            _skopeo("copy", "--dest-tls-verify=false", small.oci(name), f"docker://{host}/unrun:{name}")
        _skopeo(
            "copy", "--all", "--dest-tls-verify=false", small.oci("multi"), f"docker://{host}/unrun:multi"
        )
        done = _documented(
            1,
            {
                "docker://HOST/team/server:TAG": f"docker://{host}/unrun:eager",
                "docker://HOST/team/trainer:TAG": f"docker://{host}/unrun:patched",
            },
        )
        assert done.returncode == 1, done.stderr
        eager, patched = _lines(done)
        assert (eager["exit_code"], patched["exit_code"]) == (1, 0)
        assert _without_image_fields(eager) == small.expected["eager"]
        assert _without_image_fields(patched) == small.expected["patched"]
        multi = _run("--image", f"docker://{host}/unrun:multi", "--platform", "linux/amd64")
        assert [(a["platform"], a["exit_code"]) for a in _lines(multi)] == [("linux/amd64", 1)]
        absent = _run("--image", f"docker://{host}/unrun:nothing")
        assert absent.returncode == 4
        (answer,) = _lines(absent)
        assert "HTTP 404" in answer["message"] and f"docker://{host}/unrun:nothing" in answer["message"]
