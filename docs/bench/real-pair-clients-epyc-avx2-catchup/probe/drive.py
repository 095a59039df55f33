"""Start serve_logged.py and run 1-client then N-client loads on the held-out prompts; print summaries."""
import os, subprocess, sys, tempfile, time
from pathlib import Path
from specdecode.bench import clients as c
from specdecode.bench.process import free_port, wait_healthy, stop

n = int(sys.argv[1]); log_path = sys.argv[2]; extra = sys.argv[3:]
port = free_port()
env = {**os.environ, "OMP_NUM_THREADS": "2", "PROBE_LOG": log_path, "PYTHONPATH": str(Path(__file__).resolve().parents[4])}
cmd = [sys.executable, str(Path(__file__).with_name("serve_logged.py")), "serve", "--target", "qwen2.5-coder-1.5b", "--draft",
       "qwen2.5-coder-0.5b", "--port", str(port), "--max-queue", "16", "--log-level", "warning", "--sequences", str(n), *extra]
log = tempfile.TemporaryFile()
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
url = f"http://127.0.0.1:{port}"
wait_healthy(url, p, log, "probe", 600, lambda: stop(p, log))
served = c.Served("ours", url, lambda: stop(p, log), {"cache_prompt": False}, exact=True)
prompts = c.bench_prompts("qwen2.5-coder-1.5b", 2)
c.warm_up(served, prompts[0], 8)
open(log_path, "a").write('{"kind": "mark", "what": "warm"}\n')
for count in (1, n):
    open(log_path, "a").write('{"kind": "mark", "what": "load %d"}\n' % count)
    load = c.run_load(served, prompts, count, 64, 300, progress=False)
    s = c.summarize(load)
    print(count, {k: s[k] for k in s if not isinstance(s[k], (list, dict))}, flush=True)
served.stop()
