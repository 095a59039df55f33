# A 1.5B pass of 4 sequences x 1 row, run from the main thread, from 4 threads in turn, and from 1 worker thread
# (after the main thread has computed). Run from the repository root, optionally under OMP_WAIT_POLICY / GOMP_SPINCOUNT:
# .venv/bin/python docs/bench/engine-thread/threads_per_pass.py LABEL
import time, torch, statistics, threading, queue, sys
from specdecode.load import load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b").model
seqs = [t.sequence(i) for i in range(1, 5)]
for s in seqs:
    s.clear(); s.extend(torch.arange(1000, 1100), 1)
L = seqs[0].length
def many(n, per):
    for s in seqs[:n]: s.rollback(L)
    a = time.perf_counter(); t.extend_batch([(s, torch.arange(5, 5 + per), per) for s in seqs[:n]]); return time.perf_counter() - a
qs = [queue.Queue() for _ in range(4)]; rs = queue.Queue()
def worker(i):
    while (f := qs[i].get()) is not None: rs.put(f())
ths = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for x in ths: x.start()
res = {}
for rep in range(16):
    res.setdefault("main", []).append(many(4, 1))
for rep in range(16):
    qs[rep % 4].put(lambda: many(4, 1)); res.setdefault("4 threads in turn", []).append(rs.get())
for rep in range(16):
    qs[0].put(lambda: many(4, 1)); res.setdefault("1 worker thread", []).append(rs.get())
for q in qs: q.put(None)
print(sys.argv[1:], "  ".join(f"{k}: {statistics.median(v[2:])*1e3:.1f}" for k, v in res.items()))
