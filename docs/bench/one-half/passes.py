# Verify passes of the 1.5B with its down projections' inputs read in two int8 halves (16 bits, today's reading of
# a target's decode rows) against one half (8 bits, as its prompt rows read them), alternating pass by pass, after
# a 100-token prefill: median ms of k-token passes. From the repository root, nothing else running:
#   .venv/bin/python docs/bench/one-half/passes.py [REPS]
import statistics, sys, time
import torch
from specdecode.load import load_target
torch.set_num_threads(2)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 15
m = load_target("qwen2.5-coder-1.5b").model
one = [layer._kernel for layer in m.layers]  # (the default since commit 718e933; before it, two)
two = [k[:4] + ([1, 1, 1, 2],) + k[5:] for k in one]  # halves of qkv, o, gate_up, down
def use(kernels):
    for layer, k in zip(m.layers, kernels):
        layer.__dict__["_kernel"] = k
torch.manual_seed(0)
prompt = torch.randint(1000, 20000, (100,))
m.clear(); m.extend(prompt, keep=1)
times = {(name, k): [] for name in ("two", "one") for k in (1, 2, 3, 4, 5)}
for r in range(reps):
    for k in (1, 2, 3, 4, 5):
        for name, kernels in (("two", two), ("one", one)) if r % 2 == 0 else (("one", one), ("two", two)):
            use(kernels)
            tokens = torch.randint(1000, 20000, (k,))
            a = time.perf_counter(); m.extend(tokens, keep=k); times[(name, k)].append(time.perf_counter() - a)
            m.rollback(100)
for k in (1, 2, 3, 4, 5):
    t2, t1 = (1e3 * statistics.median(times[(n, k)]) for n in ("two", "one"))
    print(f"k={k}: two halves {t2:6.1f} ms, one half {t1:6.1f} ms, ratio {t2 / t1:.3f}", flush=True)
