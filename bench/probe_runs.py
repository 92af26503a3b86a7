"""Run by bench/compile_time.py in a torch venv's Python: one untimed warm-up compile, then `repeat`
timed cold compiles of the probe's custom-op chain (patcher.in_target.inductor, stdlib only, found from
the checkout); with `limit`, OperatorIssue.operator_str returns "" (the cost floor). Prints JSON."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(params: dict[str, object]) -> dict[str, object]:
    import logging

    import torch
    import torch._inductor.graph as inductor_graph
    from torch._inductor.exc import OperatorIssue

    from patcher.in_target import inductor

    if params["limit"]:
        OperatorIssue.operator_str = staticmethod(lambda target, args, kwargs: "")
    logging.getLogger("torch._inductor.graph").setLevel(logging.WARNING)
    probe = inductor.Probe(torch, OperatorIssue, inductor_graph)
    probe.compile_and_run(1, "w")  # first-compile costs (imports, caches) out of the timed runs
    depth, repeat = params["depth"], params["repeat"]
    assert isinstance(depth, int) and isinstance(repeat, int)
    seconds = []
    for index in range(repeat):
        start = time.perf_counter()  # the whole compile_and_run: the eager reference run is microseconds
        probe.compile_and_run(depth, f"f{index}")
        seconds.append(time.perf_counter() - start)
    return {"seconds": seconds}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
