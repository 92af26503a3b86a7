"""A real Docker engine and stand-ins for the users' base images, built once and kept by the engine.

The stand-ins start from Debian bookworm from debootstrap (minbase, python3, python3-venv,
ca-certificates), imported with `docker import`. No image registry is reachable here, so nothing is
pulled. Three layouts, as the users' images have them:
- `base_image(version)`: `/opt/venv` holding a real torch from the package index, as the
  `rocm/pytorch` images have it; for torch 2.10.0 that venv runs the ROCm images' Python (the minor
  of Dockerfile.rocm's default base tag), an interpreter of this machine copied into the image;
- `system_image(version)`: vLLM's ROCm layout: the system Python with torch installed by
  `uv pip install --system` into its dist-packages, no /opt/venv;
- `vendor_fixed_image()`: the 2.10.0 base whose graph.py a vendor already made lazy.
Real wheels are downloaded once into $TORCH_LAZYLOG_CACHE/linux-wheels and served to the build from
a loopback HTTP server, so a rebuild downloads nothing.

Machine scaffolding, not product: containers reach the package index only through the host's CA
bundle and the host's network, so the base carries that bundle (and PIP_CERT/SSL_CERT_FILE), and
every build and run uses --network=host.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests import realdata
from tests.helpers import readme_snippet

# Debian's client: BuildKit works with DOCKER_BUILDKIT=1 (no buildx plugin needed).
ROOT = Path(__file__).resolve().parent.parent
DOCKER = "/usr/bin/docker"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SUITE = "bookworm"
OS_TAG = f"torch-lazylog-os:{SUITE}"
BUILDKIT = {"DOCKER_BUILDKIT": "1"}


class EngineUnavailable(realdata.Unavailable):
    """No Docker engine could be reached or started."""


def docker(
    *args: str, env: dict[str, str] | None = None, timeout: float = 3600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DOCKER, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def _engine_up() -> bool:
    try:
        return docker("info", "--format", "{{.ServerVersion}}", timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def engine() -> None:
    """Reach the engine, starting dockerd (as root) when it is installed but not running: one
    process starts it, under a lock (the fetch processes and the tests start at once)."""
    if _engine_up():
        return
    with realdata.cache_lock("dockerd"):
        if not _engine_up():
            _start_engine()


def _start_engine() -> None:
    dockerd = shutil.which("dockerd")
    if dockerd is None or not Path(DOCKER).exists():
        raise EngineUnavailable("no Docker engine: install Debian's docker.io (`.ci/run` does)")
    log = realdata.CACHE / "dockerd.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        subprocess.Popen(
            [dockerd, "--storage-driver=overlay2"], stdout=out, stderr=out, start_new_session=True
        )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if _engine_up():
            return
        time.sleep(1)
    raise EngineUnavailable(f"dockerd did not start within 90 s (see {log})")


def has_image(tag: str) -> bool:
    return docker("image", "inspect", tag, timeout=60).returncode == 0


def _mirror() -> str:
    """The Debian mirror this machine's apt uses (whatever it is; never written down here)."""
    for source in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        with contextlib.suppress(OSError):
            text = source.read_text()
            match = re.search(r"^URIs:\s*(\S+/debian)\s*$", text, re.M) or re.search(
                r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)\s", text, re.M
            )
            if match:
                return match[1]
    raise EngineUnavailable("no Debian mirror found in /etc/apt to debootstrap the stand-in base from")


def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        raise realdata.Unavailable(f"could not {what}: {(done.stderr or done.stdout).strip()[-600:]}")


def os_image() -> str:
    """Debian bookworm (minbase + python3, python3-venv, ca-certificates) as an engine image."""
    return _debootstrapped(OS_TAG, ["python3", "python3-venv", "ca-certificates"])


