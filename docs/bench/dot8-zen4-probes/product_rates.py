# ms and GMAC/s of the 1.5B's 28 gate/up and 28 down products (part 0 each) at 1, 16 and 64 rows, THREADS threads:
#   .venv/bin/python docs/bench/dot8-zen4-probes/product_rates.py THREADS
import time, torch, statistics
from specdecode.load import load_target
torch.set_num_threads(int(__import__('sys').argv[1]))
m = load_target("qwen2.5-coder-1.5b").model
for kind in ("gate_up", "down"):
    ps = [getattr(l, kind).parts[0] for l in m.layers]
    p0 = ps[0]
    for M in (1, 16, 64):
        x = torch.randn(M, p0.in_features)
        ts = []
        for r in range(5):
            a = time.perf_counter()
            for p in ps: p(x, "avx512-vnni")
            ts.append(time.perf_counter() - a)
        t = statistics.median(ts)
        macs = sum(p.out_features * p.in_features for p in ps) * M
        print(kind, p0.bits, M, f"{t*1e3:.1f} ms  {macs/t/1e9:.1f} GMAC/s  {t*1e3/M:.2f} ms/row", flush=True)
