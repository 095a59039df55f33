"""Prompt lookup: propose what followed the latest earlier occurrence of the context's last n tokens.

Model-free and deterministic (a one-hot q), so the rule stays exact with no special case. It shines when the output
copies from the prompt: code editing, summaries, quoting.
"""

from __future__ import annotations

import torch

from ..sampling import SamplingConfig
from .base import Draft, Proposal


class PromptLookupDraft(Draft):
    """Matches the last max_ngram .. min_ngram tokens (longest first) against an incremental n-gram index."""

    def __init__(self, vocab_size: int, max_ngram: int = 3, min_ngram: int = 1):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"prompt lookup needs 1 <= min n-gram <= max n-gram, got {min_ngram} and {max_ngram}")
        self.vocab_size = vocab_size
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.name = "prompt-lookup"
        self._index: dict[tuple[int, ...], int] = {}  # n-gram -> where its latest continuation starts
        self._context: list[int] = []

    def fork(self, sequence) -> PromptLookupDraft:
        return PromptLookupDraft(self.vocab_size, self.max_ngram, self.min_ngram)

    def begin(self, prompt_ids: list[int]) -> None:
        self._index.clear()
        self._context = []

    def _catch_up(self, context: list[int]) -> None:
        """Index every n-gram of context that has a following token (contexts only grow between begin() calls)."""
        if context[: len(self._context)] != self._context:  # not an extension: start over
            self.begin(context)
        for end in range(max(len(self._context), 1), len(context)):  # n-gram context[end-n:end] -> continuation end
            for n in range(self.min_ngram, min(self.max_ngram, end) + 1):
                self._index[tuple(context[end - n: end])] = end
        self._context = list(context)

    def match(self, context: list[int]) -> int | None:
        """Where the continuation of the longest matching n-gram of context's end starts in context, or None."""
        self._catch_up(context)
        for n in range(min(self.max_ngram, len(context)), self.min_ngram - 1, -1):
            start = self._index.get(tuple(context[-n:]))
            if start is not None:
                return start
        return None

    def copies(self, context: list[int]) -> bool:
        return True  # it never runs a model, match or not

    def propose(
        self, context: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator | None
    ) -> Proposal:
        start = self.match(context)
        if start is None:
            return Proposal.empty(self.vocab_size)
        return Proposal.one_hot(context[start: start + gamma], self.vocab_size)
