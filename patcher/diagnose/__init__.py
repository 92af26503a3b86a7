"""`torch-lazylog diagnose PID...`: name the hang in a running server, reading only.

procs reads /proc (which torch a process loaded, its interpreter, its start, its descendants, and
what a finding asks for: CPU time, a lock's holders, compile workers); stacks runs py-spy and
parses its JSON dumps; torchstate reads the loaded torch's state from its bytes as verify does;
findings holds the findings as data (patches/diagnose_findings.json); verdict is a pure function
from those facts to a finding; render says it.
Nothing here writes, and nothing runs the process's own interpreter. apply, verify and revert
never import this package.
"""
