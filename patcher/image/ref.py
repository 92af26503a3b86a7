"""An image reference in the containers-transports form (skopeo, podman, buildah): pure parsing."""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

from patcher.core.errors import LazylogError, environment

Transport = Literal["docker-archive", "oci-archive", "oci", "docker"]
TRANSPORTS: tuple[Transport, ...] = ("docker-archive", "oci-archive", "oci", "docker")

# docker://HOST[:PORT]/NAME[:TAG|@DIGEST]; a HOST is what Docker takes for one: it has a dot or a
# port, or is localhost (otherwise the first component is a path on Docker Hub).
_REGISTRY = re.compile(
    r"^(?P<host>[A-Za-z0-9.-]+(?::[0-9]+)?|\[[0-9a-fA-F:]+\](?::[0-9]+)?)/"
    r"(?P<name>[a-z0-9]+(?:[._/-]+[a-z0-9]+)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


class Ref(NamedTuple):
    """`path`: the archive or layout (file transports); `host`, `name`: the registry's (docker://);
    `tag` or `digest`: which image in a layout or repository (None: the only one, or `latest`)."""

    transport: Transport
    path: str = ""
    host: str = ""
    name: str = ""
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What a registry's manifest URL ends in: the digest, else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def loopback(self) -> bool:
        """A registry on this machine, which Docker reaches over plain HTTP without being told."""
        host = self.host.rsplit(":", 1)[0] if not self.host.startswith("[") else self.host.split("]")[0][1:]
        return host in ("localhost", "::1") or host.startswith("127.")


def _bad(text: str, why: str) -> LazylogError:
    forms = "docker-archive:PATH, oci-archive:PATH, oci:DIR[:TAG] or docker://HOST/NAME[:TAG|@DIGEST]"
    return environment(f"Expected an image reference ({forms}), but {text!r} {why}")


def parse(text: str) -> Ref:
    """One reference as a user types it; a word that does not parse is one sentence, exit 4."""
    transport, sep, rest = text.partition(":")
    if not sep or transport not in TRANSPORTS:
        raise _bad(text, "names no transport of these")
    if transport == "docker":
        if not rest.startswith("//"):
            raise _bad(text, "does not start with docker://")
        found = _REGISTRY.match(rest[2:])
        if found is None:
            raise _bad(text, "is not HOST/NAME[:TAG|@DIGEST] after docker://")
        host = found["host"]
        if "." not in host and ":" not in host and host != "localhost":
            raise _bad(text, "names no registry host (one with a dot or a port, or localhost)")
        return Ref("docker", host=host, name=found["name"], tag=found["tag"], digest=found["digest"])
    if not rest:
        raise _bad(text, "names no path")
    if transport == "oci":
        path, colon, tag = rest.rpartition(":") if ":" in rest else (rest, "", "")
        if colon and ("/" in tag or not tag):
            path, tag = rest, ""
        return Ref("oci", path=path, tag=tag or None)
    return Ref(transport, path=rest)