def _debootstrapped(tag: str, packages: list[str], arch: str = "") -> str:
    """Debian bookworm (minbase and `packages`) as the engine image `tag`, made once with debootstrap:
    for this machine's architecture by `docker import`; for another (`arch`, debootstrap's name),
    as an image of that architecture with the host's CA bundle (_load_foreign)."""
    engine()
    if has_image(tag):
        return tag
    with realdata.cache_lock("image-os" + (f"-{arch}" if arch else "")):
        if has_image(tag):
            return tag
        if shutil.which("debootstrap") is None:
            raise EngineUnavailable("debootstrap is not installed (`.ci/run` installs it)")
        with tempfile.TemporaryDirectory(dir=realdata.CACHE) as work:
            root = Path(work) / "root"
            done = subprocess.run(
                ["debootstrap", *([f"--arch={arch}"] if arch else []), "--variant=minbase",
                 f"--include={','.join(packages)}", SUITE, str(root), _mirror()],
                capture_output=True, text=True, timeout=3600,
            )  # fmt: skip
            _check(done, f"debootstrap the stand-in base {tag}")
            if arch:
                _load_foreign(root, tag, arch)
                return tag
            tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
            imported = subprocess.run(
                [DOCKER, "import", "-", tag], stdin=tar.stdout, capture_output=True, text=True
            )
            tar.wait()
            _check(imported, f"import the stand-in base {tag}")
    return tag


def _load_foreign(root: Path, tag: str, arch: str) -> None:
    """`root` as the image `tag` of architecture `arch`, with the host's CA bundle and the stand-ins'
    pip settings (_HEADER's): the engine's `docker import` sets no other architecture (Docker 20.10
    without experimental), so this writes the tarball `docker save` would and loads it."""
    shutil.copy2(CA_BUNDLE, root / "etc" / "ssl" / "certs" / "ca-certificates.crt")
    with tempfile.TemporaryDirectory(dir=realdata.CACHE) as work:
        bundle = Path(work)
        subprocess.run(
            ["tar", "-C", str(root), "--numeric-owner", "-cf", str(bundle / "layer.tar"), "."], check=True
        )
        digest = hashlib.sha256()
        with open(bundle / "layer.tar", "rb") as layer:
            for chunk in iter(lambda: layer.read(1 << 20), b""):
                digest.update(chunk)
        cert = "/etc/ssl/certs/ca-certificates.crt"
        env = [f"PATH={DEFAULT_PATH}", f"PIP_CERT={cert}", f"SSL_CERT_FILE={cert}"]
        env += [
            "PIP_DISABLE_PIP_VERSION_CHECK=1",
            "PIP_ROOT_USER_ACTION=ignore",
            "PIP_BREAK_SYSTEM_PACKAGES=1",
        ]
        config = json.dumps({
            "architecture": arch, "os": "linux", "created": "1970-01-01T00:00:00Z",
            "config": {"Env": env, "Cmd": ["/bin/bash"]},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest.hexdigest()}"]},
            "history": [{"created": "1970-01-01T00:00:00Z", "created_by": f"debootstrap --arch={arch} {SUITE}"}],
        }).encode()  # fmt: skip
        name = f"{hashlib.sha256(config).hexdigest()}.json"
        (bundle / name).write_bytes(config)
        manifest = [{"Config": name, "RepoTags": [tag], "Layers": ["layer.tar"]}]
        (bundle / "manifest.json").write_text(json.dumps(manifest))
        tar = subprocess.Popen(["tar", "-C", str(bundle), "-c", "."], stdout=subprocess.PIPE)
        loaded = subprocess.run([DOCKER, "load"], stdin=tar.stdout, capture_output=True, text=True)
        tar.wait()
        _check(loaded, f"load the stand-in base {tag}")


# arm64 (GH200, GB200 hosts): run here by qemu-user-static through binfmt_misc, registered with the
# F flag so that it works inside chroots and containers.
ARM64_OS_TAG = f"torch-lazylog-os:{SUITE}-arm64"
QEMU_AARCH64 = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")


def arm64_emulated() -> None:
    """Make this machine run arm64 binaries (apt's qemu-user-static and binfmt-support)."""
    if not Path("/usr/sbin/update-binfmts").exists() or not Path("/usr/bin/qemu-aarch64-static").exists():
        raise EngineUnavailable(
            "qemu-user-static and binfmt-support are not installed (`.ci/run` installs them)"
        )
    if not Path("/proc/sys/fs/binfmt_misc/status").exists():
        subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"], check=False)
    subprocess.run(["update-binfmts", "--enable", "qemu-aarch64"], capture_output=True, check=False)
    if not QEMU_AARCH64.exists() or not QEMU_AARCH64.read_text().startswith("enabled"):
        raise EngineUnavailable("binfmt_misc has no enabled qemu-aarch64 entry (update-binfmts --enable)")


