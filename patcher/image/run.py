"""verify --image: one reference, one platform, read into verify's report. Reads only."""

from __future__ import annotations

from patcher.core.report import JsonValue, Report
from patcher.image import judge, source
from patcher.image.ref import parse
from patcher.image.tree import Tree


def platforms(text: str, platform: str | None) -> list[str | None]:
    """The platforms `text` answers for: each of an index's (or the one --platform names); None for
    an image of one platform, which answers once."""
    with source.images(parse(text), text, platform) as found:
        if len(found) == 1 and platform is None:
            return [None]
        return [image.platform for image in found]


def verify(text: str, platform: str | None, python: str | None, installs: list[JsonValue]) -> Report:
    """The image's final filesystem, layer by layer, then verify's decision on it."""
    from patcher.install import definitions

    spec = definitions.load()
    with source.images(parse(text), text, platform) as found:
        image = found[0]
        tree = Tree()
        for number, layer in enumerate(image.layers, 1):
            source.check_compression(layer.media_type, layer.name)
            with layer.open() as stream:
                tree.apply(stream, f"layer {number} ({layer.name}) of {text}")
        return judge.verify(tree, image.config, spec, python, installs)
