# The 4-client load served over HTTP (specdecode serve, as `bench --clients` starts it) against the same load in
# process (docs/bench/adaptive-margin/load4.py: the Scheduler driven by 4 threads, no HTTP), alternating, 3 pairs:
# tokens/s, tokens per target call, TTFT and per-token latency. Run from the repository root:
# .venv/bin/python docs/bench/draft-probes/served_vs_in_process.py
import sys, subprocess, tempfile
from pathlib import Path
from specdecode.bench.clients import start_ours, run_load, bench_prompts, warm_up, summarize
LOAD4 = Path(__file__).resolve().parents[1] / "adaptive-margin" / "load4.py"
prompts = bench_prompts("qwen2.5-coder-1.5b", 2)
s = start_ours("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", 2, 4, 300, ["--sequences", "4"])
warm_up(s, prompts[0], 8)
try:
    for rep in range(3):
        load = run_load(s, prompts, 4, 64, 300, progress=False)
        tok = sum(o.tokens for o in load.outcomes if not o.error)
        lat = summarize(load)
        print(f"served: {tok} tokens {load.seconds:.1f}s {tok/load.seconds:.2f} tok/s tpc {lat['tokens_per_target_call']:.2f} ttft50 {lat['ttft_p50_ms']:.0f} pt50 {lat['per_token_p50_ms']:.0f} pt95 {lat['per_token_p95_ms']:.0f}", flush=True)
        out = subprocess.run([sys.executable, str(LOAD4)], capture_output=True, text=True, cwd=tempfile.gettempdir())
        print("in-process:", [l for l in out.stdout.splitlines() if "tok/s" in l or "ttft p50" in l], flush=True)
finally:
    s.stop()