def arm64_os_image() -> str:
    """Debian bookworm for arm64 with python3, pip and ca-certificates: the base Dockerfile.rocm's
    tool stage builds on for linux/arm64 (a CUDA image's Python on GH200 stands in)."""
    arm64_emulated()
    return _debootstrapped(ARM64_OS_TAG, ["python3", "python3-pip", "ca-certificates"], "arm64")


_BASE_DOCKERFILE = """\
FROM {os_tag}
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \\
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
COPY wheels/ /tmp/wheels/
RUN python3 -m venv /opt/venv \\
 && /opt/venv/bin/pip install --no-cache-dir --find-links /tmp/wheels torch=={version} \\
 && rm -rf /tmp/wheels
"""


def base_image(version: str) -> str:
    """A stand-in for `rocm/pytorch:..._pytorch_release_<version>`: /opt/venv with real torch."""
    tag = f"torch-lazylog-standin:torch-{version}"
    engine()
    if has_image(tag):
        return tag
    os_tag = os_image()
    with realdata.cache_lock(f"image-{version}"):
        if has_image(tag):
            return tag
        with tempfile.TemporaryDirectory(dir=realdata.CACHE) as work:
            context = Path(work)
            shutil.copy2(CA_BUNDLE, context / "ca-certificates.crt")
            wheels = context / "wheels"
            wheels.mkdir()
            # A wheel on this machine's disk (2.13.0's CPU build) is found by the host's pip only.
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                 "--no-index", "--dest", str(wheels), f"torch=={version}"],
                capture_output=True, text=True,
            )  # fmt: skip
            (context / "Dockerfile").write_text(_BASE_DOCKERFILE.format(os_tag=os_tag, version=version))
            done = docker("build", "--network=host", "-t", tag, str(context), env={"DOCKER_BUILDKIT": "0"})
            _check(done, f"build the stand-in base with torch {version}")
    return tag


# The torch release the ROCm images ship, and the tests' stand-ins for them hold.
ROCM_TORCH = "2.10.0"
STANDIN = "torch-lazylog-standin"
SITE_PACKAGES_GLOB = "lib/python3*/site-packages"


def rocm_python_minor() -> str:
    """The Python of the ROCm image Dockerfile.rocm is written for (`..._py3.NN_...` in its tag)."""
    text = (ROOT / "Dockerfile.rocm").read_text()
    match = re.search(r"^ARG BASE_IMAGE=\S*_py(3\.\d+)_", text, re.M)
    assert match, "Dockerfile.rocm's default BASE_IMAGE names no Python"
    return match[1]


