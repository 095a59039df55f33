# One-token passes of the named pair with the layers in one call of layer.cpp (`KernelStack`) against one Python
# call per layer, alternating in one process, k = 1 and 3, and whether the logits are bitwise the same. From the
# repository root: .venv/bin/python docs/bench/layer-stack/stack_ab.py
import time, torch, statistics
from specdecode.load import default_draft, load_draft, load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t).fallback.model
ids = t.tokenizer.encode_chat([{"role": "user", "content": "Write a Python function that merges two sorted lists."}])
for name, m in (("target", t.model), ("draft", d)):
    m.clear(); m.prefill(torch.tensor(ids), keep=1)
    n = m.length
    stack = m._stack
    for k in (1, 3):
        res = {"stack": [], "layers": []}
        outs = {}
        for rep in range(40):
            for mode in (("stack", "layers") if rep % 2 == 0 else ("layers", "stack")):
                m.__dict__["_stack"] = stack if mode == "stack" else None
                a = time.perf_counter(); lg = m.extend(torch.arange(100, 100 + k), keep=k); res[mode].append(time.perf_counter() - a)
                outs[mode] = lg
                m.rollback(n)
        same = torch.equal(outs["stack"], outs["layers"])
        s, l = (1e3 * statistics.median(res[x]) for x in ("stack", "layers"))
        print(f"{name} k={k}: stack {s:.2f} ms, layers {l:.2f} ms, ratio {l / s:.3f}, bitwise same {same}", flush=True)
    m.__dict__["_stack"] = stack
