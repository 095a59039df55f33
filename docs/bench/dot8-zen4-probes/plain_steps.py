# plain decoding's step vs a bare one-token pass, alternating, same prompts
#   .venv/bin/python docs/bench/dot8-zen4-probes/plain_steps.py
import time, torch, statistics
from specdecode.load import load_target
from specdecode.engine import Generation
from specdecode.sampling import GREEDY
from specdecode.bench.clients import bench_prompts
torch.set_num_threads(2)
t = load_target("qwen2.5-coder-1.5b"); m = t.model
ps = bench_prompts("qwen2.5-coder-1.5b", 1)
for rep in range(2):
  for p in ps:
    ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
    # library plain
    m.clear()
    a = time.perf_counter()
    from specdecode.engine import generate_plain
    r = generate_plain(t.model, ids, max_new_tokens=64, sampling=GREEDY)
    lib = time.perf_counter() - a
    s = r.stats
    # bare
    m.clear()
    a = time.perf_counter(); logits = m.extend(torch.tensor(ids), keep=1); pre = time.perf_counter() - a
    steps = []
    tok = int(logits[-1].argmax())
    for i in range(len(r.new_tokens) - 1):
        b = time.perf_counter(); logits = m.extend(torch.tensor([tok]), keep=1); tok = int(logits[-1].argmax()); steps.append(time.perf_counter() - b)
    print(p.id, len(ids), f"lib {lib:.2f}s prefill {s.prefill_seconds:.3f} | bare prefill {pre:.3f} steps {len(steps)} x {1e3*statistics.median(steps):.1f} ms mean {1e3*statistics.mean(steps):.1f} total {pre+sum(steps):.2f}", flush=True)
