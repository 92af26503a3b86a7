"""`verify --runtime`'s probe: import torch here and watch Inductor's real implicit-fallback path.

A model applies a custom op with no lowering (`mix`, fan-in 2) `depth` times and ends in a second one
(`tail`) that Inductor first lowers last, with the whole chain as its argument: the case where the
eager text is huge. OperatorIssue.operator_str is wrapped to count its calls. Phases, each with fresh
ops (a fallback is registered once per op):
- filtered: the graph logger at WARNING; operator_str must not be called at all;
- info: INFO enabled; each emitted "Creating implicit fallback" line must be byte-identical to what
  operator_str returns for the same arguments;
- error: implicit fallbacks off; the raised OperatorIssue must still carry the operator text.
make_fallback is watched too: when the environment keeps torch.compile from Inductor
(TORCH_COMPILE_DISABLE=1, TORCHDYNAMO_DISABLE=1, anything else that leaves it no op to lower), no
check is reported, failed or passed: "unable" says why.
Prints one JSON object. torch is imported only here, never by torch-lazylog itself.
"""

# No `from __future__ import annotations`: torch.library.custom_op reads the ops' annotations at runtime.
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

Check = dict[str, object]
# It changes the working directory and imports torch: patcher.install.interpreter.call never runs it
# in torch-lazylog's own process, whatever it is given.
OWN_PROCESS = True
LINE = "Creating implicit fallback for:"
PHASES = ("filtered", "info", "error")


class Probe:
    def __init__(self, torch: Any, operator_issue: Any, graph: Any) -> None:
        self.torch = torch
        self.texts: list[tuple[str, str]] = []
        self.checks: list[Check] = []
        self.fallbacks: list[str] | None = None  # ops Inductor made a fallback for (None: not watched)
        real: Callable[[object, object, object], str] = operator_issue.operator_str

        def counting(target: object, args: object, kwargs: object) -> str:
            text = real(target, args, kwargs)
            self.texts.append((str(target), text))
            return text

        operator_issue.operator_str = staticmethod(counting)
        make_fallback: Callable[..., Any] | None = getattr(graph, "make_fallback", None)
        if make_fallback is not None:
            made: list[str] = []

            def watched(target: object, *args: Any, **kwargs: Any) -> Any:
                made.append(str(target))
                return make_fallback(target, *args, **kwargs)

            graph.make_fallback = watched
            self.fallbacks = made

    def check(self, name: str, passed: bool, detail: str) -> None:
        self.checks.append({"name": name, "passed": bool(passed), "detail": detail})

    def model(self, depth: int, tag: str) -> Callable[[Any, Any], Any]:
        import torch  # already imported by main(); bound here for the annotations below

        ns = "torch_lazylog_probe"

        @torch.library.custom_op(f"{ns}::mix_{tag}", mutates_args=())  # type: ignore[untyped-decorator]
        def mix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a * 0.5 + b * 0.25

        @mix.register_fake  # type: ignore[untyped-decorator]
        def _mix_fake(a: Any, b: Any) -> Any:
            return torch.empty_like(a)

        @torch.library.custom_op(f"{ns}::tail_{tag}", mutates_args=())  # type: ignore[untyped-decorator]
        def tail(a: torch.Tensor) -> torch.Tensor:
            return a + 1

        @tail.register_fake  # type: ignore[untyped-decorator]
        def _tail_fake(a: Any) -> Any:
            return torch.empty_like(a)

        def model(x: Any, y: Any) -> Any:
            prev, cur = x, y
            for _ in range(depth):
                prev, cur = cur, mix(cur, prev)
            return tail(cur)

        return model

    def compile_and_run(self, depth: int, tag: str) -> bool:
        """Whether the compiled model gives what the eager one does."""
        torch = self.torch
        torch._dynamo.reset()
        model = self.model(depth, tag)
        x, y = torch.randn(8), torch.randn(8)
        compiled = torch.compile(model, backend="inductor", fullgraph=True)
        return bool(torch.allclose(compiled(x, y), model(x, y)))

    def calls_for(self, tag: str) -> list[str]:
        return [text for target, text in self.texts if _tagged(target, tag)]

    def reached(self, tag: str) -> bool:
        """Whether Inductor lowered this phase's ops by a fallback (True when that is not watched)."""
        return self.fallbacks is None or any(_tagged(target, tag) for target in self.fallbacks)


def _tagged(target: str, tag: str) -> bool:
    return f"_{tag}." in target or target.endswith(f"_{tag}")


# What switches torch.compile off from the environment (torch/_dynamo/config.py, eval_frame.py).
SWITCHES = ("TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE")


