"""Code that runs inside the target interpreter (the one whose `import torch` is meant).

Each module here is stdlib-only and self-contained: torch-lazylog runs its source in any Python
3.10+, whether or not torch-lazylog is installed there, started the way the server starts: with the
environment torch-lazylog was given and the interpreter's own site configuration (never `-I`, which
would hide PYTHONPATH, PYTHONPYCACHEPREFIX, the user site...). Only the working directory that the
launch puts first on sys.path is taken off, before anything is imported (see patcher.install.interpreter).
When the target interpreter is the one running torch-lazylog, started plainly, the same functions are
called in-process instead.
"""
