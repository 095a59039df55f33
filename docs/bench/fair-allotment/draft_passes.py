"""The draft's passes of one load of N requests in process (docs/bench/fair-allotment/README.md), by rows per sequence:
count, median time, what the batched line T_d priced them at, the gap before them; and every catch-up pass (a
sequence fed more than 4 rows: a deferred prompt prefill, or the tokens a copy skipped) and target prompt pass. From
the repository root:

    .venv/bin/python docs/bench/fair-allotment/draft_passes.py [CLIENTS]
"""
import runpy, sys, time, statistics
from collections import defaultdict
CLIENTS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
sys.argv = [sys.argv[0], "1", "lookup+qwen2.5-coder-0.5b"]
import specdecode.server.scheduler as sch
orig_run = sch.Scheduler._run_pass
log = []
def run(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    rows = tuple(sorted(i.tokens.numel() for i in items))
    pred = self.draft_times(sum(rows)) if self.draft_times.measured else None
    gap = (time.perf_counter() - self._last_end) if self._last_end else None
    start = time.perf_counter(); orig_run(self); end = time.perf_counter()
    log.append(("T" if model is self.target else "D", rows, end - start, pred, gap, any(i.prompt for i in items)))
sch.Scheduler._run_pass = run
setup = runpy.run_path("docs/bench/hybrid-allotment/ab_draft.py", run_name="ab_draft")
d = "lookup+qwen2.5-coder-0.5b"
setup["one"](d, setup["prompts"][0], []); setup["one"](d, setup["prompts"][5], [])
log.clear()
r = setup["load"](d, CLIENTS)
print(f"{CLIENTS} clients {r[0]:.1f} tok/s p95 {r[1]*1e3:.1f}")
by = defaultdict(list)
for kind, rows, s, pred, gap, prompt in log:
    if kind == "D":
        by[rows if max(rows) <= 4 else "catch-up"].append((s, pred, gap))
for rows, v in sorted(by.items(), key=lambda kv: -len(kv[1]))[:14]:
    preds = [p for _, p, _ in v if p is not None]
    gaps = [g for _, _, g in v if g is not None]
    print(f"D rows {rows}: {len(v)} passes, {1e3*statistics.median(s for s, _, _ in v):.1f} ms median, total {sum(s for s,_,_ in v):.2f} s, "
          f"priced {1e3*statistics.median(preds) if preds else float('nan'):.1f}, gap before {1e3*statistics.median(gaps) if gaps else float('nan'):.1f}")
tg = [g for k, rows, s, p, g, pr in log if k == "T" and g is not None and not pr]
print("T gap before median", round(1e3*statistics.median(tg), 1))
print("catch-ups:", [(rows, round(1e3*s)) for kind, rows, s, p, g, pr in log if kind == "D" and max(rows) > 4])
print("target prompt passes:", [(rows, round(1e3*s)) for kind, rows, s, p, g, pr in log if kind == "T" and pr])
