# The 1.5B's one-token and four-token passes (median of 10, after 64 cached tokens) and the host's compute rate
# (a 256 x 256 float32 matmul in the caches, 1 and 2 threads), every ~50 s for SECONDS. Usage:
# PYTHONPATH=. .venv/bin/python THIS SECONDS
import time, torch, statistics, sys
from specdecode.load import load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b").model
seqs = [t.sequence(i) for i in range(4)]
for s in seqs:
    s.clear(); s.extend(torch.arange(100, 164), keep=1)
def timed(rows):
    s = seqs[0]; n = s.length; a = time.perf_counter(); s.extend(torch.arange(5, 5 + rows)); r = time.perf_counter() - a; s.rollback(n); return r
a = torch.randn(256, 256); b = torch.randn(256, 256)
def gflops(threads):
    torch.set_num_threads(threads)
    for _ in range(20): a @ b
    x = time.perf_counter(); n = 0
    while time.perf_counter() - x < 1: a @ b; n += 1
    torch.set_num_threads(2)
    return round(n * 2 * 256**3 / (time.perf_counter() - x) / 1e9, 1)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    res = {1: [], 4: []}
    for _ in range(10):
        res[1].append(timed(1)); res[4].append(timed(4))
    print(time.strftime("%H:%M:%S"), "T1", round(statistics.median(res[1]) * 1e3, 1), "T4", round(statistics.median(res[4]) * 1e3, 1),
          "gflops 1t", gflops(1), "2t", gflops(2), flush=True)
    time.sleep(45)
