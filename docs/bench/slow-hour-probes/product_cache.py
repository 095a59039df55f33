"""The same 4-bit product at M = 1 and 4 over ~67 MB of distinct matrices (from memory) and over 1 MB or 4 MB slices
repeated to the same bytes (from the caches): if the cached runs are no faster, the product is bound by its
instructions, not by the memory. Run product_rows.py first (it makes the matrices).
    .venv/bin/python docs/bench/slow-hour-probes/product_cache.py /tmp/dot8-ahead8"""
import sys, time, statistics, torch
torch.ops.load_library(sys.argv[1] + "/sdvar.so")
torch.set_num_threads(2)
mats = torch.load("/tmp/dot8-probe-matrices.pt")
q4 = mats[:8]
# small: a 1/8 slice of one matrix's tiles (1216 rows: ~1 MB), repeated: cache resident
w, s, u, bits, halves, un = q4[0]
small = [(w[:76].contiguous(), s[:76].contiguous(), u[:76].contiguous(), bits, halves, un)] * 64
mid = [(w[:304].contiguous(), s[:304].contiguous(), u[:304].contiguous(), bits, halves, un)] * 16  # ~4 MB
nb = lambda ms: sum(m[0].nbytes + m[1].nbytes + m[2].nbytes for m in ms)
out = {}
for rep in range(15):
    for M in (1, 4):
        for kind, ms in (("dram", q4), ("1MB", small), ("4MB", mid)):
            x = torch.randn(M, 1536)
            t = time.perf_counter()
            for w, s, u, bits, halves, un in ms:
                torch.ops.specdecode.dot8_mm(x, w, s, u, bits, halves, un, 1)
            out.setdefault((kind, M), []).append(time.perf_counter() - t)
for (kind, M), v in out.items():
    ms = {"dram": q4, "1MB": small, "4MB": mid}[kind]
    med = statistics.median(v)
    print(f"{kind} M={M}: {med*1e3:7.2f} ms  {nb(ms)/med/1e9:5.1f} GB/s  calls {len(ms)}")