def interpreter(minor: str) -> Path:
    """A CPython `minor` of this machine, found as the suite finds the others, that lives whole under
    its own prefix (pyenv's do; a distribution's /usr one cannot be copied into another root)."""
    runner = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in [*realdata.other_pythons(), runner]:
        if candidate.name != f"python{minor}" or not os.access(candidate, os.X_OK):
            continue
        prefix = Path(
            subprocess.run(
                [str(candidate), "-c", "import sys; print(sys.base_prefix)"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()
        )  # fmt: skip
        if prefix != Path("/usr") and (prefix / "lib" / f"python{minor}" / "os.py").exists():
            return candidate
    raise realdata.Unavailable(f"this machine has no self-contained CPython {minor} (pyenv's) to copy")


def _portable_python(python: Path, destination: Path) -> None:
    """The interpreter's prefix without its tests, Tk, static library and site-packages (the venvs
    made from it have their own); the shared libraries it links are checked in the image."""
    prefix = python.parent.parent
    skip = {"test", "idlelib", "tkinter", "turtledemo", "site-packages"}
    shutil.copytree(
        prefix, destination, symlinks=True,
        ignore=lambda _, names: [n for n in names if n in skip or n.endswith(".a") or n.startswith("_tkinter")],
    )  # fmt: skip
    (destination / "lib" / python.name / "site-packages").mkdir()


# The wheels the stand-ins install, shared with the torch venvs of the cache.
linux_wheels = realdata.linux_wheels


def uv_wheel() -> Path:
    """uv's wheel for this machine (the stand-ins run this machine's Debian), downloaded once."""
    directory = realdata.CACHE / "linux-wheels" / "uv"
    found = sorted(directory.glob("uv-*.whl"))
    if found:
        return found[-1]
    with realdata.cache_lock("linux-wheels-uv"):
        found = sorted(directory.glob("uv-*.whl"))
        if not found:
            directory.mkdir(parents=True, exist_ok=True)
            realdata.pip(["download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest",
                          str(directory), "uv"], "uv")  # fmt: skip
            found = sorted(directory.glob("uv-*.whl"))
    return found[-1]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _served(directory: Path) -> Iterator[str]:
    """The wheels as a --find-links page on loopback, for builds on the host's network: nothing is
    copied into a build context or a layer."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


_log = realdata.log


def image_mb(tag: str) -> float:
    done = docker("image", "inspect", "--format", "{{.Size}}", tag, timeout=60)
    _check(done, f"inspect {tag}")
    return int(done.stdout.strip()) / 1e6


def patch_bytes(image: str, site: str) -> int:
    """The files the patch rewrites or adds in `image`, whose torch lives in `site` (a shell glob):
    graph.py, its pycs, RECORD and the undo record (an image layer holds a changed file whole)."""
    done = docker(
        "run", "--rm", image, "sh", "-c",
        f"du -cb {site}/torch/_inductor/graph.py {site}/torch/_inductor/__pycache__/graph.*.pyc"
        f" {site}/torch-*.dist-info/RECORD {site}/torch-*.dist-info/torch_lazylog.json | tail -1",
        timeout=300,
    )  # fmt: skip
    _check(done, f"measure the patch's files in {image}")
    return int(done.stdout.split()[0])


def _built(tag: str, lock: str, make: Callable[[Path], None]) -> str:
    """Build `tag` once under a lock: `make(context)` fills the context (and fetches the wheels the
    Dockerfile needs); the Dockerfile reaches the wheel cache as the URL in its WHEELS build arg."""
    engine()
    if has_image(tag):
        return tag
    with realdata.cache_lock(lock):
        if has_image(tag):
            return tag
        with tempfile.TemporaryDirectory(dir=realdata.CACHE) as work:
            context = Path(work)
            shutil.copy2(CA_BUNDLE, context / "ca-certificates.crt")
            make(context)
            wheels = realdata.CACHE / "linux-wheels"
            wheels.mkdir(parents=True, exist_ok=True)
            start = time.monotonic()
            with _served(wheels) as url:
                # The classic builder: BuildKit would keep each base's layers in its build cache
                # too, and a removed base would leave gigabytes there.
                done = docker(
                    "build", "--network=host", "--build-arg", f"WHEELS={url}", "-t", tag, str(context),
                    env={"DOCKER_BUILDKIT": "0"},
                )  # fmt: skip
            if done.returncode != 0:
                (realdata.CACHE / f"failed-{tag.replace(':', '-')}.log").write_text(done.stderr)
            _check(done, f"build the stand-in {tag} (its log: {realdata.CACHE}/failed-*.log)")
            _log(f"built {tag} in {time.monotonic() - start:.0f} s, {image_mb(tag):.0f} MB")
    return tag


_HEADER = """\
FROM {os_tag}
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \\
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
"""

_VENV_BASE = """\
COPY cpython/ /opt/cpython/
# The copied interpreter links its libpython and the Debian libraries its modules need: fail here
# unless every one resolves in this root.
RUN echo /opt/cpython/lib > /etc/ld.so.conf.d/cpython.conf && ldconfig \\
 && ! find /opt/cpython -name '*.so*' -type f -exec ldd {{}} + 2>&1 | grep 'not found' \\
 && /opt/cpython/bin/python{minor} -c 'import ctypes, ssl, sqlite3, lzma, bz2, zlib, uuid, decimal' \\
 && /opt/cpython/bin/python{minor} -m venv /opt/venv
ARG WHEELS
RUN /opt/venv/bin/pip install --no-cache-dir --no-index --find-links "${{WHEELS}}torch-{version}/" \
    torch=={version}
"""


# The PATH a container gets when its image sets none (an imported root sets none).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _rocm_venv() -> str:
    """/opt/venv on the ROCm images' Python with the real torch 2.10.0: the heavy layers."""
    minor = rocm_python_minor()
    tag = f"{STANDIN}:torch-{ROCM_TORCH}-venv-py{minor}"
    if has_image(tag):
        return tag
    os_tag = os_image()

    def make(context: Path) -> None:
        _portable_python(interpreter(minor), context / "cpython")
        dockerfile = _HEADER.format(os_tag=os_tag) + _VENV_BASE.format(minor=minor, version=ROCM_TORCH)
        (context / "Dockerfile").write_text(dockerfile)
        linux_wheels(ROCM_TORCH, minor)

    return _built(tag, f"image-{ROCM_TORCH}-venv-py{minor}", make)


def venv_on_path(venv: str, version: str = ROCM_TORCH) -> str:
    """`venv` with /opt/venv/bin first on PATH, as the ROCm images have it (so `python` and `python3`
    are the venv's): an ENV layer over it, named after its id."""
    done = docker("image", "inspect", "--format", "{{.Id}}", venv, timeout=60)
    _check(done, f"inspect {venv}")
    tag = f"{STANDIN}:torch-{version}-venv-on-path-{done.stdout.strip().removeprefix('sha256:')[:12]}"

    def make(context: Path) -> None:
        (context / "Dockerfile").write_text(f"FROM {venv}\nENV PATH=/opt/venv/bin:{DEFAULT_PATH}\n")

    return _built(tag, f"image-{version}-venv-on-path", make)


def rocm_base() -> str:
    """The `rocm/pytorch:..._py3.NN_pytorch_release_2.10.0` stand-in: /opt/venv on that Python, its
    bin/ first on PATH as in those images."""
    return venv_on_path(_rocm_venv())


# As vLLM's Dockerfile has it: pip in the system Python, uv installed with that pip, torch installed
# with `uv pip install --system` (Debian marks its Python externally managed: --break-system-packages).
_SYSTEM_BASE = """\
# The loopback server has no range requests: uv reads each wheel whole, on a loaded machine too.
ENV UV_LINK_MODE=copy UV_NO_CACHE=1 UV_HTTP_TIMEOUT=600
ARG WHEELS
RUN pip=$(echo /usr/share/python-wheels/pip-*.whl) \
 && python3 "$pip/pip" install --no-cache-dir --break-system-packages --no-index \
    --find-links "${{WHEELS}}uv/" "$pip" uv \
 && uv pip install --system --break-system-packages --no-index --find-links "${{WHEELS}}torch-{version}/" \
    torch=={version}
"""


def system_base() -> str:
    """vLLM's ROCm layout: torch 2.10.0 in the system Python's dist-packages (/usr/local), put there
    by `uv pip install --system`; no /opt/venv."""
    tag = f"{STANDIN}:torch-{ROCM_TORCH}-system-uv"
    if has_image(tag):
        return tag
    os_tag = os_image()

    def make(context: Path) -> None:
        done = docker(
            "run", "--rm", os_tag, "python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"
        )
        _check(done, "ask the stand-in's system Python its version")
        (context / "Dockerfile").write_text(
            _HEADER.format(os_tag=os_tag) + _SYSTEM_BASE.format(version=ROCM_TORCH)
        )
        linux_wheels(ROCM_TORCH, done.stdout.strip())
        uv_wheel()

    return _built(tag, f"image-{ROCM_TORCH}-system-uv", make)


# A vendor's torch 2.10.0: another small edit of its own (so graph.py is no release's bytes), and for
# the one that ships the fix the implicit-fallback argument lazy; RECORD's graph.py row matching those
# bytes, the pyc rebuilt, no undo record.
_VENDOR_EDIT = r"""
import base64, sys, glob, hashlib, importlib.util, py_compile
LAZY = sys.argv[1:] == ["lazy"]
(site,) = glob.glob("/opt/venv/lib/python3*/site-packages")
graph = site + "/torch/_inductor/graph.py"
(record,) = glob.glob(site + "/torch-*.dist-info/RECORD")
text = open(graph, "rb").read()
eager, lazy = b"error.operator_str(target, args, kwargs),", b"LazyString(error.operator_str, target, args, kwargs),"
assert text.count(eager) == 1 and text.startswith(b"from __future__")
text = b"# Vendor build of torch: see the vendor's release notes.\n" + (text.replace(eager, lazy) if LAZY else text)
open(graph, "wb").write(text)
digest = base64.urlsafe_b64encode(hashlib.sha256(text).digest()).rstrip(b"=").decode()
rows = open(record, encoding="utf-8").read().splitlines(keepends=True)
row = "torch/_inductor/graph.py,"
assert sum(r.startswith(row) for r in rows) == 1
rows = [f"{row}sha256={digest},{len(text)}\n" if r.startswith(row) else r for r in rows]
open(record, "w", encoding="utf-8").write("".join(rows))
py_compile.compile(graph, cfile=importlib.util.cache_from_source(graph), doraise=True,
                   invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
"""


def _vendor_base(kind: str) -> str:
    base = rocm_base()
    done = docker("image", "inspect", "--format", "{{.Id}}", base, timeout=60)
    _check(done, f"inspect {base}")
    # Named after the base's id: a rebuilt base gets a vendor image of its own.
    tag = f"{STANDIN}:torch-{ROCM_TORCH}-vendor-{kind}-{done.stdout.strip().removeprefix('sha256:')[:12]}"

    def make(context: Path) -> None:
        (context / "vendor_edit.py").write_text(_VENDOR_EDIT)
        (context / "Dockerfile").write_text(
            f"FROM {base}\nCOPY vendor_edit.py /tmp/\n"
            f"RUN /opt/venv/bin/python /tmp/vendor_edit.py {kind} && rm /tmp/vendor_edit.py\n"
        )

    return _built(tag, f"image-{ROCM_TORCH}-vendor-{kind}", make)


def vendor_fixed_base() -> str:
    """The 2.10.0 venv stand-in with a vendor's already lazy graph.py: one small layer over it."""
    return _vendor_base("lazy")


def vendor_eager_base() -> str:
    """The 2.10.0 venv stand-in with a vendor's build of graph.py (an edit of its own, the eager call):
    no release's bytes, so the tool reads its site with libcst. One small layer over it."""
    return _vendor_base("eager")


def tool_context(destination: Path) -> Path:
    """The build context Dockerfile.rocm expects: the tool's source, as the repository has it."""
    destination.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE", "Dockerfile.rocm", ".dockerignore",
                 ".ci/image-click.txt", ".ci/image-libcst.txt"):  # fmt: skip
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, destination / name)
    for name in ("patcher", "patches"):
        shutil.copytree(ROOT / name, destination / name, ignore=shutil.ignore_patterns("__pycache__"))
    return destination


