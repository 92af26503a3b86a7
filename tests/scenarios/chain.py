"""A server start that hangs on torch < 2.13: the custom-op chain of patcher/in_target/inductor.py's model.

`python chain.py TAG DEPTH [--ranks N] [--stay]`: a custom op with no lowering (`mix`, fan-in 2)
applied DEPTH times, then a second one (`tail`) first lowered at the end with the whole chain as its
argument, compiled by Inductor on the CPU. Unpatched, Inductor formats the chain's text eagerly
(tens of seconds at depth 22, minutes from 26 on). Prints the compiled result and `done`.
TAG is an argument only, so a test can find its processes (`exec -a` would break a venv's python).
--ranks N: a parent without torch that starts N such ranks and waits for them, as a server does.
--stay: after `done`, sleep until killed (a running server), so its state can be read.
Run by path in a torch venv's interpreter; imports nothing of this checkout.
"""

# No `from __future__ import annotations`: torch.library.custom_op reads the annotations at runtime.
import subprocess
import sys
import time


def ranks(count: int) -> int:
    children = [subprocess.Popen([sys.executable, *sys.argv]) for _ in range(count)]  # argv less --ranks
    return max(child.wait() for child in children)


def compile_chain(depth: int) -> None:
    import torch

    @torch.library.custom_op("chain_scenario::mix", mutates_args=())  # type: ignore[untyped-decorator]
    def mix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * 0.5 + b * 0.25

    @mix.register_fake  # type: ignore[untyped-decorator]
    def _mix_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(a)

    @torch.library.custom_op("chain_scenario::tail", mutates_args=())  # type: ignore[untyped-decorator]
    def tail(a: torch.Tensor) -> torch.Tensor:
        return a + 1

    @tail.register_fake  # type: ignore[untyped-decorator]
    def _tail_fake(a: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(a)

    def model(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        prev, cur = x, y
        for _ in range(depth):
            prev, cur = cur, mix(cur, prev)
        return tail(cur)

    x = torch.arange(8, dtype=torch.float32)
    y = torch.ones(8)
    got = torch.compile(model, backend="inductor", fullgraph=True)(x, y)
    print(" ".join(f"{v:.6g}" for v in got.tolist()), flush=True)


def main(argv: list[str]) -> int:
    if "--ranks" in argv:
        at = argv.index("--ranks")
        count = int(argv[at + 1])
        del sys.argv[at + 1 : at + 3]  # sys.argv[0] is this file: indexes shift by one
        return ranks(count)
    compile_chain(int(argv[1]))
    print("done", flush=True)
    while "--stay" in argv:
        time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
