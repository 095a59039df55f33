# Our server (`specdecode serve`, the real pair) started once, then the loads a comma-separated plan names, one after
# another: N = N concurrent clients over the bench's 12 held-out prompts; Np = the same with `perf record` on the
# server; i = the bench's 1-client load alternating with the library in this process. Prints the server's huge pages
# and each load's tokens/s and summed `speculative` stats. Usage: PYTHONPATH=. .venv/bin/python THIS 4,i,4
import sys, time, json, os, subprocess
from collections import Counter
from specdecode.bench.clients import bench_prompts, start_ours, warm_up, run_load, summarize
target, draft = "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"
prompts = bench_prompts(target, 2)
served = start_ours(target, draft, 2, 4, 300)
warm_up(served, prompts[0], 64)
pid = subprocess.run(["pgrep", "-f", "specdecode serve"], capture_output=True, text=True).stdout.split()[0]
print("server pid", pid, [l.strip() for l in open(f"/proc/{pid}/smaps_rollup") if l.startswith(("Rss", "AnonHuge"))], flush=True)
import re
big = []
cur = None
for line in open(f"/proc/{pid}/smaps"):
    if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
        cur = line.split()[0]
    elif line.startswith("Rss:") and int(line.split()[1]) > 100000:
        big.append([cur, int(line.split()[1])])
    elif line.startswith("AnonHugePages:") and big and big[-1][0] == cur:
        big[-1].append(int(line.split()[1]))
print("mappings > 100 MB (rss kB, anon huge kB):", big, flush=True)
plan = sys.argv[1].split(",")  # e.g. 4,4,1,4
def my_threads():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        st = open(f"/proc/self/task/{tid}/stat").read()
        f = st[st.rindex(")") + 2:].split()
        out[tid] = (st[st.index("(") + 1: st.rindex(")")], int(f[11]) + int(f[12]))
    return out
for i, n in enumerate(plan):
    if n == "i":
        from specdecode.bench.clients import InProcess, run_alone
        inp = InProcess(target, draft, 2)
        inp.request(prompts[0], 8)
        a, b = run_alone(served, inp, prompts, 64, 300, progress=False)
        print("alone", summarize(a)["tokens_per_second"], summarize(b)["tokens_per_second"], flush=True)
        continue
    before = my_threads()
    prof = None
    if n.endswith("p"):
        n = n[:-1]
        prof = subprocess.Popen(["perf", "record", "-g", "-F", "199", "-p", pid, "-o", f"/tmp/perf{i}.data"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    load = run_load(served, prompts, int(n), 64, 300, progress=False)
    if prof:
        prof.send_signal(2); prof.wait()
    after = my_threads()
    print("bench-process threads' ticks during the load:", {k: (v[0], v[1] - before.get(k, (0, 0))[1]) for k, v in after.items() if v[1] - before.get(k, (0, 0))[1] > 0}, "threads", len(after))
    s = summarize(load)
    keys = Counter()
    for o in load.outcomes:
        for k, v in (o.speculative or {}).items():
            if isinstance(v, (int, float)):
                keys[k] += v
    print(f"load {i}: {n} clients {s['tokens_per_second']:.1f} tok/s, per-token p50 {s.get('per_token_p50')}",
          dict(keys), flush=True)
served.stop()
