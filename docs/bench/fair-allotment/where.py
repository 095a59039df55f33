"""Where a 4-request load's time goes, the allotment against plain batching, loads alternating
(docs/bench/fair-allotment/README.md): the real pair with the server's default draft (lookup+qwen2.5-coder-0.5b),
the 12 prompts of `bench --clients`, 64 greedy tokens each, through the Scheduler as the server runs it. From the
repository root:

    .venv/bin/python docs/bench/fair-allotment/where.py [REPS]

Per load: tokens/s, per-token p95, pass seconds by kind (the target's prompt passes, its decoding passes of one row
a request, those with more; the draft's prefills and catch-ups, its steps), and the three slowest requests' per-token
times with the seconds of passes of each kind while they decoded (from their first token to their last)."""
import runpy, statistics, sys, threading, time
from collections import defaultdict
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
sys.argv = [sys.argv[0], "1", "lookup+qwen2.5-coder-0.5b"]
import specdecode.server.scheduler as sch
passes = []  # (kind, start, end)
run_pass = sch.Scheduler._run_pass
def traced(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    rows = [item.tokens.numel() for item in items]
    if model is self.target:
        kind = "T prompt" if any(i.prompt for i in items) else ("T 1 a request" if max(rows) == 1 else "T more")
    else:
        kind = "D prefill/catch-up" if max(rows) > sch.STEP_ROWS else "D step"
    start = time.perf_counter(); run_pass(self); passes.append((kind, start, time.perf_counter()))
sch.Scheduler._run_pass = traced
setup = runpy.run_path("docs/bench/hybrid-allotment/ab_draft.py", run_name="ab_draft")
services, prompts, served = setup["services"], setup["prompts"], setup["served"]
d = "lookup+qwen2.5-coder-0.5b"
plain = lambda self, max_gamma: {lease.id: 0 for lease in self.leased if lease.controller is not None}
variants = {"allotment": sch.Scheduler.allot, "plain": plain}



def request(prompt, log):
    start = time.perf_counter()
    tokens, per, text, rounds = served(*services[d], prompt)
    log.append((prompt, tokens, per, start, time.perf_counter()))

def load():
    log = []
    def client(c):
        for prompt in prompts[c::4]:
            request(prompt, log)
    passes.clear()
    workers = [threading.Thread(target=client, args=(c,)) for c in range(4)]
    start = time.perf_counter()
    for w in workers: w.start()
    for w in workers: w.join()
    return log, time.perf_counter() - start, list(passes)

request(prompts[0], []); request(prompts[5], [])
summary = defaultdict(list)
for rep in range(REPS):
    for name in (list(variants) if rep % 2 == 0 else list(variants)[::-1]):
        sch.Scheduler.allot = variants[name]
        log, seconds, seen = load()
        timed = [(t, p) for _, t, p, _, _ in log if p is not None]
        rate = sum(t for _, t, *_ in log) / seconds
        p95 = setup["percentile"]([p for _, p in timed], 95, [t for t, _ in timed])
        kinds = defaultdict(float)
        for kind, s, e in seen:
            kinds[kind] += e - s
        summary[name].append((rate, p95, dict(kinds)))
        print(f"{name:9s} {rate:5.1f} tok/s, p95 {p95 * 1e3:5.1f} ms; " +
              ", ".join(f"{k} {v:.2f} s" for k, v in sorted(kinds.items())), flush=True)
        for prompt, tokens, per, s0, e0 in sorted(log, key=lambda r: -(r[2] or 0))[:3]:
            during = defaultdict(float)
            for kind, s, e in seen:
                during[kind] += max(0.0, min(e, e0) - max(s, s0))
            print(f"    {per * 1e3:5.1f} ms/token, {tokens} tokens, {e0 - s0:.2f} s: " +
                  ", ".join(f"{k} {v:.2f}" for k, v in sorted(during.items())) + f"  [{prompt[:40]!r}]")
for name, rows in summary.items():
    print(f"{name:9s} median {statistics.median(r for r, _, _ in rows):.1f} tok/s, p95 "
          f"{statistics.median(p for _, p, _ in rows) * 1e3:.1f} ms")
