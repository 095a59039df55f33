# ms per product of int4-dot8 (AVX2 path) for matrix shapes N x K, bits given in SHAPES, at ROWS rows (1,4,16):
# copies of one matrix (~200 MB in all, out of the caches) cycled, median of 7, and the bytes read per second. Run from
# the repository root, e.g. the 0.5B's layer:
# SHAPES="1152,896,4 896,896,4 9728,896,4 896,4864,4" .venv/bin/python docs/bench/draft-probes/product_shapes.py
import time, torch, statistics, os
from specdecode.models import dot8
from specdecode.models.kernels import load_kernels
load_kernels()
torch.manual_seed(0); torch.set_num_threads(2)
op = torch.ops.specdecode.dot8_mm
tot = {}
for (N, K, bits) in [tuple(int(v) for v in s.split(","))[:3] for s in os.environ["SHAPES"].split()]:
    base = dot8.Packed(dot8.quantize(torch.randn(N, K), bits))
    mats = [(base.w.clone(), base.sub.clone(), base.sup.clone()) for _ in range(max(2, int(200e6 // base.nbytes)))]
    line = f"{N}x{K} b{bits} {base.nbytes/1e6:.1f}MB:"
    for M in [int(m) for m in os.environ.get("ROWS", "1,4,16").split(",")]:
        x = torch.randn(M, K); ts = []
        for rep in range(7):
            t = time.perf_counter()
            for w, s, u in mats: op(x, w, s, u, bits, base.unscale, 1)
            ts.append((time.perf_counter() - t) / len(mats))
        med = statistics.median(ts)
        line += f"  M={M} {med*1e3:.3f}ms ({base.nbytes/med/1e9:.1f} GB/s)"
    print(line, flush=True)
