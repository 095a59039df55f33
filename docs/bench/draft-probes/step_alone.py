# A one-token step of the 0.5B draft (as it drafts: 4-bit, its head cut) and of the 1.5B target, each alone after a
# chat prompt: median ms over 60 steps. From the repository root: .venv/bin/python docs/bench/draft-probes/step_alone.py
import statistics
import time

import torch
from specdecode.load import default_draft, load_draft, load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
m = load_draft(default_draft(t), t).fallback.model
ids = t.tokenizer.encode_chat([{"role": "user", "content": "Write a Python function that merges two sorted lists."}])
for model, name in ((m, "draft 0.5B"), (t.model, "target 1.5B")):
    model.clear(); model.prefill(torch.tensor(ids), keep=1)
    whole = []; token = 100
    for _ in range(60):
        a = time.perf_counter(); logits = model.extend(torch.tensor([token]), keep=1); whole.append(time.perf_counter() - a)
        token = int(logits[-1].argmax())
    print(name, f"{1e3*statistics.median(whole):.2f} ms/step (min {1e3*min(whole):.2f})", type(model).__name__, model.weight_bytes/1e6, "MB")
