# llama-server's prompt and decode timings on the bench prompts (its own "timings"), beside ours
#   .venv/bin/python docs/bench/dot8-zen4-probes/llama_server_timings.py
import statistics
from specdecode.bench.llama_server import LlamaServer
from specdecode.models.download import gguf_file
from specdecode.bench.clients import bench_prompts
from specdecode.load import load_target
t = load_target("qwen2.5-coder-1.5b")
srv = LlamaServer(gguf_file("qwen2.5-coder-1.5b"), 2)
for rep in range(2):
  for p in bench_prompts("qwen2.5-coder-1.5b", 1):
    ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
    a = srv.complete({"prompt": ids, "n_predict": 64, "cache_prompt": False, "temperature": 0.0, "return_tokens": True})
    tm = a["timings"]
    print(p.id, len(ids), f"prompt {tm['prompt_ms']:.0f} ms ({tm['prompt_ms']/tm['prompt_n']:.1f}/row, n={tm['prompt_n']}) decode {tm['predicted_per_token_ms']:.1f} ms/token x {tm['predicted_n']}", flush=True)
srv.close()
