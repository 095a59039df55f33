# One request at a time: the library (Generation on the models, one AdaptiveGamma kept across requests) against the
# same request through the Scheduler as the server runs it (a lease, its Allotted controller, passes on
# threads.on_engine), minus HTTP, alternating prompt by prompt (the order swapped every other prompt).
#   .venv/bin/python docs/bench/allot/alone.py [ROUNDS]
import statistics, sys, time
import anyio, torch
from specdecode.adaptive import AdaptiveGamma
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.load import add_prompt_paths, default_draft, load_draft, load_target
from specdecode.sampling import GREEDY
from specdecode.server import scheduler as S
from specdecode.server import threads as TH

torch.set_num_threads(2)
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 1


def loadall():
    t = load_target("qwen2.5-coder-1.5b")
    d = load_draft(default_draft(t), t)
    add_prompt_paths(t, d, True)
    return t, d


t, d = TH.on_engine(loadall)
prompts = bench_prompts("qwen2.5-coder-1.5b", 2)
schedule = AdaptiveGamma.for_target(t.model)
sched = S.Scheduler(t.model, d, sequences=8)
TH.serial()
stats = {"library": [0, 0.0, 0, 0], "scheduled": [0, 0.0, 0, 0]}  # tokens, seconds, target calls, drafted


def library(ids):
    t.model.clear(); d.clear()
    g = Generation(t.model, d, ids, max_new_tokens=64, gamma=schedule, sampling=GREEDY, seed=1234,
                   stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
    for _ in g:
        pass
    return g


def scheduled(ids):
    lease = sched.lease()
    anyio.run(sched.acquire, lease, None, None)
    lease.target.clear(); lease.draft.clear()
    g = Generation(lease.target, lease.draft, ids, max_new_tokens=64, gamma=lease.allotted(), sampling=GREEDY,
                   seed=1234, stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
    steps = iter(g)
    while True:
        with sched.inside():
            if next(steps, None) is None:
                break
    sched.release(lease)
    return g


for r in range(ROUNDS):
    for i, p in enumerate(prompts):
        ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
        outs = {}
        for name in ("library", "scheduled") if (i + r) % 2 == 0 else ("scheduled", "library"):
            s = time.perf_counter()
            g = library(ids) if name == "library" else scheduled(ids)
            sec = time.perf_counter() - s
            st = stats[name]
            st[0] += len(g.new_tokens); st[1] += sec; st[2] += g.stats.target_calls; st[3] += g.stats.tokens_drafted
            outs[name] = g.new_tokens
        if outs["library"] != outs["scheduled"]:
            print("differs:", p.id)
for name, (tok, sec, calls, drafted) in stats.items():
    print(f"{name:9s}: {tok} tokens in {sec:.1f} s = {tok / sec:.2f} tok/s, {tok / calls:.2f} tokens a target call, "
          f"{drafted / calls:.2f} drafted a call")
print(f"scheduled / library: {stats['scheduled'][0] / stats['scheduled'][1] / (stats['library'][0] / stats['library'][1]):.3f}x")
