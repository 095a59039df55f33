"""The allotment's prices against what its rounds did (docs/bench/fair-allotment/README.md): N requests in process
(the real pair, the server's default draft, the 12 prompts of `bench --clients`, 64 greedy tokens), each allotment's
predicted round (target pass and its gap, draft passes, catch-ups: recomputed here as `Scheduler.allot` prices them at
the commit named in the README) against the time from one target pass's end to the next's and the tokens the round
wrote, by kind of round (plain, copies only, model guesses). From the repository root:

    .venv/bin/python docs/bench/fair-allotment/rounds.py [CLIENTS]
"""
import runpy, sys, time, threading, statistics
from collections import defaultdict
CLIENTS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
sys.argv = [sys.argv[0], "1", "lookup+qwen2.5-coder-0.5b"]
import specdecode.server.scheduler as sch
from specdecode.analysis import expected_tokens
from specdecode.adaptive import catch_up_owed
orig_allot, orig_run, orig_update = sch.Scheduler.allot, sch.Scheduler._run_pass, sch.Allotted.update
allots, ends, updates, dpasses = {}, {}, defaultdict(list), defaultdict(list)
def allot(self, max_gamma):
    g = orig_allot(self, max_gamma)
    leases = list(self.leased)
    c = {l.id: l.controller for l in leases if l.controller is not None}
    copies = {i for i in c if c[i].copied}
    dt = self.draft_times if self.draft_times.measured else (self.learned.draft_times if self.learned else None)
    if not (self.target_times.measured and dt is not None and dt.measured):
        return g
    cu = self.catch_ups if self.catch_ups.measured else dt
    guesses = {i: v for i, v in g.items() if i not in copies}
    alphas = {i: c[i].acceptance(c[i].copied) for i in c}
    rows = len(leases) + sum(g.values())
    t_target = self.target_times(rows) + self.overhead(True)
    drafting, drafted, deepest = 0.0, 0, max(guesses.values(), default=0)
    ending = [0] * (deepest + 1)
    catch = 0.0
    for i, v in guesses.items():
        ending[v] += 1
        if v:
            catch += catch_up_owed(cu, c[i].behind, c[i].remaining) * expected_tokens(alphas[i], v)
    passes = 0.0
    for j in range(deepest, 0, -1):
        drafted += ending[j]
        lagging = sum(alphas[i] ** v for i, v in guesses.items() if v) if j == 1 else 0.0
        passes += dt(drafted + lagging) + self.overhead(False)
    expected = sum(expected_tokens(alphas[i], g[i]) if g[i] else 1.0 for i in g) + (len(leases) - len(g))
    kind = "plain" if not any(g.values()) else ("copy only" if not any(guesses.values()) else "model")
    allots[self._target_passes] = dict(T=self.target_times(rows), tgap=self.overhead(True), dgap=self.overhead(False), kind=kind, n=len(leases), rows=rows, t_target=t_target, passes=passes,
                                       catch=catch, expected=expected, ids=set(g))
    return g
def run(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    prompt = any(i.prompt for i in items)
    start = time.perf_counter(); orig_run(self); end = time.perf_counter()
    if model is self.target:
        ends[self._target_passes] = (end, prompt, end - start, sum(i.tokens.numel() for i in items))
    else:
        dpasses[self._target_passes].append((end - start, sum(i.tokens.numel() for i in items)))
def update(self, drafted, accepted, *a, **k):
    updates[self.lease.scheduler._target_passes].append((self.lease.id, drafted, accepted))
    return orig_update(self, drafted, accepted, *a, **k)
sch.Scheduler.allot, sch.Scheduler._run_pass, sch.Allotted.update = allot, run, update
setup = runpy.run_path("docs/bench/hybrid-allotment/ab_draft.py", run_name="ab_draft")
d = "lookup+qwen2.5-coder-0.5b"
setup["one"](d, setup["prompts"][0], []); setup["one"](d, setup["prompts"][5], [])
allots.clear(); ends.clear(); updates.clear()
r = setup["load"](d, CLIENTS)
print(f"{CLIENTS} clients {r[0]:.1f} tok/s p95 {r[1]*1e3:.1f}")
by = defaultdict(list)
for i, a in allots.items():
    if i not in ends or i + 1 not in ends or ends[i + 1][1]:
        continue  # a prompt pass in the round
    seconds = ends[i + 1][0] - ends[i][0]
    ups = [u for u in updates[i + 1] if u[0] in a["ids"]]
    if len(ups) != len(a["ids"]):
        continue
    tokens = sum(acc + 1 for _, _, acc in ups) + (a["n"] - len(a["ids"]))
    by[(a["kind"], a["n"])].append((a["t_target"] + a["passes"] + a["catch"], seconds, a["expected"], tokens,
                                    a["t_target"], ends[i + 1][2], a["passes"], a["catch"], a["T"], a["tgap"], a["dgap"],
                                    len(dpasses[i]), sum(x for x, _ in dpasses[i]), ends[i + 1][3], a["rows"]))
for key, rows in sorted(by.items()):
    f = lambda j: statistics.mean(r[j] for r in rows)
    print(f"{key}: {len(rows)} rounds; predicted {1e3*f(0):.1f} ms (target+gap {1e3*f(4):.1f}, draft passes {1e3*f(6):.1f}, catch-up {1e3*f(7):.1f}), "
          f"measured {1e3*f(1):.1f} ms (target pass {1e3*f(5):.1f}); tokens expected {f(2):.2f} got {f(3):.2f}; "
          f"\n     T(rows) {1e3*f(8):.1f} for {f(14):.1f} rows, target gap {1e3*f(9):.1f}, draft gap {1e3*f(10):.1f}; measured: draft passes {f(11):.2f} taking {1e3*f(12):.1f} ms, target rows {f(13):.1f}, rest (gaps) {1e3*(f(1)-f(5)-f(12)):.1f} ms; "
          f"rate predicted {sum(r[2] for r in rows)/sum(r[0] for r in rows):.1f} measured {sum(r[3] for r in rows)/sum(r[1] for r in rows):.1f} tok/s")
