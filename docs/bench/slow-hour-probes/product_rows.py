"""Our int4-dot8 product at M = 1, 2, 4 rows: 8 matrices [9728, 1536] of 4-bit codes (halves 1) and 3 [1536, 8960]
of 6-bit codes (halves 2, as the 1.5B's down projections), each run over all of them, 12 alternations, medians;
ISA as dot8_mm takes it: 1 AVX2 (the default), 2 AVX-512 VNNI, 3 AMX-INT8 from 8 rows.
    .venv/bin/python docs/bench/slow-hour-probes/product_rows.py /tmp/dot8-ahead8 [ISA]"""
import sys, time, statistics, os, torch
torch.ops.load_library(sys.argv[1] + "/sdvar.so")
torch.set_num_threads(2)
isa = int(sys.argv[2]) if len(sys.argv) > 2 else 1
path = "/tmp/dot8-probe-matrices.pt"  # made once, then shared by every variant
if not os.path.exists(path):
    from specdecode.models.dot8 import quantize, Packed
    torch.manual_seed(0)
    mats = []
    for i in range(8):
        p = Packed(quantize(torch.randn(9728, 1536) * 0.02, 4), halves=1)
        mats.append((p.w.clone(), p.sub.clone(), p.sup.clone(), 4, 1, p.unscale))
    for i in range(3):
        p = Packed(quantize(torch.randn(1536, 8960) * 0.02, 6), halves=2)
        mats.append((p.w.clone(), p.sub.clone(), p.sup.clone(), 6, 2, p.unscale))
    torch.save(mats, path)
mats = torch.load(path)
nb = lambda ms: sum(m[0].nbytes + m[1].nbytes + m[2].nbytes for m in ms)
out = {}
for rep in range(12):
    for M in (1, 2, 4):
        for kind, ms in (("q4", mats[:8]), ("q6h2", mats[8:])):
            x = torch.randn(M, ms[0][0].shape[1] * (32 if ms[0][3] == 4 else 16))
            t = time.perf_counter()
            for w, s, u, bits, halves, un in ms:
                torch.ops.specdecode.dot8_mm(x, w, s, u, bits, halves, un, isa)
            out.setdefault((kind, M), []).append(time.perf_counter() - t)
for (kind, M), v in out.items():
    ms = mats[:8] if kind == "q4" else mats[8:]
    med = statistics.median(v)
    print(f"{sys.argv[1][-3:]} {kind} M={M}: {med*1e3:7.2f} ms  {nb(ms)/med/1e9:5.1f} GB/s")
