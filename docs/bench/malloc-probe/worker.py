# A worker for a two-process A/B: loads the pair, then for each line "i temp spec" on stdin generates prompt i and
# prints "tokens seconds rule_ms". MALLOPT=1 sets glibc's mmap and trim thresholds first.
import ctypes
import os
import sys
import time

if os.environ.get("MALLOPT") == "1":
    libc = ctypes.CDLL(None)
    libc.mallopt(-3, 64 << 20); libc.mallopt(-1, 256 << 20)
import torch

from specdecode.bench.suite import _prompts, named_plan
from specdecode.engine import generate, generate_plain
from specdecode.load import default_draft, load_draft, load_target
from specdecode.sampling import SamplingConfig

torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b")
d = load_draft(default_draft(t), t)
ps = _prompts(named_plan("qwen2.5-coder-1.5b"))
def run(i, temp, spec, n=64):
    ids = t.tokenizer.encode(ps[i].prompt)
    a = time.perf_counter()
    if spec:
        r = generate(t.model, d, ids, max_new_tokens=n, gamma="auto", sampling=SamplingConfig(temp), stop_token_ids=t.tokenizer.stop_token_ids)
    else:
        r = generate_plain(t.model, ids, max_new_tokens=n, sampling=SamplingConfig(temp), stop_token_ids=t.tokenizer.stop_token_ids)
    return len(r.new_tokens), time.perf_counter() - a
run(0, 1.0, False, 16); run(0, 1.0, True, 16)
print("ready", flush=True)
for line in sys.stdin:
    i, temp, spec = line.split()
    n, s = run(int(i), float(temp), spec == "1")
    print(n, s, flush=True)
