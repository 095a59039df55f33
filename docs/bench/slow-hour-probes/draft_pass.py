"""Where a one-token pass of the 0.5B draft goes: the whole pass, its layers, each product kind over the 24 layers at
M = 1 (part 0 of each, by torch.ops.specdecode.dot8_mm), the cut head; and the 1.5B target's T(1), T(2), T(4),
alternating.
    .venv/bin/python docs/bench/slow-hour-probes/draft_pass.py 30"""
import statistics, sys, time
import torch
from specdecode.load import load_target, load_draft
import specdecode.models.native as native

torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
tg = load_target("qwen2.5-coder-1.5b")
dr = load_draft("qwen2.5-coder-0.5b", tg)
T, Dm = tg.model, dr.model
prompt = torch.arange(1000, 1064)
T.extend(prompt); Dm.extend(prompt)
layer_time = [0.0]
orig = native.run_layers
def timed(*a, **k):
    t = time.perf_counter(); r = orig(*a, **k); layer_time[0] += time.perf_counter() - t; return r
native.run_layers = timed
kinds = ["qkv", "o", "gate_up", "down"]
def kind_inputs(m, kind):
    l = m.layers[0]; lin = getattr(l, kind); p = lin.parts[0]
    return torch.randn(1, p.in_features), len(lin.parts)
res = {k: [] for k in ["draft", "draft_layers", "draft_head", "target", "target T(2)", "target T(4)"] + [f"d_{k}" for k in kinds] + [f"t_{k}" for k in kinds]}
nbytes = {}
for r in range(rounds):
    n = Dm.length
    layer_time[0] = 0.0
    t = time.perf_counter(); Dm.extend(torch.tensor([5])); res["draft"].append(time.perf_counter() - t)
    res["draft_layers"].append(layer_time[0]); Dm.rollback(n)
    x = torch.randn(1, Dm.shape.hidden)
    t = time.perf_counter(); Dm.head(x); res["draft_head"].append(time.perf_counter() - t)
    for tag, m in (("d", Dm), ("t", T)):
        for kind in kinds:
            x, nparts = kind_inputs(m, kind)
            t = time.perf_counter()
            for l in m.layers:
                getattr(l, kind).parts[0](x, getattr(l, kind).isa)
            res[f"{tag}_{kind}"].append(time.perf_counter() - t)
            if r == 0:
                nbytes[f"{tag}_{kind}"] = sum(getattr(l, kind).parts[0].nbytes for l in m.layers)
                print(tag, kind, "parts", nparts, [ (p.bits, p.out_features, p.in_features) for p in getattr(m.layers[0], kind).parts])
    n = T.length
    t = time.perf_counter(); T.extend(torch.tensor([5])); res["target"].append(time.perf_counter() - t); T.rollback(n)
    for k in (2, 4):
        t = time.perf_counter(); T.extend(torch.tensor([5] * k)); res[f"target T({k})"].append(time.perf_counter() - t)
        T.rollback(n)
for k, v in res.items():
    med = statistics.median(v) * 1e3
    extra = f"  {nbytes[k] / (med / 1e3) / 1e9:.1f} GB/s ({nbytes[k]/1e6:.1f} MB)" if k in nbytes else ""
    print(f"{k:14s} {med:8.2f} ms{extra}")
print("c =", statistics.median(res["draft"]) / statistics.median(res["target"]))
print("draft bytes", Dm.weight_bytes / 1e6, "target bytes", T.weight_bytes / 1e6)