def switched_off(torch: Any) -> str | None:
    """Why this environment runs no torch.compile at all, read before compiling (torch 2.13 raises
    with fullgraph=True when it compiles nothing, older releases run the model eagerly)."""
    switches = [f"{name}=1" for name in SWITCHES if os.environ.get(name) == "1"]
    if switches:
        return f"{' and '.join(switches)} in the environment switches torch.compile off"
    if getattr(torch._dynamo.config, "disable", False):  # pragma: no cover - set only by the switch above
        return "torch._dynamo.config.disable is set, which switches torch.compile off"
    return None


# The guard for what the switches above do not name: no environment variable of torch's reaches it.
NOT_REACHED = (
    "torch.compile ran the model, but Inductor lowered none of the probe's custom ops: something in "
    "this environment keeps torch.compile from Inductor"
)


def filtered(probe: Probe, depth: int, out: dict[str, Any]) -> None:
    logging.getLogger("torch._inductor.graph").setLevel(logging.WARNING)
    correct = probe.compile_and_run(depth, "f")
    if not probe.reached("f"):  # pragma: no cover - NOT_REACHED
        out["unable"] = NOT_REACHED
        return
    calls = len(probe.calls_for("f"))
    said = "matches" if correct else "differs from"
    probe.check("compiled_result_correct", correct, f"compiled output {said} the eager output")
    probe.check(
        "not_formatted_when_filtered",
        calls == 0,
        f"operator_str called {calls} time(s) with the graph logger at WARNING (depth {depth})",
    )


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith(LINE):
            self.lines.append(record.getMessage())


def info(probe: Probe, out: dict[str, Any]) -> None:
    logger = logging.getLogger("torch._inductor.graph")
    handler = _Keep()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        probe.compile_and_run(2, "i")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.WARNING)
    if not probe.reached("i"):  # pragma: no cover - NOT_REACHED
        out["unable"] = NOT_REACHED
        return
    # A lazy argument is formatted by each handler that formats the record: compare as sets.
    expected = {f"{LINE}\n{text}" for text in probe.calls_for("i")}
    identical = sum(line in expected for line in handler.lines)
    same = len(handler.lines) == 2 and identical == len(handler.lines)
    detail = f"{len(handler.lines)} line(s) emitted for 2 new ops, {identical} byte-identical to operator_str"
    probe.check("info_text_identical", same, detail)


def error(probe: Probe, config: Any) -> None:
    dynamo = probe.torch._dynamo.config
    saved, suppressed = config.implicit_fallbacks, getattr(dynamo, "suppress_errors", False)
    config.implicit_fallbacks = False
    dynamo.suppress_errors = False  # TORCHDYNAMO_SUPPRESS_ERRORS would swallow the very error checked
    message = ""
    try:
        probe.compile_and_run(1, "e")
    except Exception as exc:
        chain: list[str] = []
        seen: BaseException | None = exc
        while seen is not None:
            chain.append(f"{type(seen).__name__}: {seen}")
            seen = seen.__cause__ or seen.__context__
        message = "\n".join(chain)
    finally:
        config.implicit_fallbacks, dynamo.suppress_errors = saved, suppressed
    texts = [text for text in probe.calls_for("e") if text]
    carried = bool(texts) and texts[-1] in message
    said = "carries" if carried else "lacks"
    probe.check("error_carries_operator_text", carried, f"the raised error {said} the operator text")


def run_phases(probe: Probe, depth: int, config: Any, out: dict[str, Any]) -> None:
    phase = None
    try:
        for phase in PHASES:
            if phase == "filtered":
                filtered(probe, depth, out)
            elif phase == "info":
                info(probe, out)
            elif phase == "error":
                error(probe, config)
            if out.get("unable"):
                return
    except Exception as exc:
        out["error"] = f"torch.compile failed in phase {phase}: {type(exc).__name__}: {str(exc)[:2000]}"
    out["checks"] = probe.checks


def answer(params: dict[str, Any]) -> dict[str, Any]:
    """{"depth", "expect_graph", "cwd"} -> the checks, or why they could not run."""
    out: dict[str, Any] = {"checks": [], "error": None, "unable": None}
    os.chdir(params["cwd"])  # sys.path was built from the launch's directory; compile somewhere harmless
    try:
        import torch
        import torch._dynamo
        import torch._inductor.graph as inductor_graph
        from torch._inductor import config
        from torch._inductor.exc import OperatorIssue
    except Exception as exc:
        out["error"] = f"import torch failed: {type(exc).__name__}: {exc}"
        return out
    out["graph_py"] = inductor_graph.__file__
    if os.path.realpath(params["expect_graph"]) != os.path.realpath(inductor_graph.__file__):
        return out  # another torch than the one pointed at: say so before compiling anything
    out["unable"] = switched_off(torch)
    if out["unable"] is None:
        run_phases(Probe(torch, OperatorIssue, inductor_graph), params["depth"], config, out)
    return out


if __name__ == "__main__":
    print(json.dumps(answer(json.load(sys.stdin))))
    sys.exit(0)
