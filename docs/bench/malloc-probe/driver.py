# Two workers (worker.py), one with glibc's mmap and trim thresholds raised (mallopt), both loaded at once and given
# the same requests in turn, prompt by prompt, the order alternating: tokens/s of each, greedy and T = 1, plain and
# the default draft. From the repository root: .venv/bin/python docs/bench/malloc-probe/driver.py [repeats]
import os
import statistics
import subprocess
import sys

py = ".venv/bin/python"
procs = {}
for name, flag in (("default", "0"), ("mallopt", "1")):
    p = subprocess.Popen([py, "docs/bench/malloc-probe/worker.py"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "MALLOPT": flag}, cwd=".")
    procs[name] = p
for p in procs.values():
    assert p.stdout.readline().strip() == "ready"
res = {}
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for rep in range(reps):
  for temp in ("0", "1"):
    for spec in ("0", "1"):
        for i in range(12):
            order = list(procs) if (i + rep) % 2 == 0 else list(procs)[::-1]
            for name in order:
                p = procs[name]
                p.stdin.write(f"{i} {temp} {spec}\n"); p.stdin.flush()
                n, s = p.stdout.readline().split()
                res.setdefault((temp, spec, name), []).append((int(n), float(s)))
for temp in ("0", "1"):
    for spec in ("0", "1"):
        a = res[(temp, spec, "default")]; b = res[(temp, spec, "mallopt")]
        ta = sum(n for n, _ in a) / sum(s for _, s in a); tb = sum(n for n, _ in b) / sum(s for _, s in b)
        ratios = [(nb / sb) / (na / sa) for (na, sa), (nb, sb) in zip(a, b)]
        same = sum(na == nb for (na, _), (nb, _) in zip(a, b))
        print(f"T{temp} {'spec' if spec == '1' else 'plain'}: default {ta:.2f} tok/s, mallopt {tb:.2f} ({tb/ta:.3f}x; median per prompt {statistics.median(ratios):.3f}x), same length {same}/{len(a)}", flush=True)
for p in procs.values():
    p.stdin.close(); p.wait()
