# Whole 64-token generations over the 12 bench prompts (greedy), plain and speculative (the default lookup+0.5B,
# gamma auto), the layers in one call (`KernelStack`) against one Python call per layer, alternating prompt by
# prompt in one process. From the repository root: .venv/bin/python docs/bench/layer-stack/stack_gen.py
import time, torch, statistics
from specdecode.load import load_target, load_draft, default_draft
from specdecode.engine import generate_plain, Generation
from specdecode.sampling import GREEDY
from specdecode.adaptive import AdaptiveGamma
from specdecode.bench.clients import bench_prompts
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b"); m = t.model
dr = load_draft(default_draft(t), t)
dm = dr.fallback.model
stacks = (m._stack, dm._stack)
ps = bench_prompts("qwen2.5-coder-1.5b", 2)
res = {("plain", "stack"): [], ("plain", "layers"): [], ("spec", "stack"): [], ("spec", "layers"): []}
sched = {mode: AdaptiveGamma.for_target(m) for mode in ("stack", "layers")}
for i, p in enumerate(ps):
    ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
    for mode in (("stack", "layers") if i % 2 == 0 else ("layers", "stack")):
        m.__dict__["_stack"], dm.__dict__["_stack"] = stacks if mode == "stack" else (None, None)
        m.clear(); a = time.perf_counter(); r = generate_plain(m, ids, max_new_tokens=64, sampling=GREEDY); s = time.perf_counter() - a
        res[("plain", mode)].append(len(r.new_tokens) / s)
        m.clear(); dr.clear()
        g = Generation(m, dr, ids, max_new_tokens=64, gamma=sched[mode], sampling=GREEDY)
        a = time.perf_counter(); g.run(); s = time.perf_counter() - a
        res[("spec", mode)].append(len(g.new_tokens) / s)
for kind in ("plain", "spec"):
    st, ly = res[(kind, "stack")], res[(kind, "layers")]
    print(kind, f"stack {sum(st)/len(st):.2f} tok/s, layers {sum(ly)/len(ly):.2f}; per-prompt ratio median {statistics.median([a/b for a, b in zip(st, ly)]):.3f}", flush=True)
