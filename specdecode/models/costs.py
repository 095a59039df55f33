"""What a forward pass costs: T(k) for k new tokens per pass, per engine, and the machine's read bandwidth.

The paper assumes verifying gamma+1 tokens costs one step; T(k)/T(1) says how true that is here. "Bandwidth
achieved" = weight bytes x passes per second, against what this machine can read.
"""

from __future__ import annotations

import statistics
import time

import torch

from ..cpu import torch_threads
from .base import CausalLM


def read_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes per second this process reads from memory (a sum over a buffer far larger than the caches)."""
    buffer = torch.ones(megabytes * 2**20 // 4, dtype=torch.float32)
    buffer.sum()
    best = min(_timed(buffer.sum) for _ in range(repeats))
    return buffer.numel() * 4 / best


def compute_rate(seconds: float = 0.5, size: int = 256) -> float:
    """Floating-point operations per second this process's torch threads do on a float32 matmul that fits in the
    caches: what the cores compute when memory is not the limit. On the shared hosts we run on it moved by a third
    within minutes while the memory bandwidth held (docs/bench/served-4-clients-anomaly), and passes of several rows,
    compute-bound, moved with it."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(10):
        a @ b
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        a @ b
        count += 1
    return 2 * size**3 * count / elapsed


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def pass_times(models: dict[str, CausalLM], ks=(1, 2, 4, 8, 16), context: int = 64, repeats: int = 9
               ) -> dict[str, dict[int, float]]:
    """Median seconds of one pass of k new tokens after `context` cached tokens, per model; models and k values
    alternate in every repeat so that drift in the machine's speed hits them all alike. Each model runs with torch on
    the threads it asks for (`torch_threads`: one beside llama.cpp), as generation runs it."""
    samples: dict[str, dict[int, list[float]]] = {name: {k: [] for k in ks} for name in models}
    for model in models.values():
        model.rollback(0)
        model.extend(torch.arange(100, 100 + context) % model.vocab_size, keep=1)
        model.extend(torch.arange(1000, 1000 + max(ks)) % model.vocab_size)  # warm-up
        model.rollback(context)
    for _ in range(repeats):
        for k in ks:
            for name, model in models.items():
                tokens = torch.arange(2000, 2000 + k) % model.vocab_size
                with torch_threads(model.torch_threads):  # each engine as it runs (llama.cpp)
                    samples[name][k].append(_timed(lambda m=model, t=tokens: m.extend(t)))
                model.rollback(context)
    return {name: {k: statistics.median(v) for k, v in per_k.items()} for name, per_k in samples.items()}

