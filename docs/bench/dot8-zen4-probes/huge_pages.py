# One-token passes of the 1.5B, six stretches of 40, with how much of this process sits on huge pages:
#   .venv/bin/python docs/bench/dot8-zen4-probes/huge_pages.py
import time, torch, statistics, re
from specdecode.load import load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b"); m = t.model
print([l for l in open('/proc/meminfo') if 'AnonHuge' in l], flush=True)
print(sum(int(x) for x in re.findall(r'AnonHugePages:\s+(\d+)', open('/proc/self/smaps').read()))/1024, "MB huge in this process")
ids = list(range(1000, 1040))
for r in range(6):
    m.clear(); m.extend(torch.tensor(ids), keep=1); out = []
    for i in range(40):
        a = time.perf_counter(); m.extend(torch.tensor([5]), keep=1); out.append(time.perf_counter() - a)
    print(f"{1e3*statistics.median(out):.1f}", flush=True)
