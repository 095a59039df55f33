"""What the requests' rounds were allotted against what they drafted and kept (docs/bench/fair-allotment/README.md):
N requests and then 1 in process (the real pair, the server's default draft, the 12 prompts of `bench --clients`, 64
greedy tokens), by whether the round was shared, copied, and its gamma: the acceptance it was priced at, the guesses
drafted (the 0.5B stops when unsure), the tokens expected_tokens(alpha, gamma) counts and those the round wrote. From
the repository root:

    .venv/bin/python docs/bench/fair-allotment/guesses.py [CLIENTS]
"""
import runpy, sys, statistics
from collections import defaultdict
CLIENTS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
sys.argv = [sys.argv[0], "1", "lookup+qwen2.5-coder-0.5b"]
import specdecode.server.scheduler as sch
from specdecode.analysis import expected_tokens
orig_choose, orig_update = sch.Allotted.choose, sch.Allotted.update
pending, rows = {}, []
def choose(self, copied=False, behind=0, remaining=None):
    g = orig_choose(self, copied, behind, remaining)
    pending[id(self)] = (g, copied, self.acceptance(copied), self._shared, getattr(self, "stop_rate", None))
    return g
def update(self, drafted, accepted, *a, **k):
    if id(self) in pending:
        g, copied, alpha, shared, stop = pending.pop(id(self))
        rows.append((shared, copied, g, drafted, accepted, alpha))
    return orig_update(self, drafted, accepted, *a, **k)
sch.Allotted.choose, sch.Allotted.update = choose, update
setup = runpy.run_path("docs/bench/hybrid-allotment/ab_draft.py", run_name="ab_draft")
d = "lookup+qwen2.5-coder-0.5b"
setup["one"](d, setup["prompts"][0], []); setup["one"](d, setup["prompts"][5], [])
for clients in (CLIENTS, 1):
    rows.clear()
    r = setup["load"](d, clients)
    print(f"{clients} clients {r[0]:.1f} tok/s p95 {r[1]*1e3:.1f}")
    by = defaultdict(list)
    for shared, copied, g, drafted, accepted, alpha in rows:
        if g:
            by[(shared, copied, min(g, 4))].append((expected_tokens(alpha, g), 1 + accepted, drafted, alpha))
    for key, v in sorted(by.items()):
        f = lambda j: statistics.mean(x[j] for x in v)
        print(f"  shared {key[0]!s:5} copied {key[1]!s:5} gamma {key[2]}{'+' if key[2] == 4 else ''}: {len(v):4d} rounds, "
              f"alpha {f(3):.2f}, drafted {f(2):.2f}, tokens expected {f(0):.2f} got {f(1):.2f}")
