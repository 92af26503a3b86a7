"""The pure core: every decision from bytes, and the plain data every layer passes around.

Nothing here touches the disk, runs a process or reads the environment (import-linter holds it, see
pyproject.toml): the install layer reads an installed torch into these types, the core names its state
and plans the exact writes, and the install layer carries the plan out.
"""
