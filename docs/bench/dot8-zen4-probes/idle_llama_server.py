# our bare one-token steps with an idle llama-server alive (after a request) vs none alive, alternating
#   .venv/bin/python docs/bench/dot8-zen4-probes/idle_llama_server.py
import time, torch, statistics
from specdecode.bench.llama_server import LlamaServer
from specdecode.models.download import gguf_file
from specdecode.load import load_target
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b"); m = t.model
ids = list(range(1000, 1040))
def steps(n=40):
    m.clear(); m.extend(torch.tensor(ids), keep=1); out = []
    for i in range(n):
        a = time.perf_counter(); m.extend(torch.tensor([5]), keep=1); out.append(time.perf_counter() - a)
    return 1e3 * statistics.median(out)
for rep in range(3):
    print("none alive", f"{steps():.1f}", flush=True)
    srv = LlamaServer(gguf_file("qwen2.5-coder-1.5b"), 2)
    srv.complete({"prompt": ids, "n_predict": 16, "temperature": 0.0})
    print("alive, right after its request", f"{steps():.1f}", flush=True)
    time.sleep(3)
    print("alive, 3 s after", f"{steps():.1f}", flush=True)
    srv.close()
