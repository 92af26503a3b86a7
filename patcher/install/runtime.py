"""`verify --runtime`: run patcher.in_target.inductor in the target interpreter, with a throw-away cache.

The probe imports torch there (never here), in the environment torch-lazylog was given (as the server
would), and compiles a deep custom-op chain on the CPU; see that module for the checks. The static
report and the probe's checks make one report; the worse decides. A check the environment keeps from
running (TORCH_COMPILE_DISABLE=1, ...) is an environment error naming why, never a failed check.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import typing
from typing import TypedDict

from patcher.core.errors import Hint, LazylogError, Pass
from patcher.core.exitcodes import ExitCode
from patcher.core.installed import Target
from patcher.core.report import JsonValue, Report
from patcher.install.interpreter import call

DEPTH = 8


class ProbeResult(TypedDict, total=False):
    """What patcher.in_target.inductor answers."""

    checks: list[dict[str, JsonValue]]
    error: str | None
    unable: str | None  # why the checks could not exercise Inductor's path in this environment
    graph_py: str


def probe(python: str, expect_graph: str) -> ProbeResult:
    """Run the probe in `python` on the torch whose graph.py is `expect_graph`, with a throw-away
    Inductor cache; return its JSON result."""
    from patcher.in_target import inductor

    cache = tempfile.mkdtemp(prefix="torch-lazylog-inductor-")
    env = os.environ | {
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
        "TRITON_CACHE_DIR": os.path.join(cache, "triton"),
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
        "TMPDIR": cache,
    }
    for noisy in ("TORCH_LOGS", "TORCH_COMPILE_DEBUG", "TORCHDYNAMO_VERBOSE"):
        env.pop(noisy, None)
    # cwd: started where the tool was (the same sys.path), the probe compiles in the throw-away cache,
    # in a process of its own (inductor.OWN_PROCESS), never this one
    request: dict[str, object] = {"depth": DEPTH, "expect_graph": expect_graph, "cwd": cache}
    try:
        answer = call(python, inductor, request, "run the runtime check", timeout=1800, env=env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return typing.cast(ProbeResult, answer)


def _stop(report: Report, message: str, hint: Hint | None = None) -> LazylogError:
    """A runtime check that could not run: an environment error in the static read's state."""
    return LazylogError(ExitCode.ENVIRONMENT, message, report.state, hint=hint)


def add_checks(target: Target, report: Report, static: str) -> Report:
    """Add the runtime checks to a static verify report; the worse result decides the exit code.
    `static`: the static check's command line, with the options given, for the advice. An error keeps
    the static report's state, as read."""
    result = _checked(target, report, static)
    static_check: dict[str, JsonValue] = {
        "name": "static",
        "passed": report.code == ExitCode.OK,
        "detail": report.message,
    }
    failed = [c for c in result["checks"] if not c["passed"]]
    all_checks = (static_check, *result["checks"])
    if failed:  # the runtime finding comes first
        from patcher.core.state import runtime_eager

        found = "; ".join(str(c["detail"]) for c in failed)
        message = (
            "Expected Inductor's real implicit-fallback path to format the operator text only when the "
            f"line is emitted, but the runtime check found: {found}. Static check: {report.message}"
        )
        state = runtime_eager(report.state)
        code = max(report.code, ExitCode.EAGER)
        return report._replace(message=message, state=state, code=code, checks=all_checks)
    message = (
        report.message.rstrip(".") + f". Runtime: {len(all_checks)} checks passed on Inductor's real path."
    )
    return report._replace(message=message, checks=all_checks)


def _checked(target: Target, report: Report, static: str) -> ProbeResult:
    """The probe's result, once it has run the checks on this torch; else why it could not."""
    if target.owner is None:  # a tree no interpreter owns: the tool's own Python is not its server's
        raise _stop(
            report,
            f"Expected an interpreter that imports {target.torch_dir} to run the runtime check in, found "
            "none that owns it, so --runtime needs --python: run "
            f"`{static} --runtime --python PYTHON` with the Python whose `import torch` loads it "
            f"(the static check alone: {report.message.rstrip('.')}).",
        )
    try:
        result = probe(target.interpreter.executable, str(target.graph_py))
    except LazylogError as exc:  # the interpreter would not run it, or it timed out
        raise _stop(report, exc.message, exc.hint) from exc
    if result["error"]:
        raise _stop(
            report,
            f"Expected torch to import and compile on the CPU for the runtime check, but {result['error']}. "
            f"Fix the environment (or run `{static}` without --runtime for the static check).",
        )
    imported = os.path.realpath(str(result.get("graph_py") or ""))
    if imported != os.path.realpath(target.graph_py):
        raise _stop(
            report,
            f"Expected {target.interpreter.executable} to import torch from {target.torch_dir}, but it imports "
            f"{imported or 'no graph.py'}",
            Hint((Pass("--python", "the interpreter that uses this torch"),)),
        )
    if result.get("unable"):
        raise _stop(
            report,
            f"Expected the runtime check to exercise Inductor's implicit-fallback path, but {result['unable']}, "
            f"so it could not run (no check failed; the static check: {report.message.rstrip('.')}). Run "
            f"`{static} --runtime` without that setting, or `{static}` for the static check.",
        )
    return result
