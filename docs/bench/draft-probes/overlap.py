# One side of the overlap probe: the 1.5B's pass of ROWS tokens (target1, target4) or the 0.5B draft's one-token pass
# (draft), after 64 cached tokens, looped for SECONDS once /tmp/overlap-go exists; prints the median. overlap.sh runs
# each alone on 2 threads and on 1 core, then a target and the draft together, each pinned to its own core.
# Usage: PYTHONPATH=. .venv/bin/python THIS ROLE THREADS SECONDS
import os, sys, time, statistics, torch
from specdecode.load import load_target, load_draft
role, threads, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
torch.set_num_threads(threads)
target = load_target("qwen2.5-coder-1.5b")
model = load_draft("qwen2.5-coder-0.5b", target).model if role == "draft" else target.model
rows = 1 if role == "draft" else int(role[-1])
s = model.sequence(0)
s.clear(); s.extend(torch.arange(100, 164), keep=1)
def timed():
    n = s.length; a = time.perf_counter(); s.extend(torch.arange(5, 5 + rows)); r = time.perf_counter() - a; s.rollback(n); return r
for _ in range(5): timed()
print("ready", flush=True)
while not os.path.exists("/tmp/overlap-go"): time.sleep(0.01)
end = time.time() + seconds; out = []
while time.time() < end:
    out.append(timed())
print(role, threads, "n", len(out), "median ms", round(statistics.median(out) * 1e3, 2), flush=True)
