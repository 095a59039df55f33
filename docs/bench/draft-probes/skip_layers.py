# Would the 0.5B with some of its 24 layers skipped be a cheaper draft worth its acceptance? Greedy agreement
# (share of positions where its argmax is the 1.5B's token), teacher-forced on the 1.5B's greedy answers (48 tokens)
# to 16 training prompts, and the median of 30 one-token passes. Run from the repository root:
# .venv/bin/python docs/bench/draft-probes/skip_layers.py
import sys, torch, time
from specdecode.load import load_target, load_draft, default_draft
from specdecode.distill.prompts import training_prompts
from specdecode.engine import Generation
from specdecode.sampling import GREEDY
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t)
dm = d.fallback.model
all_layers = list(dm.layers)
sets = {"none": [], "20-21": [20, 21], "18-21": [18, 19, 20, 21], "12-15": [12, 13, 14, 15], "odd 9-19": [9, 11, 13, 15, 17, 19], "16-21": list(range(16, 22))}
texts = []
for i, prompt in enumerate(training_prompts(16, seed=2)):
    ids = t.tokenizer.encode_chat([{"role": "user", "content": prompt}])
    t.model.clear(); d.clear()
    g = Generation(t.model, d, ids, max_new_tokens=48, gamma=3, sampling=GREEDY, seed=0, stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
    g.run(); texts.append((ids, list(g.new_tokens)))
for name, skip in sets.items():
    dm.layers = [l for i, l in enumerate(all_layers) if i not in skip]
    agree = n = 0
    for ids, new in texts:
        full = torch.tensor(ids + new)
        dm.rollback(0)
        lq = dm.extend(full)[len(ids) - 1:-1]
        agree += (lq.argmax(-1) == torch.tensor(new)).sum().item(); n += len(new)
    dm.rollback(0); dm.extend(torch.tensor(texts[0][0]))
    ts = []
    for j in range(30):
        s = time.perf_counter(); dm.extend(torch.tensor([100 + j])); ts.append(time.perf_counter() - s)
    ts.sort()
    print(f"\n{name:10s} agreement {agree/n:.3f} ({agree}/{n})  draft ms {ts[15]*1e3:.1f}", flush=True)
