"""A live check of the draft costs' re-timing (docs/bench/live-retime/README.md): a server warmed up while four `yes`
processes hold the cores (so the draft is timed in a bad moment), then requests served 4 at once (twice), then 6
alone. From the repository root: .venv/bin/python docs/bench/live-retime/retime.py; the server's log, with a line
per request (tokens, target calls, alpha, tokens/s), is /tmp/live-retime.log."""

import concurrent.futures
import json
import subprocess
import time
import urllib.request

PORT = 8123
PROMPTS = ["Write a Python function that reverses a linked list.", "Explain what a hash map is in two sentences.",
           "Write a function that returns the n-th Fibonacci number.", "What is the capital of France? Answer briefly.",
           "Write a Python class for a stack with push and pop.", "Summarize: the cat sat on the mat all day long."]


def ask(prompt: str, tokens: int = 48) -> dict:
    body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": tokens, "temperature": 0,
                       "cache_prompt": False}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{PORT}/v1/chat/completions", body,
                                     {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=300).read())


server = subprocess.Popen([".venv/bin/specdecode", "serve", "--target", "qwen2.5-coder-1.5b", "--draft",
                           "qwen2.5-coder-0.5b", "--port", str(PORT)],
                          stderr=open("/tmp/live-retime.log", "w"), stdout=subprocess.DEVNULL)  # noqa: SIM115
try:
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/v1/models", timeout=2)
            break
        except OSError:
            time.sleep(1)
    hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(4)]
    ask(PROMPTS[0], 8)
    ask(PROMPTS[1], 16)
    for hog in hogs:
        hog.kill()
    print("warm-up beside the hogs: done", flush=True)
    for batch in range(2):
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(ask, PROMPTS[:4]))
        print(f"4 at once, batch {batch}: done", flush=True)
    for prompt in PROMPTS:
        ask(prompt)
    print("6 alone: done", flush=True)
finally:
    server.terminate()
    server.wait(30)
