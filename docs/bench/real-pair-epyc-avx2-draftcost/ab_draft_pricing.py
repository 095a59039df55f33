"""A/B in one process: adaptive gamma with the draft's passes timed one by one (after, the code's own pricing) vs the
round's drafting time spread over its passes as one-token passes (before: `Before` drops `pass_times`, which leaves
the controller's older averaging), prompts alternating, one controller per variant kept across the prompts (as bench
and serve keep one). The figures in docs/real-pair.md ("What a draft pass costs adaptive gamma") came from

    OMP_NUM_THREADS=2 .venv/bin/python docs/bench/real-pair-epyc-avx2-draftcost/ab_draft_pricing.py      # greedy
    TEMP=1 OMP_NUM_THREADS=2 .venv/bin/python docs/bench/real-pair-epyc-avx2-draftcost/ab_draft_pricing.py

run from the repository root at commit e195f2c (PER=prompts per kind, 2 by default); this copy, tidied, runs on
66fc2a1 and later, where the engine hands over pass_times by keyword. d= is the controller's price of a one-token
draft pass after the prompt."""
import os
import statistics as st

import torch

from specdecode.adaptive import AdaptiveGamma
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.load import default_draft, load_draft, load_target
from specdecode.sampling import GREEDY, SamplingConfig

torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t)
prompts = bench_prompts("qwen2.5-coder-1.5b", int(os.environ.get("PER", "2")))


class Before(AdaptiveGamma):
    """The pricing before e5d06d8: the draft's pass timings dropped, so its drafting time is spread evenly."""

    def update(self, *args, pass_times=(), **kwargs):
        return super().update(*args, **kwargs)


ctl = {"after": AdaptiveGamma.for_target(t.model), "before": Before(10, prior_slope=t.model.verify_slope)}
sampling = SamplingConfig(temperature=float(os.environ.get("TEMP", "0"))) if os.environ.get("TEMP") else GREEDY
res = {k: [] for k in ctl}
for i, p in enumerate(prompts):
    order = ["after", "before"] if i % 2 == 0 else ["before", "after"]
    ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
    for name in order:
        t.model.clear()
        d.clear()
        g = Generation(t.model, d, ids, max_new_tokens=64, gamma=ctl[name], sampling=sampling, seed=None,
                       stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
        g.run()
        s = g.stats
        res[name].append((p.id, s.new_tokens, s.seconds, s.tokens_per_target_call, ctl[name].draft_time() * 1e3))
for a, b in zip(res["after"], res["before"], strict=True):
    rate_a, rate_b = a[1] / a[2], b[1] / b[2]
    print(f"{a[0]:16s} after {rate_a:5.2f} tok/s {a[3]:.2f}/call d={a[4]:.0f}ms   "
          f"before {rate_b:5.2f} tok/s {b[3]:.2f}/call d={b[4]:.0f}ms   ratio {rate_a / rate_b:.3f}")
ta = sum(x[1] for x in res["after"]) / sum(x[2] for x in res["after"])
tb = sum(x[1] for x in res["before"]) / sum(x[2] for x in res["before"])
print(f"total after {ta:.2f} before {tb:.2f} ratio {ta / tb:.3f}; median of per-prompt ratios",
      st.median((a[1] / a[2]) / (b[1] / b[2]) for a, b in zip(res["after"], res["before"], strict=True)))
