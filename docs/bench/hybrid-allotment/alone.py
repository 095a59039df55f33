"""One request at a time: the Service (the server's Scheduler, no HTTP) against the library (`bench.clients.InProcess`,
as the clients bench runs it), alternating prompt by prompt, the 12 clients-bench prompts twice. From the repository
root:

    .venv/bin/python docs/bench/hybrid-allotment/alone.py [DRAFT]
"""
import runpy, sys, time, statistics
sys.argv = [sys.argv[0], "1", sys.argv[1] if len(sys.argv) > 1 else "lookup+qwen2.5-coder-0.5b"]
globals().update(runpy.run_path("docs/bench/hybrid-allotment/ab_draft.py", run_name="ab_draft"))
from specdecode.bench.clients import InProcess, bench_prompts
d = sys.argv[2]
lib = InProcess("qwen2.5-coder-1.5b", d, 2)
ps = bench_prompts("qwen2.5-coder-1.5b", 2)
one(d, prompts[0], []); lib.request(ps[0], 64)
srv, libt = [], []
for rep in range(2):
    for i, p in enumerate(ps):
        for turn in ((0, 1) if (i + rep) % 2 == 0 else (1, 0)):
            t0 = time.perf_counter()
            if turn == 0:
                ans = []; one(d, p.prompt, ans); srv.append((time.perf_counter() - t0, ans[0][0]))
            else:
                o = lib.request(p, 64); libt.append((time.perf_counter() - t0, o.tokens))
s = sum(t for _, t in srv) / sum(x for x, _ in srv); l = sum(t for _, t in libt) / sum(x for x, _ in libt)
print(f"{d}: Service alone {s:.1f} tok/s, library {l:.1f} tok/s, ratio {s / l:.3f}")
