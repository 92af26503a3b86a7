"""`verify --runtime`: import torch in the target interpreter and watch Inductor's real path.

A probe model applies a custom op with no lowering (`mix`, fan-in 2) `depth` times and ends in a
second one (`tail`) that Inductor first lowers last, with the whole chain as its argument: the case
where the eager text is huge. Three phases, each with fresh ops (a fallback is registered once):
- filtered: the graph logger at WARNING; OperatorIssue.operator_str must not be called at all;
- info: INFO enabled; each emitted "Creating implicit fallback" line must be byte-identical to
  what operator_str returns for the same arguments;
- error: implicit fallbacks off; the raised OperatorIssue must still carry the operator text.
Everything runs with a temporary Inductor cache, removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from typing import Any

from patcher.errors import ExitCode, environment
from patcher.locate import Target

SCRIPT = r"""
import json, logging, sys, time
params = json.loads(sys.argv[1])
out = {"checks": [], "error": None, "calls": {}, "compile_s": {}}

def check(name, passed, detail):
    out["checks"].append({"name": name, "passed": bool(passed), "detail": detail})

try:
    import torch
    import torch._dynamo
    import torch._inductor.graph as inductor_graph
    from torch._inductor import config as inductor_config
    from torch._inductor.exc import OperatorIssue
except Exception as exc:
    out["error"] = "import torch failed: %s: %s" % (type(exc).__name__, exc)
    print(json.dumps(out))
    sys.exit(0)

out["torch_version"] = torch.__version__
out["graph_py"] = inductor_graph.__file__
real = OperatorIssue.operator_str
texts = []

def counting(target, args, kwargs):
    text = "" if params["limit"] else real(target, args, kwargs)
    texts.append((str(target), text))
    return text

OperatorIssue.operator_str = staticmethod(counting)

def make_ops(tag):
    ns = "torch_lazylog_probe"
    @torch.library.custom_op(ns + "::mix_" + tag, mutates_args=())
    def mix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * 0.5 + b * 0.25
    @mix.register_fake
    def _mix_fake(a, b):
        return torch.empty_like(a)
    @torch.library.custom_op(ns + "::tail_" + tag, mutates_args=())
    def tail(a: torch.Tensor) -> torch.Tensor:
        return a + 1
    @tail.register_fake
    def _tail_fake(a):
        return torch.empty_like(a)
    return mix, tail

def model_for(depth, tag):
    mix, tail = make_ops(tag)
    def model(x, y):
        prev, cur = x, y
        for _ in range(depth):
            prev, cur = cur, mix(cur, prev)
        return tail(cur)
    return model

def compile_and_run(depth, tag):
    torch._dynamo.reset()
    model = model_for(depth, tag)
    x, y = torch.randn(8), torch.randn(8)
    compiled = torch.compile(model, backend="inductor", fullgraph=True)
    start = time.perf_counter()
    got = compiled(x, y)
    seconds = time.perf_counter() - start
    return seconds, torch.allclose(got, model(x, y))

def calls_for(tag):
    return [t for t in texts if ("_" + tag + ".") in t[0] or t[0].endswith("_" + tag)]

