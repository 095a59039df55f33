"""How closely one engine's next-token distributions follow another's on the same model file, teacher-forced.

    top-1 agreement = share of positions where argmax p_ours = argmax p_reference
    mean KL         = mean over positions of KL(p_reference || p_ours), in nats (temperature 1, full vocabulary)

The first position (the distribution after a lone first token, `<|im_start|>` for a chat prompt) is left out: it
is degenerate (one key to attend to) and differed by ~6 nats between two faithful readings of the same file, more
than all other positions together. Used for the native engine's int4 reading of a GGUF file against llama.cpp.
"""

from __future__ import annotations

import torch
from tqdm import tqdm

from ..models.base import CausalLM


def agreement(ours: CausalLM, reference: CausalLM, texts: list[list[int]], progress: bool = True) -> dict:
    """Both models read each token list in one pass from an empty cache; every position's logits are compared."""
    agree = positions = 0
    kl = 0.0
    for ids in tqdm(texts, desc="teacher-forced passes", unit="text", disable=not progress):
        tokens = torch.tensor(ids)
        ours.rollback(0)
        reference.rollback(0)
        mine, theirs = ours.extend(tokens)[1:].double(), reference.extend(tokens)[1:].double()  # [k - 1, V]
        agree += (mine.argmax(-1) == theirs.argmax(-1)).sum().item()
        log_p, log_q = theirs.log_softmax(-1), mine.log_softmax(-1)
        kl += (log_p.exp() * (log_p - log_q)).sum().item()
        positions += len(ids) - 1
    return {"positions": positions, "texts": len(texts), "top1_agreement": agree / positions,
            "mean_kl": kl / positions}
