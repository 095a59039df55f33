"""Unigram and bigram tables estimated from a text file with the target's tokenizer (paper 3.6: "any guesser works").

The table's lists are real distributions, so each draft token is sampled from q = adjust(log table row) with the
run's own sampling settings, exactly as a draft model's would be.

    unigram   q(x) = count(x) / N
    bigram    q(x | prev) = (count(prev, x) + k q_unigram(x)) / (count(prev) + k)   (k = 2: backs off to unigram)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from ..sampling import SamplingConfig, adjust, sample
from .base import Draft, Proposal

FORMAT = "specdecode-ngram-v1"
BACKOFF = 2.0


class NgramTable:
    """Unigram counts [V] and bigram counts in compressed rows: the next tokens of prev are
    next[indptr[prev]:indptr[prev+1]] with counts count[...]."""

    def __init__(self, unigram: np.ndarray, indptr: np.ndarray, next_ids: np.ndarray, counts: np.ndarray,
                 tokenizer: str):
        self.unigram, self.indptr, self.next_ids, self.counts = unigram, indptr, next_ids, counts
        self.vocab_size = len(unigram)
        self.tokenizer = tokenizer  # fingerprint of the tokenizer that made it
        total = unigram.sum()
        if total == 0:
            raise ValueError("the n-gram table is empty: the corpus had no tokens")
        self.unigram_probs = torch.from_numpy(unigram / total)  # [V] float64
        prev = np.repeat(np.arange(self.vocab_size), np.diff(indptr))
        self.row_totals = np.bincount(prev, weights=counts, minlength=self.vocab_size)  # count(prev)

    @classmethod
    def build(cls, documents: Iterable[list[int]], vocab_size: int, tokenizer: str) -> NgramTable:
        """Count the tokens and adjacent pairs of each document (pairs never cross documents)."""
        unigram = np.zeros(vocab_size, dtype=np.int64)
        pairs = [np.zeros(0, dtype=np.int64)]
        for ids in documents:
            a = np.asarray(ids, dtype=np.int64)
            unigram += np.bincount(a, minlength=vocab_size)
            pairs.append(a[:-1] * vocab_size + a[1:])  # one int64 key per (prev, next) pair
        keys, counts = np.unique(np.concatenate(pairs), return_counts=True)  # sorted by prev, then next
        prev, next_ids = np.divmod(keys, vocab_size)
        indptr = np.zeros(vocab_size + 1, dtype=np.int64)
        np.add.at(indptr, prev + 1, 1)
        return cls(unigram, np.cumsum(indptr), next_ids, counts, tokenizer)

    def save(self, path: str | Path) -> None:
        save_file({"unigram": self.unigram, "indptr": self.indptr, "next": self.next_ids, "count": self.counts},
                  str(path), metadata={"format": FORMAT, "tokenizer": self.tokenizer})

    @classmethod
    def load(cls, path: str | Path) -> NgramTable:
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"n-gram table {str(path)!r} not found (build one with `specdecode ngram build`)")
        try:
            with safe_open(str(path), "np") as f:
                meta = f.metadata() or {}
            tensors = load_file(str(path))
        except Exception:  # safetensors raises its own error types for foreign files
            raise ValueError(f"{str(path)!r} is not an n-gram table made by `specdecode ngram build`") from None
        if meta.get("format") != FORMAT:
            raise ValueError(f"{str(path)!r} is not an n-gram table made by `specdecode ngram build`")
        return cls(tensors["unigram"], tensors["indptr"], tensors["next"], tensors["count"], meta["tokenizer"])

    def bigram_probs(self, prev: int) -> torch.Tensor:
        """q(. | prev) [V] float64, backing off to the unigram list."""
        row = BACKOFF * self.unigram_probs.clone()
        lo, hi = int(self.indptr[prev]), int(self.indptr[prev + 1])
        if hi > lo:
            row[torch.from_numpy(self.next_ids[lo:hi])] += torch.from_numpy(self.counts[lo:hi]).to(row.dtype)
        return row / (BACKOFF + float(self.row_totals[prev]))


class NgramDraft(Draft):
    """A unigram (order 1) or bigram (order 2) table as a draft: gamma tokens, each sampled from its adjusted q."""

    def __init__(self, table: NgramTable, order: int, vocab_size: int | None = None):
        if order not in (1, 2):
            raise ValueError(f"n-gram drafts are unigram (1) or bigram (2), got order {order}")
        self.table, self.order = table, order
        self.vocab_size = vocab_size or table.vocab_size  # a target with padded embeddings gets q = 0 on the pad
        if self.vocab_size < table.vocab_size:
            raise ValueError(f"the n-gram table's vocabulary ({table.vocab_size}) is larger than the target's "
                             f"({self.vocab_size})")
        self.name = "unigram" if order == 1 else "bigram"

    def fork(self, sequence) -> NgramDraft:
        return self  # it keeps no state

    def begin(self, prompt_ids: list[int]) -> None:
        pass

    def propose(
        self, context: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator | None
    ) -> Proposal:
        tokens, rows = [], []
        prev = context[-1]
        for _ in range(gamma):
            probs = self.table.unigram_probs if self.order == 1 else self.table.bigram_probs(prev)
            logits = torch.nn.functional.pad(probs.log(), (0, self.vocab_size - len(probs)), value=-torch.inf)
            q = adjust(logits, sampling)  # the same adjustment the target's p gets
            prev = int(sample(q, generator))
            tokens.append(prev)
            rows.append(q)
        return Proposal(torch.tensor(tokens, dtype=torch.int64), torch.stack(rows).float())
