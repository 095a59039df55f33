# Decoding with the 1.5B's down projections read in two int8 halves (16 bits) against one (8 bits), plain and with
# the default draft (lookup + the 0.5B, gamma auto, one controller per variant kept across prompts), alternating
# prompt by prompt with the order rotated; the 12 held-out bench prompts x N tokens, greedy and T = 1 (seed per
# prompt), prefill counted (its rows read one half in both). From the repository root, nothing else running:
#   .venv/bin/python docs/bench/one-half/ab.py [new tokens]
import statistics
import sys

import torch

from specdecode.adaptive import AdaptiveGamma
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.load import default_draft, load_draft, load_target
from specdecode.sampling import GREEDY, SamplingConfig

torch.set_num_threads(2)
new = int(sys.argv[1]) if len(sys.argv) > 1 else 64
t = load_target("qwen2.5-coder-1.5b")
hybrid = load_draft(default_draft(t), t)
one = [layer._kernel for layer in t.model.layers]  # (the default since commit 718e933; before it, two)
kernels = {"one": one, "two": [k[:4] + ([1, 1, 1, 2],) + k[5:] for k in one]}  # halves of qkv, o, gate_up, down
variants = ["plain two", "plain one", "spec two", "spec one"]
prompts = [t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
           for p in bench_prompts("qwen2.5-coder-1.5b", 2)]
for sampling in (GREEDY, SamplingConfig(temperature=1.0)):
    controllers = {v: AdaptiveGamma.for_target(t.model) for v in variants if v.startswith("spec")}
    totals = {v: [0.0, 0, []] for v in variants}  # seconds, tokens, outputs
    per_prompt = {v: [] for v in variants}
    for i, ids in enumerate(prompts):
        k = i % len(variants)
        for v in variants[k:] + variants[:k]:
            for layer, kernel in zip(t.model.layers, kernels[v.split()[1]], strict=True):
                layer.__dict__["_kernel"] = kernel
            t.model.clear()
            hybrid.clear()
            g = Generation(t.model, hybrid if v.startswith("spec") else None, ids, max_new_tokens=new,
                           gamma=controllers.get(v, "auto"), sampling=sampling,
                           seed=None if sampling.greedy else 1000 + i, stop_token_ids=t.tokenizer.stop_token_ids)
            g.run()
            totals[v][0] += g.stats.seconds
            totals[v][1] += g.stats.new_tokens
            totals[v][2].append(list(g.new_tokens))
            per_prompt[v].append(g.stats.new_tokens / g.stats.seconds)
    print(sampling.describe())
    for v in variants:
        sec, tok, outs = totals[v]
        base = "plain " + v.split()[1]
        same = sum(a == b for a, b in zip(outs, totals[base][2], strict=True))
        ratio = statistics.median(a / b for a, b in zip(per_prompt[v], per_prompt["plain two"], strict=True))
        print(f"  {v:>9}: {tok / sec:6.2f} tok/s, {tok / sec / (totals['plain two'][1] / totals['plain two'][0]):.3f}x"
              f" plain two (median over prompts {ratio:.3f}x)"
              + (f", greedy same as {base} {same}/{len(outs)}" if sampling.greedy else ""), flush=True)
