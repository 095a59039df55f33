# chat-01 greedy, lookup+0.5B, one AdaptiveGamma kept across runs (as the bench), per-round choices and estimates
#   .venv/bin/python docs/bench/adaptive-prior/replay.py qa-01,math-01,chat-01   (prints the last one's rounds)
import sys, time, torch
from specdecode.adaptive import AdaptiveGamma
from specdecode.engine import Generation
from specdecode.load import load_target, load_draft, default_draft
from specdecode.bench.clients import bench_prompts
from specdecode.sampling import GREEDY
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b"); d = load_draft(default_draft(t), t)
ps = {p.id: p for p in bench_prompts("qwen2.5-coder-1.5b", 2)}
ctl = AdaptiveGamma.for_target(t.model)
order = sys.argv[1].split(",")
for pid in order:
    ids = t.tokenizer.encode_chat([{"role": "user", "content": ps[pid].prompt}])
    t.model.clear(); d.clear()
    g = Generation(t.model, d, ids, max_new_tokens=64, gamma=ctl, sampling=GREEDY, stop_token_ids=t.tokenizer.stop_token_ids)
    last = [0.0, 0.0]
    lines = []
    for r in g:
        s = g.stats
        tt, dd = s.target_seconds - last[0], s.draft_seconds - last[1]; last = [s.target_seconds, s.draft_seconds]
        lines.append(f"g{len(r.drafted) if hasattr(r,'drafted') else '?'} acc{r.n_accepted} T {tt*1e3:.0f} D {dd*1e3:.0f} | a {ctl.alpha:.2f} Td1 {ctl.draft_time()*1e3:.1f} Td2 {ctl.draft_time(2)*1e3:.1f} T1 {ctl.target_time(1)*1e3:.1f} T4 {ctl.target_time(4)*1e3:.1f} T7 {ctl.target_time(7)*1e3:.1f}")
    s = g.stats
    print(pid, f"{s.seconds:.2f}s pre {s.prefill_seconds:.2f} tgt {s.target_seconds:.2f} drf {s.draft_seconds:.2f} calls {s.target_calls}", flush=True)
    if pid == order[-1]:
        print("\n".join(lines))
