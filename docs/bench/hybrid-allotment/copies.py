"""At 4 requests with the default draft, the copies' and the guesses' acceptance as realized against the alpha the
allotment priced them at (docs/bench/hybrid-allotment/README.md), two loads. From the repository root:

    .venv/bin/python docs/bench/hybrid-allotment/copies.py
"""
import sys, time, statistics
from collections import defaultdict
sys.argv = [sys.argv[0], "1", "lookup+qwen2.5-coder-0.5b"]
import specdecode.server.scheduler as sch
log = []
orig_choose, orig_update = sch.Allotted.choose, sch.Allotted.update
def choose(self, copied=False, behind=0, remaining=None):
    g = orig_choose(self, copied, behind, remaining)
    self._est = (self.acceptance(copied), g, self._shared)
    return g
def update(self, drafted, accepted, *a, **k):
    copied = a[3] if len(a) > 3 else k.get("copied", False)
    est = getattr(self, "_est", None)
    if est and est[2] and drafted:
        log.append((copied, drafted, accepted, est[0], est[1]))
    return orig_update(self, drafted, accepted, *a, **k)
sch.Allotted.choose, sch.Allotted.update = choose, update
exec(open("docs/bench/hybrid-allotment/ab_draft.py").read().split("for d in DRAFTS:\n    one(d, prompts[0]")[0])
d = sys.argv[2]
one(d, prompts[0], []); one(d, prompts[5], [])
for r in range(2):
    log.clear()
    rate, p95, ans, per = load(d, 4)
    print(f"4 clients {rate:.1f} tok/s p95 {p95*1e3:.1f}")
    for kind in (True, False):
        rows = [x for x in log if x[0] == kind]
        if not rows: continue
        # realized per-position acceptance vs estimate: accepted/drafted approximates positions kept
        dr = sum(x[1] for x in rows); ac = sum(x[2] for x in rows)
        first = sum(1 for x in rows if x[2] >= 1) / len(rows)
        print("copies" if kind else "guesses", len(rows), "rounds, drafted", dr, "accepted", ac,
              "first kept %.2f" % first, "estimated alpha median %.2f" % statistics.median(x[3] for x in rows),
              "gamma median", statistics.median(x[4] for x in rows))
