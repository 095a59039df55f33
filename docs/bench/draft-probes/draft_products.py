# The named 0.5B draft's products at one row, each kind over its 24 layers in a loop, and its cut head: MB, ms, GB/s.
#   .venv/bin/python docs/bench/draft-probes/draft_products.py
import time, torch, statistics
from specdecode.load import default_draft, load_draft, load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
m = load_draft(default_draft(t), t).fallback.model
for name in ("qkv", "o", "gate_up", "down"):
    lins = [getattr(l, name) for l in m.layers]
    xs = [torch.randn(1, l.parts[0].in_features) for l in lins]
    ts = []
    for _ in range(30):
        a = time.perf_counter()
        for l, x in zip(lins, xs): l(x)
        ts.append(time.perf_counter() - a)
    mb = sum(l.nbytes for l in lins) / 1e6
    med = statistics.median(ts)
    print(f"{name}: {mb:.1f} MB in {1e3*med:.2f} ms = {mb/1e3/med:.1f} GB/s; per call {1e6*med/len(lins):.1f} us")
x = torch.randn(1, m.shape.hidden); ts=[]
for _ in range(30):
    a = time.perf_counter(); m.head(x); ts.append(time.perf_counter()-a)
print(f"head: {m.head.nbytes/1e6:.1f} MB in {1e3*statistics.median(ts):.2f} ms")
