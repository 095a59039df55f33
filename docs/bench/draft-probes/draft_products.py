# The named 0.5B draft's products at one row, each kind over its 24 layers in a loop, and its cut head: MB, ms, GB/s.
#   .venv/bin/python docs/bench/draft-probes/draft_products.py
import statistics
import time

import torch

from specdecode.load import default_draft, load_draft, load_target

torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
m = load_draft(default_draft(t), t).fallback.model


def timed(call, repeats=30):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


for name in ("qkv", "o", "gate_up", "down"):
    linears = [getattr(layer, name) for layer in m.layers]
    inputs = [torch.randn(1, linear.parts[0].in_features) for linear in linears]
    seconds = timed(lambda ls=linears, xs=inputs: [linear(x) for linear, x in zip(ls, xs, strict=True)])
    mb = sum(linear.nbytes for linear in linears) / 1e6
    print(f"{name}: {mb:.1f} MB in {1e3 * seconds:.2f} ms = {mb / 1e3 / seconds:.1f} GB/s; "
          f"per call {1e6 * seconds / len(linears):.1f} us")
x = torch.randn(1, m.shape.hidden)
print(f"head: {m.head.nbytes / 1e6:.1f} MB in {1e3 * timed(lambda: m.head(x)):.2f} ms")
