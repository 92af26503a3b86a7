"""`torch-lazylog diagnose PID...`: name the hang in a running server, reading only.

Read, then judge, then say (run.py): procs lists /proc once a run (each process's plain facts, its
open files by device and inode) and reads the torch each process loaded and how it was started;
stacks takes py-spy's dumps, the only ones a run takes; locks reads the lock a process waits on
(waits: the loop that waits, from its source); torchstate reads the loaded torch's state from its
bytes as verify does, without its lock. judge is a pure function from those facts to one finding
per process and the run's exit code; render only renders. findings holds the one table
(patches/diagnose_findings.json): each finding's ID, exit code, sentence and step, and each reason a
process could not be read. Nothing here writes, and nothing runs the process's own interpreter.
apply, verify and revert never import this package.
"""
