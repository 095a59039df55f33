"""The native engine's speed work, one step at a time: each configuration's pass times, measured alternately.

    F.linear            plain PyTorch linears (oneDNN repacks the bf16 weights on every call)
    + prepacked         weights reordered once into oneDNN's blocked layout (`mkldnn._reorder_linear_weight`)
    + batch invariance  1-token passes as 2 rows, attention over whole 512-key blocks (the default): every position's
                        logits are then bitwise the same whatever the pass size, so greedy speculative output equals
                        plain greedy output exactly
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..models.hf import HFCausalLM, load_hf_model
from ..models.native import load_native
from .costs import pass_times

STEPS = {
    "F.linear": {"packed": False, "batch_invariant": False},
    "+ prepacked weights": {"packed": True, "batch_invariant": False},
    "+ batch invariance (default)": {"packed": True, "batch_invariant": True},
}


def measure(checkpoint: Path, ks=(1, 2, 4, 8, 16), repeats: int = 9) -> dict[str, dict[int, float]]:
    """Median seconds per pass of k tokens for transformers and each native configuration (bf16)."""
    models = {"transformers": HFCausalLM(load_hf_model(checkpoint, torch.bfloat16)[0])}
    for name, flags in STEPS.items():
        models[name] = load_native(checkpoint, torch.bfloat16, packed=flags["packed"])
        models[name].batch_invariant = flags["batch_invariant"]
    return pass_times(models, ks, repeats=repeats)
