# One prefill of the 1.5B (Qwen2.5-Coder-1.5B, Q4_K_M, int4-dot8) with its prompt rows on int4-dot8 ("off") and on the
# bf16 prompt path ("on"), alternating, median of 5 each (ms), 2 threads.
#   .venv/bin/python docs/bench/prompt-path/prefill.py
import statistics, time
import torch
from specdecode.load import add_prompt_paths, load_target

torch.set_num_threads(2)
target = load_target("qwen2.5-coder-1.5b")
add_prompt_paths(target, None, long_lived=True)
model = target.model
twins = model.prompt_layers
for rows in (16, 32, 64, 128, 256):
    tokens = (torch.arange(rows + 1) * 37) % 20000 + 100  # rows prompt rows, then the last one (int4-dot8)
    times = {"off": [], "on": []}
    for rep in range(5):
        for mode in ("off", "on") if rep % 2 == 0 else ("on", "off"):
            model.prompt_layers = twins if mode == "on" else None
            model.clear()
            start = time.perf_counter()
            model.prefill(tokens, keep=1)
            times[mode].append((time.perf_counter() - start) * 1e3)
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    print(f"{rows:3d} prompt rows: int4-dot8 {off:5.0f} ms ({off / rows:.1f} a row), prompt path {on:5.0f} ms "
          f"({on / rows:.1f} a row), {off / on:.2f}x", flush=True)
