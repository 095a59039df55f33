"""The model protocol: the least a causal language model must do for the engine.

A model holds a cache of the tokens it has seen. `extend` appends k tokens and returns k rows of next-token logits in
one forward pass (prefill is just extending an empty cache); `rollback` forgets the tail of the cache after a
rejection. Toy models, the transformers adapter, the native Llama path and llama.cpp all satisfy it unchanged, so
the engine never knows which one it talks to.

Every member the loop, the server and the bench read is declared here. A model subclasses `CausalLM` and defines the
required ones (name, vocab_size, max_length, length, extend, rollback); the optional capabilities below have their
defaults here, once, and an engine that has them overrides them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch

VERIFY_SLOPE = 0.06  # T(k) / T(1) - 1 per extra token: the native engine's, as measured on the CPUs seen


@runtime_checkable
class CausalLM(Protocol):
    name: str
    vocab_size: int  # V: the width of every logits row
    max_length: int | None  # the context window in tokens; None when unbounded

    # Optional capabilities, with their defaults.
    verify_slope: float = VERIFY_SLOPE  # adaptive gamma's prior for what each extra verified token costs
    torch_threads: int | None = None  # torch's threads while this model runs (None: as set; llama.cpp wants 1)
    batch_invariant: bool = False  # whether a k-token pass gives bitwise the rows of k 1-token passes
    feature_layers: tuple[int, ...] = ()  # layers whose incoming residual stream each pass keeps (a feature draft's)
    features: torch.Tensor | None = None  # [k, F]: those of the last pass's k tokens, when feature_layers is set
    sequences: bool = False  # whether `sequence` gives more sequences, each with a cache of its own
    prompt_chunk: int | None = None  # a prompt path's pieces end at cells that are multiples of this (`prefill`)

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights one pass reads (0: not known)."""
        return 0

    def clear(self) -> None:
        """Empty the cache and anything kept for reuse, as a cold start (the bench starts every method so)."""
        self.rollback(0)

    def cached(self, prompt: Sequence[int]) -> int:
        """How many of a prompt's leading tokens a prefill from an empty cache would not compute again, their cells
        kept from an earlier one (a chat's earlier turns; the last token is always computed: its logits are
        wanted). 0 where nothing is kept."""
        return 0

    @property
    def length(self) -> int:
        """How many tokens the cache holds."""
        ...

    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        """Append tokens [k] (int64, k >= 1) to the cache -> logits [k, V]: row i predicts the token after tokens[i].

        keep: return only the last `keep` rows (a prefill needs none of them; a draft needs the last one).
        """
        ...

    def rollback(self, length: int) -> None:
        """Keep only the first `length` cached tokens (0 <= length <= self.length)."""
        ...

    def prefill(self, tokens: torch.Tensor, keep: int | None = 1) -> torch.Tensor:
        """`extend` by a prompt: its first `prompt_rows(tokens, keep)` rows, context whose logits nobody reads, are
        prompt rows, which an engine may compute on a path of its own (`NativeLlama.add_prompt_path`): a row's path
        follows its role, never the pass it is in. This default: `extend`."""
        return self.extend(tokens, keep)

    def prompt_rows(self, tokens: torch.Tensor, keep: int | None) -> int:
        """How many of `prefill(tokens, keep)`'s rows are prompt rows: 0, or those before the last `keep` where the
        engine has a prompt path that pays for that many."""
        return 0

    def sequence(self, index: int) -> CausalLM:
        """Sequence `index` of this model (0: itself): a view with a cache of its own on the same weights, when
        `sequences` is set. Engines that keep one cache have only sequence 0."""
        if index != 0:
            raise ValueError(f"{self.name} keeps one cache: it serves one sequence at a time")
        return self

    def extend_batch(self, parts: list[tuple[CausalLM, torch.Tensor, int | None]],
                     prompt_rows: Sequence[int] | None = None) -> list[torch.Tensor]:
        """Extend several of this model's sequences: parts [(sequence, tokens [k], keep)] -> logits per part, as
        each sequence's `extend` gives them. prompt_rows: per part, how many of its leading rows are prompt rows (as
        `prefill` marks them; None: none), for an engine with a prompt path. An engine that can runs the parts in
        one pass; this default runs each in turn, and has no prompt path."""
        return [sequence.extend(tokens, keep) for sequence, tokens, keep in parts]

