# Is a multi-row int4-dot8 product on AVX2 bound by compute, or by memory and compute not overlapping? Streamed: all
# 127 products of the 1.5B's pass (weights from memory). Cached: one small matrix called as often as the pass has
# bytes (its weights in the caches). ms at M rows, medians of 7. From the repository root:
#   .venv/bin/python docs/bench/avx2-verify-probes/cache_vs_stream.py [ISA]   (1: AVX2, 2: AVX-512 VNNI)
import statistics, sys, time
import torch
from specdecode.load import load_target
torch.set_num_threads(2)
isa = int(sys.argv[1]) if len(sys.argv) > 1 else 1

m = load_target("qwen2.5-coder-1.5b").model
op = torch.ops.specdecode.dot8_mm
parts = [p for layer in m.layers for lin in (layer.qkv, layer.o, layer.gate_up, layer.down) for p in lin.parts]
parts += list(m.head.parts)
total = sum(p.nbytes for p in parts)
small = [p for p in m.layers[0].o.parts]  # 1536 x 1536
sb = sum(p.nbytes for p in small)
print(len(parts), "products", total / 1e9, "GB; small", sb / 1e6, "MB", [p.bits for p in small], flush=True)
by_kind = {}
for p in parts:
    by_kind.setdefault(p.bits, 0)
    by_kind[p.bits] += p.nbytes
print({k: round(v / 1e6) for k, v in by_kind.items()})
torch.manual_seed(0)
for M in (1, 2, 3, 4):
    xs = {p.in_features: torch.randn(M, p.in_features) for p in parts}
    st, ca = [], []
    reps = int(total / sb)
    for r in range(7):
        t0 = time.perf_counter()
        for p in parts:
            op(xs[p.in_features], p.w, p.sub, p.sup, p.bits, p.unscale, isa)
        st.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        for _ in range(reps):
            for p in small:
                op(xs[p.in_features], p.w, p.sub, p.sup, p.bits, p.unscale, isa)
        ca.append((time.perf_counter() - t0) * 1e3)
    print(f"M={M} streamed {statistics.median(st):6.1f} ms  cached(same bytes, {reps} calls) {statistics.median(ca):6.1f} ms", flush=True)
