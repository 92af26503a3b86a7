"""verify --image: an image's final filesystem read from its layers, nothing run, nothing unpacked.

ref names the image (containers-transports form), source opens its manifests and layer streams
(archives and layouts with the standard library; a registry through the `image` extra's client),
tree keeps the few files the decision needs from the layers in order with their whiteouts, and judge
hands them to verify's own decision (patcher.install.reading). Reads only.
"""
