# Would a draft sampled at another temperature be accepted more often at T = 1?
# alpha(tau) = mean over positions of sum_x min(p(x), q_tau(x)): the 1.5B's p at T = 1 against the 0.5B's (cut head)
# softmax(logits / tau), teacher-forced on the 1.5B's own sampled answers (64 tokens) to training prompts (never the
# held-out ones). Run from the repository root: .venv/bin/python docs/bench/draft-probes/draft_temperature.py 24
import sys, torch, time
from specdecode.load import load_target, load_draft, default_draft
from specdecode.distill.prompts import training_prompts
from specdecode.engine import Generation
from specdecode.sampling import SamplingConfig
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t)
draft_model = d.fallback.model
n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
taus = [0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25]
sums = {tau: 0.0 for tau in taus}; pos = 0
t0 = time.time()
for i, prompt in enumerate(training_prompts(n, seed=1)):
    ids = t.tokenizer.encode_chat([{"role": "user", "content": prompt}])
    t.model.clear(); d.clear()
    g = Generation(t.model, d, ids, max_new_tokens=64, gamma=3, sampling=SamplingConfig(temperature=1.0), seed=i,
                   stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
    g.run()
    full = torch.tensor(ids + list(g.new_tokens))
    t.model.rollback(0); draft_model.rollback(0)
    lp = t.model.extend(full)[len(ids) - 1:-1].double()
    lq = draft_model.extend(full)[len(ids) - 1:-1].double()
    V = lp.shape[-1]
    if lq.shape[-1] < V:
        lq = torch.cat([lq, torch.full((lq.shape[0], V - lq.shape[-1]), float("-inf"), dtype=lq.dtype)], -1)
    p = lp.softmax(-1)
    for tau in taus:
        q = (lq / tau).softmax(-1)
        sums[tau] += torch.minimum(p, q).sum(-1).sum().item()
    pos += p.shape[0]
    print(i, pos, " ".join(f"{tau}:{sums[tau]/pos:.4f}" for tau in taus), f"{time.time()-t0:.0f}s", flush=True)
