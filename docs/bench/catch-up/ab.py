# The draft's catch-up (its prompt prefill) priced or not: the default draft (lookup + the 0.5B, gamma auto, one
# controller per variant kept across prompts, as the bench keeps one) with `AdaptiveGamma.catch_up_time` as it is
# and forced to 0 (the controller before pricing it), plain decoding beside them, alternating prompt by prompt with
# the order rotated; the 12 held-out bench prompts x N tokens, greedy and T = 1 (seed per prompt), prefill counted.
# Also prints how the controller priced each catch-up against what it cost. From the repository root:
#   .venv/bin/python docs/bench/catch-up/ab.py [new tokens] [reps]
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
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 1


class Unpriced(AdaptiveGamma):
    def catch_up_time(self, behind: int) -> float:
        return 0.0


t = load_target("qwen2.5-coder-1.5b")
hybrid = load_draft(default_draft(t), t)
variants = ["plain", "unpriced", "priced"]
prompts = [t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
           for p in bench_prompts("qwen2.5-coder-1.5b", 2)]
for sampling in (GREEDY, SamplingConfig(temperature=1.0)):
    controllers = {"unpriced": Unpriced.for_target(t.model), "priced": AdaptiveGamma.for_target(t.model)}
    totals = {v: [0.0, 0, 0.0, 0, []] for v in variants}  # seconds, tokens, prefill seconds, drafted, outputs
    per_prompt = {v: [] for v in variants}
    for rep in range(reps):
        for i, ids in enumerate(prompts):
            k = (i + rep) % len(variants)
            for v in variants[k:] + variants[:k]:
                t.model.clear()
                hybrid.clear()
                control = controllers.get(v)
                priced = control.catch_up_time(len(ids)) if control is not None else 0.0
                g = Generation(t.model, None if v == "plain" else hybrid, ids, max_new_tokens=new,
                               gamma="auto" if v == "plain" else control, sampling=sampling,
                               seed=None if sampling.greedy else 1000 + i,
                               stop_token_ids=t.tokenizer.stop_token_ids)
                g.run()
                s = g.stats
                row = totals[v]
                row[0] += s.seconds
                row[1] += s.new_tokens
                row[2] += s.prefill_seconds
                row[3] += s.tokens_drafted
                row[4].append(list(g.new_tokens))
                per_prompt[v].append(s.new_tokens / s.seconds)
                if v == "priced" and rep == 0:
                    print(f"    prompt {i}: {len(ids)} tokens, catch-up priced {priced * 1e3:.0f} ms before it ran, "
                          f"drafted {s.tokens_drafted}, {s.new_tokens} tokens", flush=True)
    print(sampling.describe())
    for v in variants:
        sec, tok, prefill, drafted, outs = totals[v]
        same = sum(a == b for a, b in zip(outs, totals["plain"][4], strict=True))
        ratio = statistics.median(a / b for a, b in zip(per_prompt[v], per_prompt["plain"], strict=True))
        print(f"  {v:>8}: {tok / sec:6.2f} tok/s ({tok / sec / (totals['plain'][1] / totals['plain'][0]):.3f}x "
              f"plain, median over prompts {ratio:.3f}x), prefill {prefill:.2f} s of {sec:.2f}, drafted {drafted}"
              + (f", greedy same as plain {same}/{len(outs)}" if sampling.greedy else ""), flush=True)