# The tool image's name as the README's block and docs write it (`COPY --from=torch-lazylog:0.1.0 ...`):
# the tool's version as its tag (tests/test_packaging.py holds them equal).
TOOL_NAME = "torch-lazylog:0.1.0"


def _context_digest(context: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(context)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def tool_image(extra: str = "") -> str:
    """The tool image of this checkout, made by the README's command (Dockerfile.rocm's `torch-lazylog`
    stage) on the rocm-venv stand-in's Python, built once a content and named after it. `extra`: a
    module of that name added to the tool (another version of it)."""
    return _tool_image("", rocm_base, extra)


def _tool_image(platform: str, base_image: Callable[[], str], extra: str = "") -> str:
    """The README's tool-image build of this checkout on `base_image()`, for `platform` (BuildKit's
    --platform; "" for the engine's own), under a tag named after the context's content."""
    from tests.docs import command

    engine()
    with tempfile.TemporaryDirectory(dir=realdata.CACHE) as work:
        context = tool_context(Path(work) / "context")
        if extra:
            (context / "patcher" / extra).write_text('"""Only in another version of torch-lazylog."""\n')
        arch = platform.rpartition("/")[2]
        tag = f"torch-lazylog-tool:{arch + '-' if arch else ''}{_context_digest(context)}"
        if has_image(tag):
            return tag
        base = base_image()
        shown = command("tool-image", {".": str(context)})
        assert shown[:2] == ["docker", "build"] and shown[shown.index("-t") + 1] == TOOL_NAME, shown
        shown[shown.index("-t") + 1] = tag  # the README's name is given under a lock (tool_named)
        shown[shown.index("-f") + 1] = str(context / shown[shown.index("-f") + 1])
        with realdata.cache_lock("image-tool" + (f"-{arch}" if arch else "")):
            if has_image(tag):
                return tag
            start = time.monotonic()
            done = docker(
                *shown[1:2], "--network=host", "--progress=plain", *(["--platform", platform] if platform else []),
                "--build-arg", f"BASE_IMAGE={base}", *shown[2:], env=BUILDKIT,
            )  # fmt: skip
            _check(done, f"build the tool image ({' '.join(shown)}{' for ' + platform if platform else ''})")
            _log(f"built {tag} in {time.monotonic() - start:.0f} s, {image_mb(tag):.1f} MB")
    return tag


@contextlib.contextmanager
def tool_named(tag: str | None = None) -> Iterator[str]:
    """This checkout's tool image (or `tag`) under the README's name, for the builds and runs that
    name it: suites from other checkouts share the engine, so the name is held under a lock."""
    tag = tag or tool_image()
    with realdata.cache_lock("image-tool-name"):
        _check(docker("tag", tag, TOOL_NAME, timeout=60), f"name {tag} {TOOL_NAME}")
        yield TOOL_NAME


@contextlib.contextmanager
def tool_volume() -> Iterator[str]:
    """A named volume of this run's own holding the tool (the file and its libcst directory), filled
    by the README's first "Am I affected?" line (the tool image's own command); removed afterwards."""
    from tests.docs import command

    volume = f"torch-lazylog-test-{os.getpid()}-{time.monotonic_ns()}"
    with tool_named():
        shown = command("pyz-verify", {"torch-lazylog:/out": f"{volume}:/out"})
        assert shown[:2] == ["docker", "run"] and f"{volume}:/out" in shown, shown
        _check(docker(*shown[1:], timeout=300), "copy the tool into a volume (the README's line)")
    try:
        yield volume
    finally:
        docker("volume", "rm", "-f", volume, timeout=120)


def snippet_context(destination: Path, snippet: str | None = None) -> Path:
    """The README's snippet (or `snippet`) as the last lines of a Dockerfile on BASE_IMAGE: the tool
    comes from the tool image, so the context holds the Dockerfile alone."""
    destination.mkdir(parents=True)
    (destination / "Dockerfile").write_text(
        f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\n{readme_snippet() if snippet is None else snippet}"
    )
    return destination


# Issue 27: the step where people put it (docs/image-layouts.md), on stand-ins over the ones above.

STEP_LINE = '# The step: the README\'s "Fix an image" block.'
NON_ROOT_USER = "app"


def documented_dockerfile(name: str) -> str:
    """The ```dockerfile block between `<!-- name -->` and `<!-- /name -->` in README.md or a page of
    docs/, the README's step in place of its STEP_LINE."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        start = text.find(f"<!-- {name} -->")
        if start < 0:
            continue
        section = text[start : text.index(f"<!-- /{name} -->", start)]
        match = re.search(r"```dockerfile\n(.*?)```", section, re.S)
        assert match, f"the {name} block of {page.name} has no Dockerfile"
        return match[1].replace(STEP_LINE + "\n", readme_snippet())
    raise AssertionError(f"no <!-- {name} --> block in README.md or docs/")


def _image_id(tag: str) -> str:
    done = docker("image", "inspect", "--format", "{{.Id}}", tag, timeout=60)
    _check(done, f"inspect {tag}")
    return done.stdout.strip().removeprefix("sha256:")[:12]


def non_root_base() -> str:
    """The rocm-venv stand-in ending as many published images do: a user of its own, last `USER app`."""
    base = rocm_base()
    tag = f"{STANDIN}:torch-{ROCM_TORCH}-user-{NON_ROOT_USER}-{_image_id(base)}"

    def make(context: Path) -> None:
        (context / "Dockerfile").write_text(
            f"FROM {base}\nRUN useradd --create-home {NON_ROOT_USER}\n"
            f"USER {NON_ROOT_USER}\nWORKDIR /home/{NON_ROOT_USER}\n"
        )

    return _built(tag, f"image-{ROCM_TORCH}-user-{NON_ROOT_USER}", make)


def compiler_base() -> str:
    """The non-root stand-in with a C++ compiler, which Inductor's CPU code needs: a server that
    compiles graph after graph (tests/test_probe_live.py). Its user stays `app`."""
    base = non_root_base()
    tag = f"{STANDIN}:torch-{ROCM_TORCH}-user-{NON_ROOT_USER}-gxx-{_image_id(base)}"

    def make(context: Path) -> None:
        (context / "Dockerfile").write_text(
            f"FROM {base}\nUSER root\nRUN apt-get update && apt-get install -y --no-install-recommends g++ "
            f"&& rm -rf /var/lib/apt/lists/*\nUSER {NON_ROOT_USER}\n"
        )

    return _built(tag, f"image-{ROCM_TORCH}-user-{NON_ROOT_USER}-gxx", make)


def runtime_base() -> str:
    """A runtime stage's base for a builder on the rocm-venv stand-in: the same root and Python, no
    /opt/venv (the builder's is copied in)."""
    base = rocm_base()
    tag = f"{STANDIN}:torch-{ROCM_TORCH}-runtime-{_image_id(base)}"

    def make(context: Path) -> None:
        (context / "Dockerfile").write_text(f"FROM {base}\nRUN rm -rf /opt/venv\n")

    return _built(tag, f"image-{ROCM_TORCH}-runtime", make)


def build_with_wheels(
    context: Path, tag: str, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`docker build` (BuildKit) of a context whose Dockerfile reaches the wheel cache as the URL in
    its WHEELS build arg, served on loopback for the build."""
    wheels = realdata.CACHE / "linux-wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    with _served(wheels) as url:
        return docker(
            "build", "--network=host", "--progress=plain", "--build-arg", f"WHEELS={url}", *args,
            "-t", tag, str(context), env=BUILDKIT,
        )  # fmt: skip


# Issue 49: the tool image for linux/arm64, built and run here under qemu-user-static.


def arm64_base() -> str:
    """The arm64 base Dockerfile.rocm's tool stage builds on: Debian's arm64 Python with pip, and this
    machine's CA bundle for the package index."""
    return arm64_os_image()


def arm64_tool_image() -> str:
    """This checkout's tool image for linux/arm64: the README's tool-image build with BuildKit's
    --platform linux/arm64 on the arm64 base, its tool stage run by qemu."""
    return _tool_image("linux/arm64", arm64_base)


def fetch(part: str = "") -> None:
    """The stand-in bases with torch 2.10.0 made ahead (`python -m tests.images`), or the arm64 base
    (`python -m tests.images arm64`: debootstrap's second stage under qemu, minutes from empty
    caches): `.ci/run` starts both beside the tests, so their downloads and layers are written while
    tests that need none run; each is made under its lock, and a test that needs one waits for it."""
    if part == "arm64":
        arm64_base()
        return
    rocm_base()
    system_base()


def empty_build_cache() -> None:
    """The engine reached (started if need be) and BuildKit's cache emptied (`python -m tests.images
    prune`): the image tests fill it by some 11 GB a run, torch's 7 GB reinstalled over the step or
    copied between stages, and a run that starts with the last one's may not find the room it needs."""
    engine()
    done = docker("builder", "prune", "--all", "--force", timeout=600)
    _check(done, "empty the engine's build cache")


if __name__ == "__main__":
    if sys.argv[1:2] == ["prune"]:
        empty_build_cache()
    else:
        fetch(*sys.argv[1:2])
