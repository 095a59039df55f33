"""Prompt lookup first, a draft model otherwise: copy when the text repeats itself, guess when it does not.

Each round asks prompt lookup for a continuation of the context's last tokens (a match of at least `min_ngram`
tokens, so that a single common token does not count); when there is none, the fallback draft proposes. Which one
proposes depends on the context alone, so the proposal is still a function of the context and its q, and the rule
stays exact. The fallback's KV cache catches up with the skipped tokens the next time it is asked.
"""

from __future__ import annotations

import torch

from ..sampling import SamplingConfig
from .base import Draft, Proposal
from .prompt_lookup import PromptLookupDraft


class HybridDraft(Draft):
    def __init__(self, fallback: Draft, max_ngram: int = 3, min_ngram: int = 2):
        self.lookup = PromptLookupDraft(fallback.vocab_size, max_ngram=max_ngram, min_ngram=min_ngram)
        self.fallback = fallback
        self.vocab_size = fallback.vocab_size
        self.name = f"lookup+{fallback.name}"
        self.feature_layers = fallback.feature_layers  # a feature draft must see every pass

    def fork(self, sequence) -> HybridDraft:
        return HybridDraft(self.fallback.fork(sequence), self.lookup.max_ngram, self.lookup.min_ngram)

    def observe(self, features: torch.Tensor) -> None:
        self.fallback.observe(features)

    def begin(self, prompt_ids: list[int]) -> None:
        self.lookup.begin(prompt_ids)
        self.fallback.begin(prompt_ids)

    def clear(self) -> None:
        self.fallback.clear()

    def copies(self, context: list[int]) -> bool:
        return self.lookup.match(context) is not None

    def behind(self, context: list[int]) -> int:
        return self.fallback.behind(context)

    def propose(
        self, context: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator | None
    ) -> Proposal:
        copied = self.lookup.propose(context, gamma, sampling, generator)
        if len(copied.tokens):
            return copied
        return self.fallback.propose(context, gamma, sampling, generator)
