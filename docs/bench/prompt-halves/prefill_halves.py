# A prompt row's cost with the MLP's down projection reading its inputs in two int8 halves (as every row does now)
# or in one, alternating, on the held-out prompts; and how far apart the next-token distributions end up.
#   .venv/bin/python docs/bench/prompt-halves/prefill_halves.py [target | draft] [reps]
# (draft: the 1.5B's default draft model, the 0.5B as a draft reads it, timed alike, plus one-token steps)
import statistics
import sys
import time

import torch

from specdecode.bench.clients import bench_prompts
from specdecode.load import load_target

torch.set_num_threads(2)
name = sys.argv[1] if len(sys.argv) > 1 else "qwen2.5-coder-1.5b"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
t = load_target("qwen2.5-coder-1.5b" if name == "draft" else name)
m = t.model
if name == "draft":
    from specdecode.load import default_draft, load_draft
    m = load_draft(default_draft(t), t).fallback.model
downs = [layer.down for layer in m.layers]


def set_halves(h):
    for layer in m.layers:
        for part in layer.down.parts:
            part.halves = h
        layer.__dict__.pop("_kernel", None)  # (a cached_property: rebuilt with the new halves)


prompts = [t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
           for p in bench_prompts("qwen2.5-coder-1.5b" if name == "draft" else name, 2)]
times, steps = {1: [], 2: []}, {1: [], 2: []}
kl, top1 = [], []
for rep in range(reps):
    for ids in prompts:
        logp = {}
        for h in (2, 1) if rep % 2 else (1, 2):
            set_halves(h)
            m.clear()
            a = time.perf_counter()
            logits = m.extend(torch.tensor(ids), keep=1)
            times[h].append((time.perf_counter() - a) / len(ids))
            logp[h] = torch.log_softmax(logits[-1].double(), -1)
            token, b = int(logits[-1].argmax()), time.perf_counter()
            for _ in range(8):
                token = int(m.extend(torch.tensor([token]), keep=1)[-1].argmax())
            steps[h].append((time.perf_counter() - b) / 8)
        if rep == 0:
            kl.append(float((logp[2].exp() * (logp[2] - logp[1])).sum()))
            top1.append(int(logp[2].argmax() == logp[1].argmax()))
set_halves(2)
print(f"{name}: {len(prompts)} prompts ({min(map(len, prompts))}-{max(map(len, prompts))} rows), {reps} reps")
for h in (2, 1):
    print(f"  down in {h} half(s): {1e3 * statistics.median(times[h]):.2f} ms a prompt row (median; "
          f"mean {1e3 * statistics.mean(times[h]):.2f}); a one-token step {1e3 * statistics.median(steps[h]):.2f} ms")
print(f"  ratio (medians) {statistics.median(times[2]) / statistics.median(times[1]):.3f}x; last row's KL(two || one) "
      f"mean {statistics.mean(kl):.2e} max {max(kl):.2e}; top-1 same {sum(top1)}/{len(top1)}")
