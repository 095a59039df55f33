# Does the draft need the whole prompt? The 0.5B (behind prompt lookup, which keeps the whole context) fed only the
# prompt's last K tokens (`ModelDraft.start`, as its window overflow does) against the whole prompt: alpha, tokens per
# target call and time, greedy, the 12 held-out bench prompts, variants alternating prompt by prompt (order rotated),
# one AdaptiveGamma per variant kept across prompts (as the bench). From the repository root:
#   .venv/bin/python docs/bench/draft-probes/draft_view.py [K,K,...]   (0: the whole prompt)
import statistics, sys, time
import torch
from specdecode.adaptive import AdaptiveGamma
from specdecode.bench.clients import bench_prompts
from specdecode.drafts.model import ModelDraft
from specdecode.engine import Generation
from specdecode.load import default_draft, load_draft, load_target
from specdecode.sampling import GREEDY

torch.set_num_threads(2)
views = [int(k) for k in (sys.argv[1] if len(sys.argv) > 1 else "0,32,16").split(",")]
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t)
whole = ModelDraft.begin
view = {"k": 0}


def begin(self, prompt_ids):
    whole(self, prompt_ids)
    if view["k"] and len(prompt_ids) > view["k"]:
        self._restart(len(prompt_ids) - view["k"])


ModelDraft.begin = begin
controllers = {k: AdaptiveGamma.for_target(t.model) for k in views}
totals = {k: [0.0, 0, 0, 0, 0.0, []] for k in views}  # seconds, tokens, accepted, rejections, prefill, outputs
for i, p in enumerate(bench_prompts("qwen2.5-coder-1.5b", 2)):
    ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
    for k in views[i % len(views):] + views[: i % len(views)]:
        view["k"] = k
        t.model.clear(); d.clear()
        g = Generation(t.model, d, ids, max_new_tokens=64, gamma=controllers[k], sampling=GREEDY,
                       stop_token_ids=t.tokenizer.stop_token_ids)
        g.run()
        s = g.stats
        tot = totals[k]
        tot[0] += s.seconds; tot[1] += s.new_tokens; tot[2] += s.tokens_accepted; tot[3] += s.rejections
        tot[4] += s.prefill_seconds; tot[5].append(list(g.new_tokens))
    print(p.id, flush=True)
base = totals[views[0]]
for k in views:
    sec, tok, acc, rej, pre, outs = totals[k]
    same = sum(a == b for a, b in zip(outs, base[5]))
    print(f"view {k or 'whole'}: {tok / sec:.2f} tok/s ({tok} tokens, {sec:.2f} s, prefill {pre:.2f} s), "
          f"alpha {acc / max(1, acc + rej):.3f}, output equal to the first variant's on {same}/{len(outs)}")
