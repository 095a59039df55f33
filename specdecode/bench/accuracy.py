"""How closely one engine's next-token distributions follow another's on the same model file, teacher-forced.

    top-1 agreement = share of positions where argmax p_ours = argmax p_reference
    mean KL         = mean over positions of KL(p_reference || p_ours), in nats (temperature 1, full vocabulary)

The first position (the distribution after a lone first token, `<|im_start|>` for a chat prompt) is left out: it
is degenerate (one key to attend to) and differed by ~6 nats between two faithful readings of the same file, more
than all other positions together. Used for the native engine's int4 reading of a GGUF file against llama.cpp,
and for both against the file's float32 reading (its blocks dequantised, float activations): how far each engine's
rounding of the activations takes it from the model the file holds; and for the native engine's prompt path
(`PromptPath`), which computes a prompt's rows on other kernels.
"""

from __future__ import annotations

import torch
from tqdm import tqdm

from ..models.base import CausalLM


class PromptPath(CausalLM):
    """A native model's prompt path (`NativeLlama.add_prompt_path`) read as a model of its own: every row of a pass
    computed as a prompt row, logits included."""

    def __init__(self, model):
        self.model, self.name, self.vocab_size, self.max_length = model, f"{model.name} prompt path", \
            model.vocab_size, model.max_length

    @property
    def length(self) -> int:
        return self.model.length

    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        return self.model.extend_batch([(self.model, tokens, keep)], [tokens.numel()])[0]

    def rollback(self, length: int) -> None:
        self.model.rollback(length)

    def clear(self) -> None:
        self.model.clear()


def agreements(models: dict[str, CausalLM], pairs: list[tuple[str, str]], texts: list[list[int]],
               progress: bool = True) -> dict[tuple[str, str], dict]:
    """Every model reads each token list once, in one pass from an empty cache; for each (ours, reference) pair of
    names, every position's logits are compared (top-1 agreement, mean KL(reference || ours))."""
    totals = {pair: {"agree": 0, "kl": 0.0} for pair in pairs}
    positions = 0
    for ids in tqdm(texts, desc="teacher-forced passes", unit="text", disable=not progress):
        tokens = torch.tensor(ids)
        logits = {}
        for name, model in models.items():
            model.rollback(0)
            logits[name] = model.extend(tokens)[1:].double()  # [k - 1, V]
        for ours, reference in pairs:
            mine, theirs = logits[ours], logits[reference]
            totals[(ours, reference)]["agree"] += (mine.argmax(-1) == theirs.argmax(-1)).sum().item()
            log_p, log_q = theirs.log_softmax(-1), mine.log_softmax(-1)
            totals[(ours, reference)]["kl"] += (log_p.exp() * (log_p - log_q)).sum().item()
        positions += len(ids) - 1
    return {pair: {"positions": positions, "texts": len(texts), "top1_agreement": total["agree"] / positions,
                   "mean_kl": total["kl"] / positions} for pair, total in totals.items()}


def agreement(ours: CausalLM, reference: CausalLM, texts: list[list[int]], progress: bool = True) -> dict:
    """`agreements` of one model with one reference."""
    return agreements({"ours": ours, "reference": reference}, [("ours", "reference")], texts, progress)[
        ("ours", "reference")]
