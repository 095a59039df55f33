# One request at a time: `specdecode serve` over loopback (streamed, a subprocess on port 8765) against the library in
# this process (one AdaptiveGamma kept, as the bench), alternating prompt by prompt, 6 held-out prompts twice, greedy.
#   .venv/bin/python docs/bench/allot/served.py
import json, time, statistics, subprocess, sys, urllib.request, torch
from specdecode.adaptive import AdaptiveGamma
from specdecode.engine import Generation
from specdecode.load import load_target, load_draft, default_draft
from specdecode.bench.clients import bench_prompts
from specdecode.sampling import GREEDY
srv = subprocess.Popen([".venv/bin/specdecode", "serve", "--target", "qwen2.5-coder-1.5b", "--draft", "qwen2.5-coder-0.5b", "--port", "8765", "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def post(prompt):
    body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": 64, "temperature": 0, "seed": 1234, "stream": True}).encode()
    req = urllib.request.Request("http://127.0.0.1:8765/v1/chat/completions", body, {"Content-Type": "application/json"})
    a = time.perf_counter(); first = None; n = 0
    with urllib.request.urlopen(req, timeout=300) as r:
        for line in r:
            if line.startswith(b"data:") and b"[DONE]" not in line:
                if first is None and b'"content"' in line: first = time.perf_counter() - a
    return first, time.perf_counter() - a
ps = bench_prompts("qwen2.5-coder-1.5b", 1)
try:
    for i in range(120):
        try: post("hi"); break
        except Exception: time.sleep(2)
    torch.set_num_threads(2)
    t = load_target("qwen2.5-coder-1.5b"); d = load_draft(default_draft(t), t); ctl = AdaptiveGamma.for_target(t.model)
    def lib(prompt):
        ids = t.tokenizer.encode_chat([{"role": "user", "content": prompt}])
        t.model.clear(); d.clear()
        a = time.perf_counter(); first = None
        g = Generation(t.model, d, ids, max_new_tokens=64, gamma=ctl, sampling=GREEDY, stop_token_ids=t.tokenizer.stop_token_ids)
        for r in g:
            if first is None: first = time.perf_counter() - a
        return first, time.perf_counter() - a
    S, L = [], []
    for rep in range(2):
        for j, p in enumerate(ps):
            pair = [("s", post), ("l", lib)] if (j + rep) % 2 == 0 else [("l", lib), ("s", post)]
            for tag, f in pair:
                (S if tag == "s" else L).append(f(p.prompt))
    print("served  TTFT median %.0f ms, total %.2f s" % (1e3*statistics.median(x[0] for x in S), sum(x[1] for x in S)))
    print("library TTFT median %.0f ms, total %.2f s" % (1e3*statistics.median(x[0] for x in L), sum(x[1] for x in L)))
finally:
    srv.terminate()  # never left running, whatever failed
