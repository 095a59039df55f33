# The prompt path's effect on a 4-client load of the real pair, in process through the Scheduler as the server runs it
# (minus HTTP; passes on threads.on_engine): the same 8 held-out prompts (2 per kind, greedy, 64 new tokens) with the
# prompt paths off and on, alternating, in one process (`prompt_layers` set aside for "off").
#   .venv/bin/python docs/bench/prompt-path/load4.py [ROUNDS]
import collections, statistics, sys, threading, time
import anyio, torch
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.load import add_prompt_paths, default_draft, load_draft, load_target
from specdecode.sampling import GREEDY
from specdecode.server import scheduler as S
from specdecode.server import threads as TH

torch.set_num_threads(2)
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 2


def loadall():
    t = load_target("qwen2.5-coder-1.5b")
    d = load_draft(default_draft(t), t)
    return t, d


t, d = TH.on_engine(loadall)
models = [t.model, d.fallback.model if hasattr(d, "fallback") else d.model]
print("prompt paths for", TH.on_engine(add_prompt_paths, t, d, True), flush=True)
twins = {id(m): m.prompt_layers for m in models}
prompts = bench_prompts("qwen2.5-coder-1.5b", 2)
log = []
orig = S.Scheduler._run_pass


def run_pass(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    desc = [(it.lease.id, it.tokens.numel(), it.prompt) for it in items]
    s = time.perf_counter()
    orig(self)
    log.append(("T" if model is self.target else "D", time.perf_counter() - s, desc))


S.Scheduler._run_pass = run_pass


def load(mode):
    for m in models:
        m.prompt_layers = twins[id(m)] if mode == "on" else None
    sched = S.Scheduler(t.model, d, sequences=4)
    reqs, outputs = [], {}
    log.clear()

    def client(ci):
        TH.serial()
        for p in prompts[ci::4]:
            ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
            start = time.perf_counter()
            lease = sched.lease()
            anyio.run(sched.acquire, lease, None, None)
            lease.target.clear(); lease.draft.clear()
            g = Generation(lease.target, lease.draft, ids, max_new_tokens=64, gamma=lease.allotted(),
                           sampling=GREEDY, seed=1234, stop_token_ids=t.tokenizer.stop_token_ids,
                           tokenizer=t.tokenizer)
            steps = iter(g); first = None; times = []
            while True:
                with sched.inside():
                    r = next(steps, None)
                if r is None:
                    break
                times.append(time.perf_counter())
                if first is None:
                    first = times[-1] - start
            sched.release(lease)
            n = len(g.new_tokens)
            outputs[p.id] = g.new_tokens
            reqs.append(dict(prompt=len(ids), ttft=first, per_token=(times[-1] - times[0]) / max(1, n - 1),
                             tokens=n, gaps=[b - a for a, b in zip(times, times[1:])]))

    th = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    w0 = time.perf_counter()
    for x in th: x.start()
    for x in th: x.join()
    wall = time.perf_counter() - w0
    tok = sum(r["tokens"] for r in reqs)
    tp = [x for x in log if x[0] == "T"]; dp = [x for x in log if x[0] == "D"]
    pre = [x for x in log if any(k > 4 for _, k, _ in x[2])]
    gaps = sorted(g for r in reqs for g in r["gaps"])
    print(f"{mode:3s}: {tok} tokens in {wall:.1f} s = {tok / wall:.2f} tok/s; ttft p50 "
          f"{statistics.median(r['ttft'] for r in reqs):.2f} s; per-token p50 "
          f"{statistics.median(r['per_token'] for r in reqs) * 1e3:.0f} ms; gap between rounds p95 "
          f"{gaps[int(0.95 * len(gaps))] * 1e3:.0f} ms; target passes {len(tp)} {sum(x[1] for x in tp):.1f} s, "
          f"draft passes {len(dp)} {sum(x[1] for x in dp):.1f} s, passes with a prefill's rows {len(pre)} "
          f"{sum(x[1] for x in pre):.1f} s", flush=True)
    return outputs


results = {}
for r in range(ROUNDS):
    for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
        out = load(mode)
        if mode in results and results[mode] != out:
            print(f"  {mode}: answers differ from the same mode's first load")
        results.setdefault(mode, out)
same = sum(results["on"][k] == results["off"][k] for k in results["off"])
print(f"greedy answers the same with and without the prompt path: {same} of {len(results['off'])}")
