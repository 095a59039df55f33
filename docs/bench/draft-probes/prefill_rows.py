# Prefill of 16 / 32 / 64 / 128 random prompt rows on the 1.5B target and the 0.5B draft (as it drafts), from an
# empty cache: the best of 3, ms and ms a row. From the repository root: .venv/bin/python docs/bench/draft-probes/prefill_rows.py
import time

import torch
from specdecode.load import default_draft, load_draft, load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t).fallback.model
for model, name in ((t.model, "1.5B"), (d, "0.5B draft")):
    for n in (16, 32, 64, 128):
        ids = torch.randint(100, 20000, (n,))
        ts = []
        for _ in range(3):
            model.clear(); a = time.perf_counter(); model.prefill(ids, keep=1); ts.append(time.perf_counter() - a)
        print(f"{name} prefill {n} rows: {1e3*min(ts):.1f} ms, {1e3*min(ts)/n:.2f} ms/row", flush=True)
