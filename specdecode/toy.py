"""The seed's toy models: two bigram models over an eight-word vocabulary, and the worked example as data.

The target is a bigram table (each next word depends only on the previous one); the draft is the same table
mixed with noise, "deliberately a bit off", so that sum_x min(p, q) >= 0.85 in every row: it agrees 85-100% of
the time. Both satisfy the `CausalLM` protocol, so they run through exactly the engine real models use.

A bigram model's cache is only a length, and it never looks further back than the last word, so it cannot notice
a cache rolled back to the wrong place. `PrefixLM` (and `prefix_pair`) can: its next word depends on every word
before it, and its cache checks itself on every pass.
"""

from __future__ import annotations

import copy

import torch

from .models.base import CausalLM
from .tokenizer import vocabulary_fingerprint

WORDS = ("the", "cat", "dog", "fish", "sat", "ran", "on", "mat")

# Hand-written preferences (row: previous word, column: next word) that read like a children's book.
_PREFERENCES = torch.tensor([
    #  the  cat  dog  fish  sat  ran   on  mat
    [0.2, 3.0, 3.0, 1.5, 0.2, 0.2, 0.2, 2.0],  # the
    [0.5, 0.1, 0.3, 0.3, 3.0, 2.0, 0.5, 0.1],  # cat
    [0.5, 0.3, 0.1, 0.2, 2.0, 3.0, 0.5, 0.1],  # dog
    [0.5, 0.2, 0.2, 0.1, 1.0, 1.0, 0.5, 0.1],  # fish
    [0.5, 0.1, 0.1, 0.1, 0.1, 0.1, 4.0, 0.1],  # sat
    [1.0, 0.1, 0.1, 0.1, 0.1, 0.1, 3.0, 0.1],  # ran
    [4.0, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.5],  # on
    [2.0, 0.2, 0.2, 0.2, 0.5, 0.5, 1.0, 0.1],  # mat
], dtype=torch.float64)

DRAFT_NOISE = 0.15  # q = (1 - 0.15) p + 0.15 r  =>  sum_x min(p, q) >= 0.85 in every row

# The worked example of paper 2.3.
EXAMPLE_WORDS = ("cat", "dog", "fish")
EXAMPLE_P = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
EXAMPLE_Q = torch.tensor([0.6, 0.2, 0.2], dtype=torch.float64)


class _Sequences:
    """Several sequences of one toy model: each a shallow copy sharing the tables, with an empty cache of its own
    (`CausalLM.sequence`). Their passes run in turn (the protocol's `extend_batch`)."""

    sequences = True
    _root = None
    _views: dict

    def sequence(self, index: int) -> CausalLM:
        root = self._root or self
        if index == 0:
            return root
        views = root.__dict__.setdefault("_views", {})
        if index not in views:
            view = copy.copy(root)
            view._root = root
            view._empty()
            views[index] = view
        return views[index]


class BigramLM(_Sequences, CausalLM):
    """A bigram table as a `CausalLM`: logits [k, V] = log table[tokens]. The 'cache' is just a length."""

    max_length = None

    def __init__(self, table: torch.Tensor, name: str):
        self.table = table  # [V, V], rows sum to 1
        self.log_table = table.log().to(torch.float32)
        self.vocab_size = table.shape[0]
        self.name = name
        self._length = 0

    @property
    def length(self) -> int:
        return self._length

    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        self._length += len(tokens)
        return self.log_table[tokens[-keep:] if keep else tokens]

    def rollback(self, length: int) -> None:
        if not 0 <= length <= self._length:
            raise ValueError(f"cannot roll back to {length}: the cache holds {self._length} tokens")
        self._length = length

    def _empty(self) -> None:
        self._length = 0


class ToyTokenizer:
    """A `Tokenizer` for the eight-word vocabulary (whitespace-separated words; no chat template: chat messages are
    their contents joined)."""

    stop_token_ids: list[int] = []
    has_chat_template = False

    def __init__(self, words: tuple[str, ...] = WORDS):
        self.words = words
        self.vocab = {w: i for i, w in enumerate(words)}

    def encode(self, text: str, chat: bool = True) -> list[int]:
        unknown = [w for w in text.split() if w not in self.vocab]
        if unknown:
            raise ValueError(f"unknown word {unknown[0]!r}: the toy vocabulary is {' '.join(self.words)}")
        return [self.vocab[w] for w in text.split()]

    def encode_chat(self, messages: list[dict]) -> list[int]:
        return self.encode(" ".join(m["content"] for m in messages))

    def fingerprint(self) -> str:
        return vocabulary_fingerprint(self.vocab)

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(self.piece(i) for i in ids)

    def piece(self, token: int) -> str:
        return " " + self.words[token]

    def token_bytes(self, token: int) -> bytes:
        return self.piece(token).encode()

    def text_bytes(self, ids: list[int]) -> bytes:
        return self.decode(ids).encode()


