"""Where one 4-request load's pass time goes (docs/bench/hybrid-allotment/README.md): each pass of the target (T)
and of the draft (D) by kind: a prompt's prefill, a catch-up (a sequence fed more than 4 rows), or a step (how many
sequences, how many rows). From the repository root:

    .venv/bin/python docs/bench/hybrid-allotment/passes.py [DRAFT]
"""
import runpy, sys, time, threading
from collections import Counter, defaultdict
sys.argv = [sys.argv[0], "1", sys.argv[1] if len(sys.argv) > 1 else "lookup+qwen2.5-coder-0.5b"]
import specdecode.server.scheduler as sch
passes = []
run_pass = sch.Scheduler._run_pass
def traced(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    rows = tuple(item.tokens.numel() for item in items); prompt = sum(i.prompt for i in items)
    start = time.perf_counter(); run_pass(self)
    passes.append(("T" if model is self.target else "D", rows, prompt, time.perf_counter() - start))
sch.Scheduler._run_pass = traced
globals().update(runpy.run_path("docs/bench/hybrid-allotment/ab_draft.py", run_name="ab_draft"))
d = sys.argv[2]
one(d, prompts[0], []); one(d, prompts[5], [])
passes.clear()
rate, p95, ans, per = load(d, 4)
print(f"{d} 4 clients {rate:.1f} tok/s p95 {p95*1e3:.1f} ms")
agg = defaultdict(lambda: [0, 0.0])
for kind, rows, prompt, s in passes:
    key = (kind, "prompt" if prompt else ("catch-up" if max(rows) > 4 else f"{len(rows)} seqs, {sum(rows)} rows"))
    agg[key][0] += 1; agg[key][1] += s
tot = sum(v[1] for v in agg.values())
for k, (n, s) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:25]:
    print(k, n, f"{s:.2f} s", f"{1e3*s/n:.1f} ms each")
print("total in passes", round(tot, 2))
