# the draft's view of the prompt cut to its last W tokens: tokens/call at fixed gamma, draft catch-up seconds, total
import sys, time, torch, statistics
from specdecode.load import load_target, load_draft, default_draft
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.sampling import GREEDY
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t)
md = d.fallback
orig_begin = type(md).begin
W = None
def begin(self, prompt_ids):
    orig_begin(self, prompt_ids)
    if W is not None and len(prompt_ids) > W:
        self._restart(len(prompt_ids) - W)
type(md).begin = begin
windows = [None] + [int(w) for w in sys.argv[1].split(",")]
gamma = int(sys.argv[2]) if len(sys.argv) > 2 else 3
prompts = bench_prompts("qwen2.5-coder-1.5b", 2)
agg = {w: [0, 0, 0.0, 0.0, 0.0] for w in windows}
for i, p in enumerate(prompts):
    ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
    line = f"{p.id:14s} {len(ids):4d}"
    order = windows if i % 2 == 0 else windows[::-1]
    for w in order:
        W = w
        t.model.clear(); d.clear()
        g = Generation(t.model, d, ids, max_new_tokens=64, gamma=gamma, sampling=GREEDY, seed=0,
                       stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
        t0 = time.perf_counter(); g.run(); s = time.perf_counter() - t0
        st = g.stats
        a = agg[w]; a[0] += len(g.new_tokens); a[1] += st.target_calls; a[2] += s; a[3] += st.draft_seconds
    for w in windows:
        pass
    print(line, " ".join(f"W{w}: {agg[w][0]}/{agg[w][1]} {agg[w][2]:.1f}s dr {agg[w][3]:.1f}" for w in windows), flush=True)
for w in windows:
    a = agg[w]; print(w, "tokens/call", round(a[0]/a[1], 3), "tok/s", round(a[0]/a[2], 3), "draft s", round(a[3], 2))
