"""The model protocol: the least a causal language model must do for the engine.

A model holds a cache of the tokens it has seen. `extend` appends k tokens and returns k rows of next-token logits in
one forward pass (prefill is just extending an empty cache); `rollback` forgets the tail of the cache after a
rejection. Toy models, the transformers adapter and the native Llama path all satisfy it unchanged, so the engine
never knows which one it talks to.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class CausalLM(Protocol):
    name: str
    vocab_size: int  # V: the width of every logits row
    max_length: int | None  # the context window in tokens; None when unbounded

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
