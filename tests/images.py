"""A real Docker engine and a stand-in for the ROCm base image, built once and kept by the engine.

The stand-in: Debian bookworm from debootstrap (minbase, python3, python3-venv, ca-certificates),
imported with `docker import`, then `/opt/venv` holding a real torch from the package index, as the
`rocm/pytorch` images have it. No image registry is reachable here, so nothing is pulled.

Machine scaffolding, not product: containers reach the package index only through the host's CA
bundle and the host's network, so the base carries that bundle (and PIP_CERT/SSL_CERT_FILE), and
every build and run uses --network=host.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests import realdata

# Debian's client: BuildKit works with DOCKER_BUILDKIT=1 (no buildx plugin needed).
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
    """Reach the engine, starting dockerd (as root) when it is installed but not running."""
    if _engine_up():
        return
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
    engine()
    if has_image(OS_TAG):
        return OS_TAG
    with realdata.cache_lock("image-os"):
        if has_image(OS_TAG):
            return OS_TAG
        if shutil.which("debootstrap") is None:
            raise EngineUnavailable("debootstrap is not installed (`.ci/run` installs it)")
        with tempfile.TemporaryDirectory(dir=realdata.CACHE) as work:
            root = Path(work) / "root"
            done = subprocess.run(
                ["debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
                 SUITE, str(root), _mirror()],
                capture_output=True, text=True, timeout=1800,
            )  # fmt: skip
            _check(done, "debootstrap the stand-in base")
            tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
            imported = subprocess.run(
                [DOCKER, "import", "-", OS_TAG], stdin=tar.stdout, capture_output=True, text=True
            )
            tar.wait()
            _check(imported, "import the stand-in base")
    return OS_TAG


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
