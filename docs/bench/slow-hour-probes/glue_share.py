"""The share of Python glue in speculative decoding on the pair: line timings of NativeLlama.extend_batch and of
LlamaLayer._kernel_call over a 64-token answer (needs line_profiler, not a dependency:
`.venv/bin/pip install line_profiler`).
    .venv/bin/python docs/bench/slow-hour-probes/glue_share.py"""
import sys, time, torch
from line_profiler import LineProfiler
from specdecode.load import load_target, load_draft, default_draft
from specdecode.engine import generate
import specdecode.models.native as native, specdecode.models.llama as llama
torch.set_num_threads(2)
tg = load_target("qwen2.5-coder-1.5b")
dr = load_draft(default_draft(tg), tg)
ids = tg.tokenizer.encode("Write a Python function that checks whether a string is a palindrome.")
generate(tg.model, dr, ids, max_new_tokens=8, gamma="auto")
lp = LineProfiler(native.NativeLlama.extend_batch.__wrapped__, llama.LlamaLayer._kernel_call)
lp.enable_by_count()
generate(tg.model, dr, ids, max_new_tokens=64, gamma="auto")
lp.disable_by_count()
lp.print_stats(output_unit=1e-3)
