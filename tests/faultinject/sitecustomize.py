"""Loaded only by tool processes the tests start with tests.faults.env(): installs the faults."""

import importlib.util
import os
from pathlib import Path

if os.environ.get("TORCH_LAZYLOG_TEST_FAULTS"):
    _spec = importlib.util.spec_from_file_location(
        "torch_lazylog_test_faults", Path(__file__).resolve().parent.parent / "faults.py"
    )
    if _spec is not None and _spec.loader is not None:
        _module = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_module)
        _module.install_from_env()
