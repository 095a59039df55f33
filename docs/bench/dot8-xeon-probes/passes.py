# Whole 1.5B passes of k = 1, 4, 8, 16, 32 new tokens after 64 cached (median ms over 7, keep = k up to 8, else 1), for
# the kernels this checkout builds: .venv/bin/python docs/bench/dot8-xeon-probes/passes.py LABEL [REPEATS]
import sys, time, torch
from specdecode.load import load_target
t = load_target("qwen2.5-coder-1.5b")
m = t.model
torch.manual_seed(0)
ctx = torch.randint(0, 50000, (64,))
m.extend(ctx, keep=1)
base = m.length
res = {}
for rep in range(int(sys.argv[2]) if len(sys.argv) > 2 else 7):
    for k in (1, 4, 8, 16, 32):
        toks = torch.randint(0, 50000, (k,))
        a = time.perf_counter(); m.extend(toks, keep=k if k <= 8 else 1); b = time.perf_counter()
        m.rollback(base)
        res.setdefault(k, []).append((b - a) * 1e3)
print(sys.argv[1], " ".join(f"T{k}={sorted(v)[len(v)//2]:.1f}" for k, v in res.items()), flush=True)
