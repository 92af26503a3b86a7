"""Where an image's manifests and layers come from: a `docker save` archive, an OCI archive or layout
(the standard library's tarfile and json), or a registry (the `image` extra's client, oras).

Each image (one per platform of an index) is its config and its layers, each layer opened as a stream
when its turn comes: nothing is unpacked to disk, and an archive is read in place.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from patcher.core.errors import environment
from patcher.image.ref import Ref

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
REF_NAME = "org.opencontainers.image.ref.name"

Opener = Callable[[str], "AbstractContextManager[IO[bytes]]"]  # a blob by its digest, or a path


class Layer(NamedTuple):
    media_type: str
    name: str  # its digest, or its path in a docker save archive
    open: Callable[[], AbstractContextManager[IO[bytes]]]


class Image(NamedTuple):
    platform: str | None  # os/architecture[/variant], as the index or the config says
    config: dict[str, Any]
    layers: tuple[Layer, ...]


def platform_of(entry: dict[str, Any]) -> str:
    parts = [entry.get("os", ""), entry.get("architecture", ""), entry.get("variant", "")]
    return "/".join(p for p in parts if p)


def _json(opener: Opener, name: str, what: str) -> Any:
    try:
        with opener(name) as handle:
            return json.loads(handle.read())
    except (OSError, KeyError, ValueError, tarfile.TarError) as exc:
        raise environment(f"Could not read {what} ({name}): {exc}; nothing was written") from exc


def check_compression(media_type: str, name: str) -> None:
    """A layer this reader cannot decompress is named before any byte of it is read."""
    if "zstd" in media_type:
        raise environment(
            f"Could not read layer {name}: its compression ({media_type}) is zstd, which this reader "
            "does not take (plain, gzip, bzip2 or xz); nothing was written"
        )


def _selected(images: list[Image], platform: str | None, ref: str) -> list[Image]:
    """The images of an index for `platform` (os/arch[/variant]), or every real one without it."""
    real = [i for i in images if i.platform != "unknown/unknown"]  # attestations are no image
    if platform is None:
        return real
    chosen = [i for i in real if i.platform == platform or (i.platform or "").startswith(platform + "/")]
    if not chosen:
        found = ", ".join(sorted({i.platform or "?" for i in real}))
        raise environment(f"Expected an image for {platform} in {ref}, found only {found}")
    return chosen


def _oci(opener: Opener, ref: Ref, text: str) -> list[Image]:
    """An OCI layout's images (index.json, blobs/sha256/...): the tag's, else every one."""
    index = _json(opener, "index.json", f"the OCI layout {ref.path}")
    descriptors = index.get("manifests", [])
    if ref.tag is not None:
        descriptors = [d for d in descriptors if d.get("annotations", {}).get(REF_NAME) == ref.tag]
        if not descriptors:
            raise environment(f"Expected a manifest tagged {ref.tag!r} in {ref.path}, found none")

    def blob(digest: str) -> str:
        algorithm, _, hexa = digest.partition(":")
        return f"blobs/{algorithm}/{hexa}"

    def fetch(digest: str) -> Any:
        return _json(opener, blob(digest), f"{text}'s blob")

    return _expand(descriptors, fetch, fetch, lambda d: opener(blob(d)))


def _expand(
    descriptors: list[dict[str, Any]],
    fetch: Callable[[str], Any],
    config_of: Callable[[str], Any],
    layer: Callable[[str], AbstractContextManager[IO[bytes]]],
    platform: str | None = None,
) -> list[Image]:
    """Manifests behind descriptors, an index's entries each with its platform."""
    images: list[Image] = []
    for descriptor in descriptors:
        body = fetch(descriptor["digest"])
        kind = body.get("mediaType") or descriptor.get("mediaType", "")
        named = platform_of(descriptor.get("platform", {})) or platform
        if kind in INDEX_TYPES or "manifests" in body:
            images += _expand(body["manifests"], fetch, config_of, layer, named)
            continue
        config = config_of(body["config"]["digest"])
        layers = tuple(
            Layer(entry.get("mediaType", ""), entry["digest"], _bound(layer, entry["digest"]))
            for entry in body.get("layers", [])
        )
        images.append(Image(named or platform_of(config), config, layers))
    return images


def _bound(
    layer: Callable[[str], AbstractContextManager[IO[bytes]]], name: str
) -> Callable[[], AbstractContextManager[IO[bytes]]]:
    return lambda: layer(name)


def _docker_archive(opener: Opener, ref: Ref) -> list[Image]:
    """`docker save`'s manifest.json: its first image (an archive of one image, as skopeo reads it)."""
    manifest = _json(opener, "manifest.json", f"the docker archive {ref.path}")
    if not manifest:
        raise environment(f"Expected an image in the docker archive {ref.path}, found none")
    first = manifest[0]
    config = _json(opener, first["Config"], f"{ref.path}'s image config")
    layers = tuple(Layer("", name, _bound(opener, name)) for name in first["Layers"])
    return [Image(platform_of(config), config, layers)]


@contextlib.contextmanager
def _archive(path: str) -> Iterator[Opener]:
    """Members of a tar archive on disk, read in place (random access: a member's bytes are read
    when its turn comes)."""
    try:
        seekable = stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        seekable = True  # tarfile says why it cannot open it
    if not seekable:  # a pipe (`docker save IMAGE | ... docker-archive:/dev/stdin`), a device
        raise environment(
            f"Expected the archive in a file, found {path} is a pipe or a device: an archive is read in "
            "place, its manifest first, and `docker save` writes that last. Save it to a file "
            "(`docker save -o image.tar IMAGE`) and pass docker-archive:image.tar; nothing was written"
        )
    try:
        archive = tarfile.open(path, "r:*")  # noqa: SIM115 -- closed by `with archive` below
    except (OSError, tarfile.TarError) as exc:
        raise environment(f"Could not open the archive {path}: {exc}; nothing was written") from exc

    @contextlib.contextmanager
    def member(name: str) -> Iterator[IO[bytes]]:
        handle = archive.extractfile(os.path.normpath(name))
        if handle is None:
            raise KeyError(f"{name} is not a file in {path}")
        with handle:
            yield handle

    with archive:
        yield member


@contextlib.contextmanager
def _directory(path: str) -> Iterator[Opener]:
    if not os.path.isdir(path):
        raise environment(f"Expected an OCI layout directory at {path}, found none")

    @contextlib.contextmanager
    def member(name: str) -> Iterator[IO[bytes]]:
        with open(Path(path) / name, "rb") as handle:
            yield handle

    yield member


@contextlib.contextmanager
def images(ref: Ref, text: str, platform: str | None) -> Iterator[list[Image]]:
    """The images `ref` names, their layers readable while the context is open."""
    if ref.transport == "docker":
        from patcher.image import registry

        with registry.session(ref, text) as (manifest, config, layer):
            descriptor = {"digest": ref.reference}
            yield _selected(_expand([descriptor], manifest, config, layer), platform, text)
        return
    opened = _directory(ref.path) if ref.transport == "oci" else _archive(ref.path)
    with opened as opener:
        try:
            found = (
                _docker_archive(opener, ref) if ref.transport == "docker-archive" else _oci(opener, ref, text)
            )
        except (KeyError, TypeError, AttributeError, IndexError) as exc:  # JSON of another shape
            raise environment(
                f"Expected an image's manifests in {text}, found JSON of another shape ({exc!r})"
            ) from exc
        yield _selected(found, platform, text)
