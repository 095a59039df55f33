# 4 client threads through the Scheduler in process (as the server runs them, minus HTTP): per-request TTFT and
# per-token, and every pass (model, rows per lease, ms)
import os, sys, tempfile, time, torch, threading, statistics, anyio, collections
from specdecode.load import load_target, load_draft, default_draft
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.sampling import GREEDY
from specdecode.server import scheduler as S
torch.set_num_threads(2)
if len(sys.argv) > 1: S.PREFILL_CHUNK = int(sys.argv[1])
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t)
prompts = bench_prompts("qwen2.5-coder-1.5b", 2)
sched = S.Scheduler(t.model, d, sequences=4)
log = []
orig = S.Scheduler._run_pass
T0 = time.perf_counter()
def run_pass(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    desc = [(it.lease.id, it.tokens.numel()) for it in items]
    who = "T" if model is self.target else "D"
    s = time.perf_counter()
    orig(self)
    log.append((who, s - T0, time.perf_counter() - s, desc))
S.Scheduler._run_pass = run_pass
reqs = []
def client(ci):
    for p in prompts[ci::4]:
        ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
        start = time.perf_counter()
        lease = sched.lease()
        anyio.run(sched.acquire, lease, None, None)
        lease.target.clear(); lease.draft.clear()
        g = Generation(lease.target, lease.draft, ids, max_new_tokens=64, gamma=lease.allotted(), sampling=GREEDY,
                       seed=1234, stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
        steps = iter(g); first = None; times = []
        while True:
            with sched.inside():
                r = next(steps, None)
            if r is None: break
            now = time.perf_counter()
            times.append(now)
            if first is None: first = now - start
        sched.release(lease)
        n = len(g.new_tokens)
        reqs.append(dict(id=p.id, lease=lease.id, client=ci, prompt=len(ids), start=start - T0, ttft=first,
                         per_token=(times[-1] - times[0]) / max(1, n - 1), tokens=n, end=times[-1] - T0))
th = [threading.Thread(target=client, args=(i,)) for i in range(4)]
w0 = time.perf_counter()
for x in th: x.start()
for x in th: x.join()
wall = time.perf_counter() - w0
tok = sum(r["tokens"] for r in reqs)
print(f"chunk {S.PREFILL_CHUNK}: {tok} tokens in {wall:.1f}s = {tok/wall:.2f} tok/s")
for r in sorted(reqs, key=lambda r: r["start"]):
    print(f"  {r['id']:14s} lease {r['lease']:2d} client {r['client']} prompt {r['prompt']:3d} start {r['start']:6.2f} ttft {r['ttft']:.2f} per-token {r['per_token']*1e3:.0f} ms end {r['end']:.2f}")
tt = [r["ttft"] for r in reqs]; pt = [r["per_token"] for r in reqs]
print("ttft p50 %.2f  per-token p50 %.0f ms max %.0f ms" % (statistics.median(tt), statistics.median(pt)*1e3, max(pt)*1e3))
tp = [x for x in log if x[0] == "T"]; dp = [x for x in log if x[0] == "D"]
print(f"target passes {len(tp)} {sum(x[2] for x in tp):.1f}s, draft passes {len(dp)} {sum(x[2] for x in dp):.1f}s; idle {wall - sum(x[2] for x in log):.1f}s")
rows = collections.Counter(sum(n for _, n in x[3]) for x in tp)
print("target rows histogram", sorted(rows.items()))
with open(os.path.join(tempfile.gettempdir(), "load4_passes.txt"), "w") as f:  # every pass, for a look by eye
    for x in log: f.write(f"{x[0]} {x[1]:.3f} {x[2]*1e3:.0f} {x[3]}\n")
