"""A registry's manifests and blobs through oras (the `image` extra): its token and basic auth, the
credentials Docker and podman keep, and redirects to blob storage are the library's, not this tool's.
Plain HTTP only for a registry on this machine's loopback, as Docker allows without being told.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

from patcher.core.errors import LazylogError, environment
from patcher.image.ref import Ref

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)

Session = tuple[
    Callable[[str], Any], Callable[[str], Any], Callable[[str], "AbstractContextManager[IO[bytes]]"]
]


def credential_files() -> list[str]:
    """Where podman keeps logins (Docker's config.json the library finds itself)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    files = [os.environ.get("REGISTRY_AUTH_FILE") or ""]
    files += [os.path.join(runtime, "containers", "auth.json")] if runtime else []
    files += [os.path.expanduser("~/.config/containers/auth.json")]
    return [f for f in files if f and os.path.isfile(f)]


def refused(text: str, host: str, status: int, reason: str) -> LazylogError:
    """A registry's answer other than 200, as the one sentence a user acts on."""
    if status in (401, 403):
        why = f"refused access (HTTP {status} {reason}): log in with `docker login {host}` (or podman's)"
    elif status == 404:
        why = f"has no such image (HTTP 404 {reason}): check the name and the tag"
    else:
        why = f"answered HTTP {status} {reason}"
    return environment(f"The registry {host} {why}, for {text}; nothing was written")


@contextlib.contextmanager
def session(ref: Ref, text: str) -> Iterator[Session]:
    """(manifest by tag or digest, a config blob's JSON, a layer's stream) for `ref`'s repository."""
    try:
        import oras.container
        import oras.provider
        import requests
    except ImportError as exc:
        raise environment(
            f"Expected the image extra's registry client (oras) to read {text}, but it is not installed "
            "for this Python: pip install 'torch-lazylog[image]'. Archives and layouts need nothing more"
        ) from exc
    registry = oras.provider.Registry(hostname=ref.host, insecure=ref.loopback)
    container = oras.container.Container(f"{ref.host}/{ref.name}:latest")
    try:
        registry.auth.load_configs(container, credential_files())
    except (OSError, ValueError) as exc:
        raise environment(f"Could not read the registry credentials for {ref.host}: {exc}") from exc
    base = f"{registry.prefix}://{ref.host}/v2/{ref.name}"

    def get(url: str, headers: dict[str, str], stream: bool = False) -> Any:
        try:
            response = registry.do_request(url, "GET", headers=headers, stream=stream)
        except requests.RequestException as exc:
            raise environment(f"Could not reach the registry {ref.host} for {text}: {exc}") from exc
        if response.status_code != 200:
            raise refused(text, ref.host, response.status_code, response.reason)
        return response

    def manifest(reference: str) -> Any:
        return get(f"{base}/manifests/{reference}", {"Accept": ACCEPT}).json()

    def config(digest: str) -> Any:
        return get(f"{base}/blobs/{digest}", {}).json()

    @contextlib.contextmanager
    def layer(digest: str) -> Iterator[IO[bytes]]:
        response = get(f"{base}/blobs/{digest}", {}, stream=True)
        with response:
            raw: IO[bytes] = response.raw  # the blob's bytes as stored: tarfile decompresses
            yield raw

    yield manifest, config, layer
