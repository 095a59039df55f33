# old vs new adaptive gamma (optimistic plain-vs-draft), library path, one controller each kept across requests, alternating
import sys, time, torch, statistics
from specdecode.load import load_target, load_draft, default_draft
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.adaptive import AdaptiveGamma
from specdecode.sampling import GREEDY, SamplingConfig
torch.set_num_threads(2)
sys.path.insert(0, __import__("os").path.dirname(__file__))
from trap import Old  # the old rule
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t)
temp = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
sampling = SamplingConfig(temperature=temp) if temp else GREEDY
prompts = bench_prompts("qwen2.5-coder-1.5b", 2)
ctl = {"old": Old.for_target(t.model), "new": AdaptiveGamma.for_target(t.model)}
tot = {"old": [0, 0], "new": [0, 0]}
rat = []
for rep in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
  for i, p in enumerate(prompts):
    ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
    res = {}
    for m in (("old", "new") if (i + rep) % 2 == 0 else ("new", "old")):
        t.model.clear(); d.clear()
        g = Generation(t.model, d, ids, max_new_tokens=64, gamma=ctl[m], sampling=sampling, seed=None,
                       stop_token_ids=t.tokenizer.stop_token_ids, tokenizer=t.tokenizer)
        t0 = time.perf_counter(); g.run(); s = time.perf_counter() - t0
        st = g.stats
        dec = s - st.prefill_seconds
        res[m] = (s, len(g.new_tokens), st.target_calls, dec)
        tot[m][0] += dec; tot[m][1] += len(g.new_tokens) - 1
    a, b = res["old"], res["new"]
    rat.append((a[3] / max(1, a[1] - 1)) / (b[3] / max(1, b[1] - 1)))
    print(f"{p.id:15s} old {a[0]:.2f}s {a[1]}tok {a[1]/a[2]:.2f}/call | new {b[0]:.2f}s {b[1]}tok {b[1]/b[2]:.2f}/call | new/old decode speed {rat[-1]:.3f}  alpha old {ctl['old'].alpha:.2f} new {ctl['new'].alpha:.2f} plain {ctl['old']._plain_rounds} {ctl['new']._plain_rounds}", flush=True)
print("median new/old decode speed:", statistics.median(rat), " total decode tok/s old", tot["old"][1]/tot["old"][0], "new", tot["new"][1]/tot["new"][0])