def bigram_tables(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(target table p, draft table q), each [8, 8] float64 with rows summing to 1."""
    g = torch.Generator().manual_seed(seed)
    jitter = torch.exp(0.25 * torch.randn(8, 8, generator=g, dtype=torch.float64))  # a seed-dependent variant
    target = _PREFERENCES * jitter
    noise = torch.rand(8, 8, generator=g, dtype=torch.float64) ** 2
    target = target / target.sum(dim=1, keepdim=True)
    noise = noise / noise.sum(dim=1, keepdim=True)
    draft = (1 - DRAFT_NOISE) * target + DRAFT_NOISE * noise
    return target, draft


def bigram_pair(seed: int = 0) -> tuple[BigramLM, BigramLM]:
    """(target, draft) toy bigram models of the seed's "Try it" figure."""
    p, q = bigram_tables(seed)
    return BigramLM(p, "toy-bigram-target"), BigramLM(q, "toy-bigram-draft")


NOISE_ROWS = 4096  # distinct prefix-dependent logit offsets of a PrefixLM


class PrefixLM(_Sequences, CausalLM):
    """A toy `CausalLM` whose next word depends on the whole prefix, with a cache that checks itself.

    logits after w_1 .. w_i = log table[w_i] + offsets[h_i], where h_i is a hash of every word w_1 .. w_i and
    offsets [NOISE_ROWS, V] are Gaussian with standard deviation `noise`. So a cache that holds one token too many or
    too few (a rollback to the wrong place) gives different logits, where a bigram model would not notice. The cache
    keeps each token and the hash after it; every extend and rollback checks that each hash follows from the tokens
    before it, and `max_length` (None: unbounded) is enforced, as a real model's position table would.
    """

    def __init__(self, table: torch.Tensor, name: str, noise: float = 1.0, noise_seed: int = 0,
                 max_length: int | None = None):
        self.table = table  # [V, V], rows sum to 1
        self.log_table = table.log().to(torch.float32)
        self.vocab_size = table.shape[0]
        self.name, self.max_length = name, max_length
        g = torch.Generator().manual_seed(noise_seed)
        self.offsets = noise * torch.randn(NOISE_ROWS, self.vocab_size, generator=g)  # [NOISE_ROWS, V] float32
        self.tokens: list[int] = []
        self._hashes: list[int] = []  # _hashes[i]: the hash of tokens[:i + 1]

    @property
    def length(self) -> int:
        return len(self.tokens)

    @staticmethod
    def _mix(h: int, token: int) -> int:
        return ((h ^ (token + 1)) * 0x100000001B3) % 2**64  # FNV-1a's step over whole tokens

    def _check(self) -> None:
        h = 0
        for token, cached in zip(self.tokens, self._hashes, strict=True):
            h = self._mix(h, token)
            if h != cached:
                raise AssertionError(f"{self.name}: the cache's state does not follow from its tokens")

    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        new = tokens.tolist()
        if self.max_length is not None and self.length + len(new) > self.max_length:
            raise IndexError(f"{self.name}: {self.length} + {len(new)} tokens do not fit the context window "
                             f"({self.max_length})")
        h = self._hashes[-1] if self._hashes else 0
        for token in new:
            h = self._mix(h, token)
            self.tokens.append(token)
            self._hashes.append(h)
        self._check()
        rows = torch.tensor([h % NOISE_ROWS for h in self._hashes[-len(new):]])
        logits = self.log_table[tokens] + self.offsets[rows]  # [k, V]
        return logits[-keep:] if keep else logits

    def rollback(self, length: int) -> None:
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot roll back to {length}: the cache holds {self.length} tokens")
        del self.tokens[length:], self._hashes[length:]
        self._check()

    def _empty(self) -> None:
        self.tokens, self._hashes = [], []


def prefix_pair(seed: int = 0, noise: float = 1.0) -> tuple[PrefixLM, PrefixLM]:
    """(target, draft) PrefixLMs: the bigram pair's tables with the same prefix-dependent offsets, so that the draft
    is a noisy copy of the target that is accepted most of the time."""
    p, q = bigram_tables(seed)
    return (PrefixLM(p, "toy-prefix-target", noise, noise_seed=seed),
            PrefixLM(q, "toy-prefix-draft", noise, noise_seed=seed))
