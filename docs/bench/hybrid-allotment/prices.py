"""At 4 requests with the default draft, two checks of the allotment's prices (docs/bench/hybrid-allotment/README.md),
two loads: each decoding pass's time against what the allotment's line T(rows) predicted just before it, and the
copies' and the guesses' acceptance as realized against the alpha the allotment priced them at. From the repository
root:

    .venv/bin/python docs/bench/hybrid-allotment/prices.py
"""
import statistics
import runpy
import sys
import time
from collections import defaultdict

sys.argv = [sys.argv[0], "1", "lookup+qwen2.5-coder-0.5b"]
import specdecode.server.scheduler as sch  # noqa: E402

passes, rounds = [], []  # (rows, seconds, predicted); (copied, drafted, accepted, priced alpha, gamma)
run_pass, choose, update = sch.Scheduler._run_pass, sch.Allotted.choose, sch.Allotted.update


def traced(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    rows = sum(i.tokens.numel() for i in items)
    decoding = model is self.target and len(items) == 4 and not any(i.prompt for i in items) and \
        max(i.tokens.numel() for i in items) <= 5
    predicted = self.target_times(rows) if decoding and self.target_times.measured else None
    start = time.perf_counter()
    run_pass(self)
    if decoding:
        passes.append((rows, time.perf_counter() - start, predicted))


def chosen(self, copied=False, behind=0, remaining=None):
    gamma = choose(self, copied, behind, remaining)
    self.priced = (self.acceptance(copied), gamma, self._shared)
    return gamma


def updated(self, drafted, accepted, *args, **kwargs):
    copied = args[3] if len(args) > 3 else kwargs.get("copied", False)  # (target s, draft s, draft passes, copied)
    priced = getattr(self, "priced", None)
    if priced and priced[2] and drafted:
        rounds.append((copied, drafted, accepted, priced[0], priced[1]))
    return update(self, drafted, accepted, *args, **kwargs)


sch.Scheduler._run_pass, sch.Allotted.choose, sch.Allotted.update = traced, chosen, updated
globals().update(runpy.run_path("docs/bench/hybrid-allotment/ab_draft.py", run_name="ab_draft"))
draft = sys.argv[2]
one(draft, prompts[0], [])
one(draft, prompts[5], [])
for _ in range(2):
    passes.clear()
    rounds.clear()
    rate, p95, _, _ = load(draft, 4)
    print(f"4 requests: {rate:.1f} tok/s, per-token p95 {p95 * 1e3:.1f} ms")
    by_rows = defaultdict(list)
    for rows, seconds, predicted in passes:
        by_rows[rows].append((seconds, predicted))
    for rows, seen in sorted(by_rows.items()):
        predicted = [p for _, p in seen if p is not None]
        print(f"  {rows} rows: {len(seen)} passes, measured {statistics.median(s for s, _ in seen) * 1e3:.1f} ms"
              + (f", predicted {statistics.median(predicted) * 1e3:.1f}" if predicted else ""))
    for copied in (True, False):
        seen = [r for r in rounds if r[0] == copied]
        if seen:
            kept = sum(1 for r in seen if r[2] >= 1) / len(seen)
            print(f"  {'copies' if copied else 'guesses'}: {len(seen)} rounds, first kept {kept:.2f}, priced alpha "
                  f"(median) {statistics.median(r[3] for r in seen):.2f}, gamma (median) "
                  f"{statistics.median(r[4] for r in seen)}")
