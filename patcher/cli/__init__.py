"""The command line: the argv fast path (entry), click (app), the commands and their rendering, the
single-file build (pyz) and the maintainers' fingerprint command. Everything here is thin: it unpacks
options and calls the install layer.
"""
