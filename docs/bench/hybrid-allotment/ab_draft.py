"""Drafts at 4 requests and at 1 in process (docs/bench/hybrid-allotment/README.md): qwen2.5-coder-0.5b against
lookup+qwen2.5-coder-0.5b (the real pair's default draft), loads alternating, the 12 prompts of `bench --clients` (2 a
kind), 64 greedy tokens each, seed 1234, through the Scheduler as the server runs it (`Service`, no HTTP). From the
repository root:

    .venv/bin/python docs/bench/hybrid-allotment/ab_draft.py [REPS] [DRAFT,DRAFT...]

Prints each load's tokens/s, per-token p95 (a request's time from its first token to its last over the tokens after
the first, weighted by tokens) and tokens per round that emitted some, then the medians per draft."""
import statistics, sys, threading, time
from collections import defaultdict
from pathlib import Path
from specdecode.bench.clients import bench_prompts, percentile
from specdecode.server.service import Service
sys.path.insert(0, str(Path("docs/bench").resolve()))  # (in_process.py; this file is also run by exec from others)
from in_process import one as served

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
DRAFTS = sys.argv[2].split(",") if len(sys.argv) > 2 else ["qwen2.5-coder-0.5b", "lookup+qwen2.5-coder-0.5b"]
services = {}
for d in DRAFTS:
    s = Service("qwen2.5-coder-1.5b", d, "auto", "auto", "auto", 4096, 512, sequences=4)
    services[d] = (s, s.load())
prompts = [p.prompt for p in bench_prompts("qwen2.5-coder-1.5b", 2)]

def one(d, prompt, answers):
    answers.append(served(*services[d], prompt))

def load(d, clients):
    answers = []
    def client(c):
        for prompt in prompts[c::clients]:
            one(d, prompt, answers)
    workers = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    start = time.perf_counter()
    for w in workers: w.start()
    for w in workers: w.join()
    seconds = time.perf_counter() - start
    timed = [(t, p) for t, p, _, _ in answers if p is not None]
    tokens = sum(t for t, *_ in answers)
    return (tokens / seconds, percentile([p for _, p in timed], 95, [t for t, _ in timed]),
            sorted(x for _, _, x, _ in answers), tokens / sum(r for *_, r in answers))

if __name__ == "__main__":  # (the other scripts here take the set-up above: runpy.run_path)
    for d in DRAFTS:
        one(d, prompts[0], []); one(d, prompts[5], [])
    res = defaultdict(list); texts = {}
    for rep in range(REPS):
        order = [(d, c) for d in DRAFTS for c in (4, 1)]
        for d, c in (order if rep % 2 == 0 else order[::-1]):
            rate, p95, ans, per_round = load(d, c)
            texts.setdefault((d, c), ans)
            res[(d, c)].append((rate, p95))
            print(f"{d:28s} {c} clients {rate:5.1f} tok/s, p95 {p95 * 1e3:5.1f} ms, tokens per emitting round {per_round:.2f}", flush=True)
    for d in DRAFTS:
        r4 = statistics.median(r for r, _ in res[(d, 4)]); r1 = statistics.median(r for r, _ in res[(d, 1)])
        p4 = statistics.median(p for _, p in res[(d, 4)]); p1 = statistics.median(p for _, p in res[(d, 1)])
        print(f"{d:28s} median 4: {r4:.1f} tok/s, 1: {r1:.1f} -> {r4 / r1:.2f}x; p95 {p4*1e3:.1f} / {p1*1e3:.1f} = {p4 / p1:.2f}x; "
              f"4 = 1 texts: {texts[(d, 4)] == texts[(d, 1)]}")
