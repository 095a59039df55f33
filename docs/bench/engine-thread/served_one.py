# tokens/s of requests served one at a time (SmolLM2, the default target, on its default engine: llama.cpp) by this
# checkout's service, in process over TestClient: 6 chat prompts x 2, 64 tokens, greedy. .venv/bin/python docs/bench/engine-thread/served_one.py LABEL
import sys, time
from fastapi.testclient import TestClient
from specdecode.server import create_app
with TestClient(create_app()) as client:
    service = client.app.state.service; loaded = service.load()
    print("engine", loaded.target.engine, "batched", service.scheduler.batched, flush=True)
    body = lambda p: {"messages": [{"role": "user", "content": p}], "max_tokens": 64, "temperature": 0}
    texts = ["Write a Python function that reverses a list.", "Explain what a hash map is.", "List three prime numbers and why.",
             "Summarize: the cat sat on the mat and looked at the dog.", "What is 17 times 23?", "Write a haiku about rain."]
    client.post("/v1/chat/completions", json=body(texts[0]))
    tokens, seconds = 0, 0.0
    for rep in range(2):
        for t in texts:
            s = time.perf_counter(); a = client.post("/v1/chat/completions", json=body(t)).json(); seconds += time.perf_counter() - s
            tokens += a["usage"]["completion_tokens"]
    print(sys.argv[1], f"{tokens / seconds:.1f} tok/s ({tokens} tokens)", flush=True)
