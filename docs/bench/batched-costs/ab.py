"""The allotment against plain batching (and, optionally, an older commit's allotment), 4 requests at a time in
process, alternating (docs/bench/batched-costs/README.md). The 12 prompts of `bench --clients` (2 a kind), 64 greedy
tokens each, seed 1234, through the Scheduler as the server runs it (`Service`, no HTTP); then the same prompts one
at a time. From the repository root:

    .venv/bin/python docs/bench/batched-costs/ab.py [REPS] [OLD_COMMIT] [DRAFT]

DRAFT: the draft's name (qwen2.5-coder-0.5b unless given; the server's default is lookup+qwen2.5-coder-0.5b).

Prints each load's tokens/s and per-token p50 / p95 (a request's time from its first token to its last over the
tokens after the first, weighted by tokens), then the medians, and per kind of round (rows per request in a target
pass of 4 requests' decoding) the median time from one target pass's end to the next's."""

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict

from pathlib import Path

from specdecode.bench.clients import bench_prompts, percentile
from specdecode.server import scheduler as sch
from specdecode.server.service import Service

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # (docs/bench: in_process.py)
from in_process import one as served  # noqa: E402

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
DRAFT = sys.argv[3] if len(sys.argv) > 3 else "qwen2.5-coder-0.5b"
service = Service("qwen2.5-coder-1.5b", DRAFT, "auto", "auto", "auto", 4096, 512, sequences=4)
loaded = service.load()
scheduler = service.scheduler
prompts = [p.prompt for p in bench_prompts("qwen2.5-coder-1.5b", 2)]

variant = [None]
variants = {"allotment": sch.Scheduler.allot,
            "plain": lambda self, max_gamma: {lease.id: 0 for lease in self.leased if lease.controller is not None}}
if len(sys.argv) > 2 and sys.argv[2] != "-":  # an older commit's allotment, run on this commit's scheduler
    source = subprocess.run(["git", "show", f"{sys.argv[2]}:specdecode/server/scheduler.py"], check=True,
                            capture_output=True, text=True).stdout
    source = source.replace("from ..", "from specdecode.").replace("from .threads", "from specdecode.server.threads")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as file:
        file.write(source)
    spec = importlib.util.spec_from_file_location("old_scheduler", file.name)
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_scheduler"] = old
    spec.loader.exec_module(old)
    variants[sys.argv[2]] = old.Scheduler.allot

passes = []  # (variant, model, rows per request, start, end)
run_pass = sch.Scheduler._run_pass


def traced(self) -> None:
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    rows, start = tuple(item.tokens.numel() for item in items), time.perf_counter()
    run_pass(self)
    passes.append((variant[0], "T" if model is self.target else "D", rows, start, time.perf_counter()))


sch.Scheduler._run_pass = traced


def one(prompt: str, answers: list) -> None:
    answers.append(served(service, loaded, prompt)[:3])


def load(clients: int) -> tuple[float, float, float, set[str]]:
    answers = []

    def client(c: int) -> None:
        for prompt in prompts[c::clients]:
            one(prompt, answers)

    workers = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - start
    timed = [(tokens, per) for tokens, per, _ in answers if per is not None]
    pers, weights = [per for _, per in timed], [tokens for tokens, _ in timed]
    return (sum(tokens for tokens, _, _ in answers) / seconds, percentile(pers, 50, weights),
            percentile(pers, 95, weights), {text for _, _, text in answers})


one(prompts[0], [])  # warm-up, alone
one(prompts[5], [])
names, results, texts = list(variants), defaultdict(list), {}
for rep in range(REPS):
    for name in names if rep % 2 == 0 else names[::-1]:
        variant[0], sch.Scheduler.allot = name, variants[name]
        rate, p50, p95, answers = load(4)
        texts.setdefault(name, answers)
        results[name].append((rate, p50, p95))
        print(f"{name:10s} 4 clients {rate:5.1f} tok/s, per-token p50 {p50 * 1e3:5.1f} p95 {p95 * 1e3:5.1f} ms",
              flush=True)
variant[0], sch.Scheduler.allot = "1 client", variants["allotment"]
rate1, p50_1, p95_1, _ = load(1)
print(f"1 client   {rate1:5.1f} tok/s, per-token p50 {p50_1 * 1e3:5.1f} p95 {p95_1 * 1e3:5.1f} ms")
for name in names:
    rate, p95 = (statistics.median(r[i] for r in results[name]) for i in (0, 2))
    print(f"{name:10s} median {rate:5.1f} tok/s ({rate / rate1:.2f}x 1 client), p95 {p95 * 1e3:.1f} ms "
          f"({p95 / p95_1:.2f}x); answers the same as the allotment's: {texts[name] == texts['allotment']}")
cycles, last, drafts = defaultdict(list), None, []
for name, model, rows, start, end in passes:
    if model == "T":
        decoding = len(rows) == 4 and max(rows) <= 3
        if last is not None and decoding and last[0] == name:
            cycles[(name, rows)].append((end - last[1], drafts))
        last, drafts = ((name, end) if decoding else None), []
    elif last is not None:
        drafts.append(end - start)
for (name, rows), seen in sorted(cycles.items(), key=lambda kv: -len(kv[1]))[:8]:
    print(f"{name:10s} rows {rows}: {len(seen)} rounds, {statistics.median(c for c, _ in seen) * 1e3:.1f} ms from one "
          f"target pass's end to the next's, draft passes {statistics.mean(len(d) for _, d in seen):.2f} a round")
