"""Code that runs inside the target interpreter (the one whose `import torch` is meant).

Each module here is stdlib-only and self-contained: torch-lazylog runs it by file path with `-I`
(isolated: no PYTHON* variables, no user site, no script directory on sys.path), so it works in any
Python 3.10+ whether or not torch-lazylog is installed there. When the target interpreter is the one
running torch-lazylog, the same functions are called in-process instead.
"""
