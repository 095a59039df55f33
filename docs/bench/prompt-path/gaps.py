# Where a 4-client load of the real pair spends its wall time (in process, the Scheduler as the server runs it, prompt
# paths on): time in passes against time between them, the shapes of the target passes, and how soon after a target
# pass the requests submit their next rows (their rounds own work: the rule, streaming).
#   .venv/bin/python docs/bench/prompt-path/gaps.py
import statistics, sys, threading, time, collections
import anyio, torch
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.load import add_prompt_paths, default_draft, load_draft, load_target
from specdecode.sampling import GREEDY
from specdecode.server import scheduler as S
from specdecode.server import threads as TH
torch.set_num_threads(2)
t = TH.on_engine(load_target, "qwen2.5-coder-1.5b")
d = TH.on_engine(load_draft, default_draft(t), t)
TH.on_engine(add_prompt_paths, t, d, True)
prompts = bench_prompts("qwen2.5-coder-1.5b", 2)
ev = []
orig_run, orig_submit = S.Scheduler._run_pass, S.Scheduler.submit
def run_pass(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    rows = [it.tokens.numel() for it in items]
    s = time.perf_counter(); orig_run(self); e = time.perf_counter()
    ev.append(("T" if model is self.target else "D", s, e, rows))
def submit(self, model, sequence, tokens, keep, lease, prompt=0):
    ev.append(("S", time.perf_counter(), lease.id, model is self.target))
    return orig_submit(self, model, sequence, tokens, keep, lease, prompt)
S.Scheduler._run_pass = run_pass; S.Scheduler.submit = submit
sched = S.Scheduler(t.model, d, sequences=4)
def client(ci):
    TH.serial()
    for p in prompts[ci::4]:
        ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
        lease = sched.lease(); anyio.run(sched.acquire, lease, None, None)
        lease.target.clear(); lease.draft.clear()
        g = Generation(lease.target, lease.draft, ids, max_new_tokens=64, gamma=lease.allotted(), sampling=GREEDY,
                       seed=1234, stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
        steps = iter(g)
        while True:
            with sched.inside():
                if next(steps, None) is None: break
        sched.release(lease)
th = [threading.Thread(target=client, args=(i,)) for i in range(4)]
w0 = time.perf_counter()
for x in th: x.start()
for x in th: x.join()
wall = time.perf_counter() - w0
passes = [e for e in ev if e[0] in "TD"]
passes.sort(key=lambda e: e[1])
busy = sum(e[2] - e[1] for e in passes)
gaps = [b[1] - a[2] for a, b in zip(passes, passes[1:])]
print(f"wall {wall:.1f} s, in passes {busy:.1f} s, between passes {sum(gaps):.1f} s over {len(gaps)} gaps; gap p50 {statistics.median(gaps)*1e3:.1f} ms p90 {sorted(gaps)[int(.9*len(gaps))]*1e3:.1f} ms")
# decode target passes of exactly 4 rows of 1: timing
four = [e[2] - e[1] for e in passes if e[0] == "T" and e[3] == [1, 1, 1, 1]]
if four: print(f"4 x 1-row target passes: {len(four)}, median {statistics.median(four)*1e3:.1f} ms")
rows = collections.Counter(tuple(sorted(e[3])) for e in passes if e[0] == "T")
print("target pass shapes:", rows.most_common(8))
# after a target pass ends: how long until the next submit of each lease (its round's own work)
subs = [e for e in ev if e[0] == "S"]
lat = []
for p in passes:
    if p[0] != "T": continue
    nxt = [s[1] - p[2] for s in subs if s[1] > p[2]][:4]
    if nxt: lat.append(nxt)
firsts = [l[0] for l in lat]; lasts = [l[-1] for l in lat]
print(f"after a target pass: first next submit p50 {statistics.median(firsts)*1e3:.1f} ms, 4th p50 {statistics.median(lasts)*1e3:.1f} ms")
