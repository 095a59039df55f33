"""At 4 requests with the default draft, each decoding pass's time against the time the allotment's line T(rows)
predicted for it just before (docs/bench/hybrid-allotment/README.md), two loads. From the repository root:

    .venv/bin/python docs/bench/hybrid-allotment/rows.py
"""
import sys, time, statistics
from collections import defaultdict
sys.argv = [sys.argv[0], "1", "lookup+qwen2.5-coder-0.5b"]
import specdecode.server.scheduler as sch
rec = []
run_pass = sch.Scheduler._run_pass
def traced(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    rows = sum(i.tokens.numel() for i in items); n = len(items); prompt = any(i.prompt for i in items)
    pred = self.target_times(rows) if (model is self.target and self.target_times.measured) else None
    gap = self.overhead(True)
    start = time.perf_counter(); run_pass(self); sec = time.perf_counter() - start
    if model is self.target and not prompt and n == 4 and max(i.tokens.numel() for i in items) <= 5:
        rec.append((rows, sec, pred, gap))
sch.Scheduler._run_pass = traced
exec(open("docs/bench/hybrid-allotment/ab_draft.py").read().split("for d in DRAFTS:\n    one(d, prompts[0]")[0])
d = sys.argv[2]
one(d, prompts[0], []); one(d, prompts[5], [])
for r in range(2):
    rec.clear()
    rate, p95, ans, per = load(d, 4)
    print(f"4 clients {rate:.1f} tok/s p95 {p95*1e3:.1f}")
    by = defaultdict(list)
    for rows, sec, pred, gap in rec: by[rows].append((sec, pred, gap))
    for rows in sorted(by):
        v = by[rows]; preds = [p for _, p, _ in v if p is not None]
        print(rows, len(v), "measured median %.1f ms" % (1e3 * statistics.median(s for s, _, _ in v)),
              "predicted median %.1f" % (1e3 * statistics.median(preds)) if preds else "", "gap %.1f" % (1e3 * statistics.median(g for *_, g in v)))
