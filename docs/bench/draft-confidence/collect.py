# Per drafted position along the target's own answers: the draft's top-1 probability and whether its argmax is the
# target's token (greedy), and sum(min(p, q)) at T = 1 (sampled): the data simulate.py replays.
#   .venv/bin/python docs/bench/draft-confidence/collect.py OUT.pt [prompts per kind] [new tokens]
import sys

import torch

from specdecode.bench.clients import bench_prompts
from specdecode.engine import generate_plain
from specdecode.load import load_draft, load_target
from specdecode.sampling import GREEDY

torch.set_num_threads(2)
out, per_kind = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2
new = int(sys.argv[3]) if len(sys.argv) > 3 else 64
t = load_target("qwen2.5-coder-1.5b")
d = load_draft("qwen2.5-coder-0.5b", t).model
rows = []
for p in bench_prompts("qwen2.5-coder-1.5b", per_kind):
    ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
    answer = generate_plain(t.model, ids, max_new_tokens=new, sampling=GREEDY).new_tokens
    seq = torch.tensor(ids + answer)
    t.model.clear()
    d.clear()
    # rows len(ids) - 1 .. : the distributions for each answer token (teacher-forced on the target's answer)
    tl = t.model.extend(seq[:-1], keep=len(answer))[-len(answer):].double()
    dl = d.extend(seq[:-1], keep=len(answer))[-len(answer):].double()
    tp, dp = tl.softmax(-1), dl.softmax(-1)
    rows.append({"id": p.id, "kind": p.kind, "target": torch.tensor(answer),
                 "draft_top": dl.argmax(-1), "draft_conf": dp.amax(-1).float(),
                 "overlap": torch.minimum(tp, dp).sum(-1).float(),
                 "target_conf": tp.amax(-1).float()})
    r = rows[-1]
    print(p.id, len(ids), "greedy match", float((r["draft_top"] == r["target"]).float().mean()),
          "overlap", float(r["overlap"].mean()), flush=True)
torch.save(rows, out)
