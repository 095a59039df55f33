# The same pass from one worker thread only, with the main thread's OpenMP pool (left by loading) kept ("plain")
# or freed by omp_pause_resource_all ("pause"): .venv/bin/python docs/bench/engine-thread/pool_freed.py plain|pause
import time, torch, statistics, threading, queue, sys, ctypes, os, glob
from specdecode.load import load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b").model
gomp = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*.so*"))[0])
mode = sys.argv[1]
seqs = [t.sequence(i) for i in range(1, 5)]
def many(n, per):
    for s in seqs[:n]: s.rollback(L)
    a = time.perf_counter(); t.extend_batch([(s, torch.arange(5, 5 + per), per) for s in seqs[:n]]); return time.perf_counter() - a
def prep():
    global L
    for s in seqs:
        s.clear(); s.extend(torch.arange(1000, 1100), 1)
    L = seqs[0].length
if mode == "pause":
    print("pause:", gomp.omp_pause_resource_all(1))
res = []
def worker():
    prep()
    for rep in range(16): res.append(many(4, 1))
th = threading.Thread(target=worker); th.start(); th.join()
print(mode, f"worker only: {statistics.median(res[2:])*1e3:.1f}")
