"""The exit codes, named in one place, and their help text."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0  # apply: patched now, already patched, natively lazy; verify: lazy; revert: done or nothing to do
    EAGER = 1  # verify and diagnose: the installed torch still formats the text eagerly
    USAGE = 2  # bad command line (click's own code)
    REFUSED = 3  # a source this tool does not know, or a file changed since apply; nothing written
    ENVIRONMENT = 4  # torch not found, not writable, broken install; nothing written
    OUTPUT = 5  # the result could not be printed (stdout closed or full); the work itself is done
    STALLED = 6  # diagnose: a process waits on a stall other than the eager formatting (a lock, ranks)
    DIFFERS = 7  # fingerprint --check: the shipped releases table differs from the one the wheels give
    INTERRUPTED = 130  # SIGINT (Ctrl-C): files are each pristine or patched; verify tells which
    TERMINATED = 143  # SIGTERM: the same


EXIT_CODE_HELP = """Exit codes:
  0  success (apply: patched, already patched or natively lazy;
     verify: torch formats the text lazily; revert: reverted or nothing to do)
  1  verify: torch formats the text eagerly (graph.py, or a stale unchecked-hash pyc);
     diagnose: a process is in the eager formatting, or runs a torch that formats eagerly
  2  usage error (diagnose: no such process, or not a Python process)
  3  refused: a graph.py this tool does not know, or one changed since apply
  4  environment error: torch not found, not writable, broken install;
     diagnose: a process it may not read (ptrace rights), py-spy missing, no torch loaded
  5  the result could not be printed (stdout closed or full)
  6  diagnose: a process waits on another stall (a JIT build lock, ranks out of
     step, compile workers gone); 1 outranks it
  7  fingerprint --check: the shipped releases table differs from the wheels'
  130, 143  interrupted by SIGINT or SIGTERM (files each whole)"""
