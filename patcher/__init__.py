"""torch-lazylog: make torch Inductor's implicit-fallback log line lazy, in place, reversibly."""

__version__ = "0.1.0"
