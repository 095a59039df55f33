# does an idle llama.cpp binding model in our process slow our passes?
#   .venv/bin/python docs/bench/dot8-zen4-probes/idle_binding.py
import time, torch, statistics, gc
from specdecode.load import load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b"); m = t.model
ids = list(range(1000, 1040))
def steps(n=30):
    m.clear(); m.extend(torch.tensor(ids), keep=1); out = []
    for i in range(n):
        a = time.perf_counter(); m.extend(torch.tensor([5]), keep=1); out.append(time.perf_counter() - a)
    return 1e3 * statistics.median(out)
lt = load_target("qwen2.5-coder-1.5b", engine="llama.cpp")
for rep in range(4):
    print("ours", f"{steps():.1f}", flush=True)
    lt.model.clear(); lt.model.extend(torch.tensor(ids), keep=1)
    for i in range(5): lt.model.extend(torch.tensor([5]), keep=1)
    print("ours right after llama.cpp passes", f"{steps():.1f}", flush=True)
