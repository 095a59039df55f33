"""The native engine's speed work, one step at a time: each configuration's pass times, measured alternately.

    F.linear            plain PyTorch linears (oneDNN repacks the bf16 weights on every call)
    + prepacked         weights reordered once into oneDNN's blocked layout (`mkldnn._reorder_linear_weight`)
    + batch invariance  1-token passes as 2 rows, attention over whole 512-key blocks (the default): every position's
                        logits are then bitwise the same whatever the pass size, so greedy speculative output equals
                        plain greedy output exactly
    int8                int8 weights, bf16 activations (`aten._weight_int8pack_mm`): the default without native bf16
The prepacked steps need native bf16 matmuls and are left out on a CPU without them.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..cpu import capability
from ..models.costs import pass_times
from ..models.hf import HFCausalLM, load_hf_model
from ..models.native import load_native

STEPS = {  # name: (weight format, batch invariant)
    "F.linear": ("bf16", False),
    "+ prepacked weights": ("bf16-onednn", False),
    "+ batch invariance (default)": ("bf16-onednn", True),
    "int8 weights, batch invariant": ("int8", True),
}


def measure(checkpoint: Path, ks=(1, 2, 4, 8, 16), repeats: int = 9) -> dict[str, dict[int, float]]:
    """Median seconds per pass of k tokens for transformers (bf16) and each native configuration."""
    models = {"transformers": HFCausalLM(load_hf_model(checkpoint, torch.bfloat16)[0])}
    for name, (fmt, invariant) in STEPS.items():
        if fmt == "bf16-onednn" and not capability().bf16_matmul:
            continue
        models[name] = load_native(checkpoint, fmt)
        models[name].batch_invariant = invariant
    return pass_times(models, ks, repeats=repeats)
