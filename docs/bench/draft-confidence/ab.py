# The named 0.5B draft (behind prompt lookup: the default) with confidence thresholds, alternating prompt by prompt
# (order rotated), one AdaptiveGamma per variant kept across prompts (as the bench), greedy and T = 1 (seed per
# prompt), the 12 held-out bench prompts x 64 tokens, plain decoding beside them. From the repository root:
#   .venv/bin/python docs/bench/draft-confidence/ab.py [thresholds, e.g. 0,0.8] [reps]
import statistics
import sys

import torch

from specdecode.adaptive import AdaptiveGamma
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.load import default_draft, load_draft, load_target
from specdecode.sampling import GREEDY, SamplingConfig

torch.set_num_threads(2)
thresholds = [float(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "0,0.8").split(",")]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 1
t = load_target("qwen2.5-coder-1.5b")
hybrid = load_draft(default_draft(t), t)
model_draft = hybrid.fallback
variants = ["plain", *thresholds]
prompts = [t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
           for p in bench_prompts("qwen2.5-coder-1.5b", 2)]
for sampling in (GREEDY, SamplingConfig(temperature=1.0)):
    controllers = {v: AdaptiveGamma.for_target(t.model) for v in thresholds}
    totals = {v: [0.0, 0, 0, 0, 0, []] for v in variants}  # seconds, tokens, calls, drafted, accepted, outputs
    per_prompt = {v: [] for v in variants}
    for rep in range(reps):
        for i, ids in enumerate(prompts):
            k = (i + rep) % len(variants)
            for v in variants[k:] + variants[:k]:
                t.model.clear()
                hybrid.clear()
                if v != "plain":
                    model_draft.confidence = v
                g = Generation(t.model, None if v == "plain" else hybrid, ids, max_new_tokens=64,
                               gamma="auto" if v == "plain" else controllers[v], sampling=sampling, seed=None
                               if sampling.greedy else 1000 + i, stop_token_ids=t.tokenizer.stop_token_ids)
                g.run()
                s = g.stats
                row = totals[v]
                row[0] += s.seconds
                row[1] += s.new_tokens
                row[2] += s.target_calls
                row[3] += s.tokens_drafted
                row[4] += s.tokens_accepted
                row[5].append(list(g.new_tokens))
                per_prompt[v].append(s.new_tokens / s.seconds)
    print(sampling.describe())
    for v in variants:
        sec, tok, calls, drafted, acc, outs = totals[v]
        same = sum(a == b for a, b in zip(outs, totals["plain"][5], strict=True))
        ratio = statistics.median(a / b for a, b in zip(per_prompt[v], per_prompt["plain"], strict=True))
        print(f"  {v!s:>5}: {tok / sec:6.2f} tok/s ({tok / sec / (totals['plain'][1] / totals['plain'][0]):.3f}x "
              f"plain, median over prompts {ratio:.3f}x), {tok / calls:.2f} tokens/call, drafted {drafted}, "
              f"accepted {acc / max(drafted, 1):.3f}" + (f", greedy same as plain {same}/{len(outs)}"
                                                         if sampling.greedy else ""), flush=True)
        if v != "plain":
            c = controllers[v]
            print(f"         controller: alpha {c.alpha:.3f}, stop rate {c.stop_rate:.3f}")
