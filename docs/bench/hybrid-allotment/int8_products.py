"""oneDNN's int8 product against its bf16 product on the 1.5B's shapes (28 layers of fused q/k/v, o, gate/up and
down, random weights, out of cache), 2 threads; and whether an int8 product's rows are bitwise the same at any row
count (docs/bench/hybrid-allotment/README.md, "Not kept"). From the repository root:

    .venv/bin/python docs/bench/hybrid-allotment/int8_products.py
"""
import time, torch
torch.set_num_threads(2)
torch.manual_seed(0)
H, I, L = 1536, 8960, 28
shapes = [(2048, H), (H, H), (2 * I, H), (H, I)]
bf, q8 = [], []
for l in range(L):
    for n, k in shapes:
        w = torch.randn(n, k) * 0.02
        bf.append(torch.ops.mkldnn._reorder_linear_weight(w.to(torch.bfloat16).contiguous()))
        s = w.abs().amax(1) / 127
        wq = torch.round(w / s[:, None]).clamp(-127, 127).to(torch.int8)
        q8.append((torch.ops.onednn.qlinear_prepack(wq, None), s.float(), torch.zeros(n, dtype=torch.long), k))
xs_b = {k: torch.randn(128, k, dtype=torch.bfloat16) for k in (H, I)}
xs_q = {k: torch.randint(0, 255, (128, k), dtype=torch.uint8) for k in (H, I)}
def run_bf(M):
    for w, (n, k) in zip(bf, shapes * L):
        torch.ops.mkldnn._linear_pointwise(xs_b[k][:M], w, None, "none", [], "")
def run_q8(M):
    for (w, s, z, k) in q8:
        torch.ops.onednn.qlinear_pointwise(xs_q[k][:M], 1.0, 128, w, s, z, None, 1.0, 0, torch.float32, "none", [], "")
for M in (16, 32, 64, 128):
    for f in (run_bf, run_q8): f(M)
    tb, tq = [], []
    for r in range(3):
        t = time.perf_counter(); run_bf(M); tb.append(time.perf_counter() - t)
        t = time.perf_counter(); run_q8(M); tq.append(time.perf_counter() - t)
    print(M, "rows: bf16 %.1f ms" % (1e3 * min(tb)), "int8 %.1f ms" % (1e3 * min(tq)))
# invariance
w, s, z, k = q8[2]
x = xs_q[k]
full = torch.ops.onednn.qlinear_pointwise(x, 1.0, 128, w, s, z, None, 1.0, 0, torch.float32, "none", [], "")
bad = 0
for M in (1, 2, 3, 4, 7, 16, 31, 33, 64, 100):
    part = torch.ops.onednn.qlinear_pointwise(x[:M].contiguous(), 1.0, 128, w, s, z, None, 1.0, 0, torch.float32, "none", [], "")
    bad += not torch.equal(part, full[:M])
    sl = torch.ops.onednn.qlinear_pointwise(x[M:M+5].contiguous(), 1.0, 128, w, s, z, None, 1.0, 0, torch.float32, "none", [], "")
    bad += not torch.equal(sl, full[M:M+5])
print("invariance mismatches", bad)
