# library Generation vs the scheduler's lease path (1 client), same process, alternating; per-request figures
import sys, time, torch, threading, statistics, anyio
from concurrent.futures import ThreadPoolExecutor
from specdecode.load import load_target, load_draft, default_draft
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.adaptive import AdaptiveGamma
from specdecode.sampling import GREEDY
from specdecode.server.scheduler import Scheduler
torch.set_num_threads(2)
mode_thread = sys.argv[1] if len(sys.argv) > 1 else "same"
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t)
print("draft", d.name, flush=True)
prompts = bench_prompts("qwen2.5-coder-1.5b", 2)
sched = Scheduler(t.model, d, sequences=4)
lib_ctl = AdaptiveGamma.for_target(t.model)
pool = ThreadPoolExecutor(8)
def run_lib(ids):
    t.model.clear(); d.clear()
    g = Generation(t.model, d, ids, max_new_tokens=64, gamma=lib_ctl, sampling=GREEDY, seed=0,
                   stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
    t0 = time.perf_counter(); g.run(); return time.perf_counter() - t0, g
def run_srv(ids):
    lease = sched.lease()
    anyio.run(sched.acquire, lease, None, None)
    lease.target.clear(); lease.draft.clear()
    ctl = lease.allotted()
    g = Generation(lease.target, lease.draft, ids, max_new_tokens=64, gamma=ctl, sampling=GREEDY, seed=0,
                   stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
    steps = iter(g)
    def step():
        with sched.inside():
            return next(steps, None)
    t0 = time.perf_counter()
    i = 0
    while True:
        if mode_thread == "same":
            r = step()
        else:
            r = pool.submit(step).result()
        i += 1
        if r is None: break
    s = time.perf_counter() - t0
    sched.release(lease)
    return s, g
rat = []
for rep in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
  for i, p in enumerate(prompts):
    ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
    res = {}
    for m in (("lib", "srv") if i % 2 == 0 else ("srv", "lib")):
        s, g = (run_lib if m == "lib" else run_srv)(ids)
        st = g.stats
        res[m] = (s, len(g.new_tokens), st.target_calls, st.seconds, st.prefill_seconds, st.target_seconds, st.draft_seconds, g.text())
    (a, b) = res["lib"], res["srv"]
    rat.append((a[0]/a[1]) / (b[0]/b[1]))
    for name, c in (("lib", lib_ctl), ("srv", sched.learned)):
        print(f"   {name}: T1 {c.target_time(1)*1e3:.1f} T4 {c.target_time(4)*1e3:.1f} Td1 {c.draft_time(1)*1e3:.1f} Td2 {c.draft_time(2)*1e3:.1f} alpha {c.alpha:.2f} copied {c.copied_alpha:.2f} plain {c._plain_rounds}")
    print(f"{p.id:15s} lib {a[0]:.2f}s {a[1]}tok {a[1]/a[2]:.2f}/call pre {a[4]:.2f} tgt {a[5]:.2f} dr {a[6]:.2f} | srv {b[0]:.2f}s {b[1]}tok {b[1]/b[2]:.2f}/call pre {b[4]:.2f} tgt {b[5]:.2f} dr {b[6]:.2f} | lib/srv speed {rat[-1]:.3f} same {a[7]==b[7]}", flush=True)
print("median srv speed / lib speed:", statistics.median(rat))
