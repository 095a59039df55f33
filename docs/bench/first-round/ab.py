# A fresh controller per answer, as `specdecode generate` makes one: the draft's passes priced with the "lower" guess
# (136daaa) against the flat one before it, plain decoding beside them, alternating prompt by prompt with the order
# rotated; the 12 held-out bench prompts x N tokens, greedy and T = 1 (seed per prompt), prefill counted. Prints,
# for each variant, tok/s, the median over prompts against plain, and the answers that drafted in at most one round
# (the lock: a first round timing only the draft's catch-up, then plain to the end). From the repository root:
#   .venv/bin/python docs/bench/first-round/ab.py [new tokens] [reps]
import statistics
import sys

import torch

from specdecode.adaptive import AdaptiveGamma, PassTimes
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.load import default_draft, load_draft, load_target
from specdecode.sampling import GREEDY, SamplingConfig

torch.set_num_threads(2)
new = int(sys.argv[1]) if len(sys.argv) > 1 else 64
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 1


class Flat(AdaptiveGamma):
    """The controller before 136daaa: the draft's passes on the flat guess."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._draft_times = PassTimes(self.memory)


t = load_target("qwen2.5-coder-1.5b")
hybrid = load_draft(default_draft(t), t)
variants = ["plain", "flat", "lower"]
prompts = [t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
           for p in bench_prompts("qwen2.5-coder-1.5b", 2)]
for sampling in (GREEDY, SamplingConfig(temperature=1.0)):
    totals = {v: [0.0, 0, 0, []] for v in variants}  # seconds, tokens, answers drafting in <= 1 round, outputs
    per_prompt = {v: [] for v in variants}
    for rep in range(reps):
        for i, ids in enumerate(prompts):
            k = (i + rep) % len(variants)
            for v in variants[k:] + variants[:k]:
                t.model.clear()
                hybrid.clear()
                control = {"flat": Flat, "lower": AdaptiveGamma}.get(v)
                g = Generation(t.model, None if v == "plain" else hybrid, ids, max_new_tokens=new,
                               gamma="auto" if v == "plain" else control.for_target(t.model), sampling=sampling,
                               seed=None if sampling.greedy else 1000 + i,
                               stop_token_ids=t.tokenizer.stop_token_ids)
                g.run()
                s = g.stats
                row = totals[v]
                row[0] += s.seconds
                row[1] += s.new_tokens
                passes = [p for p in (s.passes_per_round or []) if p]
                row[2] += v != "plain" and s.new_tokens >= 32 and len(passes) <= 1
                row[3].append(list(g.new_tokens))
                per_prompt[v].append(s.new_tokens / s.seconds)
    print(sampling.describe())
    for v in variants:
        sec, tok, locked, outs = totals[v]
        same = sum(a == b for a, b in zip(outs, totals["plain"][3], strict=True))
        ratio = statistics.median(a / b for a, b in zip(per_prompt[v], per_prompt["plain"], strict=True))
        print(f"  {v:>6}: {tok / sec:6.2f} tok/s ({tok / sec / (totals['plain'][1] / totals['plain'][0]):.3f}x "
              f"plain, median over prompts {ratio:.3f}x), answers of 32+ tokens with at most one drafting round: "
              f"{locked} of {len(outs)}" + (f", greedy same as plain {same}/{len(outs)}" if sampling.greedy else ""),
              flush=True)