logger = logging.getLogger("torch._inductor.graph")
phase = None
try:
    if "filtered" in params["phases"]:
        phase = "filtered"
        logger.setLevel(logging.WARNING)
        if params.get("warmup"):
            compile_and_run(1, "w")  # first-compile costs (imports, caches) out of the timed runs
        runs = []
        for index in range(params.get("repeat", 1)):
            tag = "f%d" % index
            seconds, same = compile_and_run(params["depth"], tag)
            runs.append({"seconds": seconds, "calls": len(calls_for(tag)), "correct": bool(same)})
        calls = sum(r["calls"] for r in runs)
        same = all(r["correct"] for r in runs)
        out["runs"] = runs
        out["calls"]["filtered"] = calls
        out["compile_s"]["filtered"] = runs[0]["seconds"]
        check("compiled_result_correct", same, "compiled output %s the eager output" % ("matches" if same else "differs from"))
        check("not_formatted_when_filtered", calls == 0,
              "operator_str called %d time(s) with the graph logger at WARNING (depth %d)" % (calls, params["depth"]))
    if "info" in params["phases"]:
        phase = "info"
        records = []
        class Keep(logging.Handler):
            def emit(self, record):
                if str(record.msg).startswith("Creating implicit fallback for:"):
                    records.append(record.getMessage())
        handler = Keep(logging.INFO)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            compile_and_run(2, "i")
        finally:
            logger.removeHandler(handler)
            logger.setLevel(logging.WARNING)
        # A lazy argument is formatted by each handler that formats the record: compare as sets.
        expected = set("Creating implicit fallback for:\n" + text for _, text in calls_for("i"))
        identical = sum(r in expected for r in records)
        same = len(records) == 2 and identical == len(records)
        check("info_text_identical", same,
              "%d line(s) emitted for 2 new ops, %d byte-identical to operator_str" % (len(records), identical))
    if "error" in params["phases"]:
        phase = "error"
        saved = inductor_config.implicit_fallbacks
        inductor_config.implicit_fallbacks = False
        message = ""
        try:
            compile_and_run(1, "e")
        except Exception as exc:
            chain, seen = [], exc
            while seen is not None:
                chain.append("%s: %s" % (type(seen).__name__, seen))
                seen = seen.__cause__ or seen.__context__
            message = "\n".join(chain)
        finally:
            inductor_config.implicit_fallbacks = saved
        texts_e = [text for _, text in calls_for("e") if text]
        carried = bool(texts_e) and texts_e[-1] in message
        check("error_carries_operator_text", carried,
              "the raised error %s the operator text" % ("carries" if carried else "lacks"))
except Exception as exc:
    out["error"] = "torch.compile failed in phase %s: %s: %s" % (phase, type(exc).__name__, str(exc)[:2000])
print(json.dumps(out))
"""

DEFAULT_DEPTH = 8
PHASES = ("filtered", "info", "error")


def probe(
    python: str,
    depth: int = DEFAULT_DEPTH,
    phases: tuple[str, ...] = PHASES,
    limit: bool = False,
    repeat: int = 1,
    warmup: bool = False,
    timeout: float = 1800,
) -> dict[str, Any]:
    """Run the probe in `python` with a throw-away Inductor cache; return its JSON result."""
    cache = tempfile.mkdtemp(prefix="torch-lazylog-inductor-")
    env = dict(os.environ)
    env |= {
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
        "TRITON_CACHE_DIR": os.path.join(cache, "triton"),
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
        "TMPDIR": cache,
    }
    for noisy in ("TORCH_LOGS", "TORCH_COMPILE_DEBUG", "TORCHDYNAMO_VERBOSE"):
        env.pop(noisy, None)
    params = json.dumps(
        {"depth": depth, "phases": list(phases), "limit": limit, "repeat": repeat, "warmup": warmup}
    )
    try:
        done = subprocess.run(
            [python, "-c", SCRIPT, params],
            capture_output=True,
            text=True,
            env=env,
            cwd=cache,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise environment(f"Could not run the runtime check in {python}: {exc}.") from exc
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise environment(
            f"Expected the runtime check to finish in {python}, but it exited with {done.returncode}: "
            f"{done.stderr.strip()[-800:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run(target: Target, report: Any, depth: int = DEFAULT_DEPTH) -> Any:
    """Add the runtime checks to a static verify report; the worse result decides the exit code."""
    result = probe(target.interpreter.executable, depth=depth)
    if result["error"]:
        raise environment(
            f"Expected torch to import and compile on the CPU for the runtime check, but {result['error']}. "
            "Fix the environment (or run `torch-lazylog verify` without --runtime for the static check)."
        )
    imported = os.path.realpath(str(result.get("graph_py") or ""))
    if imported != os.path.realpath(target.graph):
        raise environment(
            f"Expected {target.interpreter.executable} to import torch from {target.torch_dir}, but it imports "
            f"{imported or 'no graph.py'}. Pass --python with the interpreter that uses this torch."
        )
    report.checks = [{"name": "static", "passed": report.code == ExitCode.OK, "detail": report.message}]
    report.checks += result["checks"]
    failed = [c for c in result["checks"] if not c["passed"]]
    if failed:
        report.code = max(report.code, ExitCode.EAGER)
        report.message += " Runtime: " + "; ".join(c["detail"] for c in failed) + "."
    else:
        report.message += f" Runtime: {len(result['checks'])} checks passed on Inductor's real path."
    return report
