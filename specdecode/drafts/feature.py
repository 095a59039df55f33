"""A feature-level draft: the EAGLE-3 head (models/eagle.py) guessing from the target's own hidden states.

The target keeps the residual stream entering the head's `feature_layers` from every pass (`NativeLlama.features`);
the engine hands the draft those of each position it keeps (`observe`). The head's cache position j holds
(features of position j, embedding of token j + 1), so with n context tokens it can see positions 0 .. n - 2 and the
last one's output is the first draft's distribution. Later drafts run on the head's own output; those positions are
overwritten by the target's features once the verify pass has run.

q is the distribution each draft was sampled from: the head's softmax over its Vd tokens, placed in a V-wide row
(q = 0 elsewhere) and adjusted like p (temperature, top-k, top-p), so the rule stays exact.
"""

from __future__ import annotations

import torch

from ..models.base import CausalLM
from ..models.eagle import EagleHead
from ..models.llama import rotary_tables
from ..models.native import NativeLlama
from ..sampling import SamplingConfig, adjust, sample
from .base import Draft, Proposal


class FeatureDraft(Draft):
    def __init__(self, head: EagleHead, target: CausalLM, name: str = "eagle"):
        """target: the native engine's model, which keeps `features` and has an `embed` [V, D] table."""
        if not isinstance(target, NativeLlama):
            raise ValueError(f"a feature draft needs the target's hidden states, which the {type(target).__name__} "
                             "engine does not give (the native engine does)")
        width = target.embed.shape[1]
        if head.shape.hidden != width or head.shape.vocab_size != target.vocab_size:
            raise ValueError(f"the feature draft was trained for another target (width {head.shape.hidden}, vocabulary "
                             f"{head.shape.vocab_size}; this target: {width}, {target.vocab_size})")
        if max(head.feature_layers) > target.shape.layers:
            raise ValueError(f"the feature draft reads layer {max(head.feature_layers)} of a target that has "
                             f"{target.shape.layers}")
        target.feature_layers = head.feature_layers
        self.head, self.name, self.vocab_size = head, name, target.vocab_size
        self.embed = target.embed  # [V, D], shared with the target
        self.max_length = target.max_length
        s = head.shape
        self.k_cache = torch.zeros(1, s.kv_heads, self.max_length, s.head_dim, dtype=head.dtype)
        self.v_cache = torch.zeros_like(self.k_cache)
        cos, sin = rotary_tables(s, self.max_length)
        self.cos, self.sin = cos.to(head.dtype), sin.to(head.dtype)  # [max_length, hd]
        self.begin([])

    @property
    def feature_layers(self) -> tuple[int, ...]:
        return self.head.feature_layers

    def begin(self, prompt_ids: list[int]) -> None:
        self.fed = 0  # cache positions 0 .. fed - 1 hold target features
        self.pending: list[torch.Tensor] = []  # target features of positions fed .. known - 1, not yet fed
        self.known = 0

    def observe(self, features: torch.Tensor) -> None:
        """features [n, F]: the target's, for the next n positions of the context."""
        self.pending.append(features)
        self.known += features.shape[0]

    def _pass(self, h: torch.Tensor, tokens: list[int], start: int) -> torch.Tensor:
        """h [T, D] at positions start.. with the embeddings of `tokens` (T of them) -> out [T, D]."""
        T, end = h.shape[0], start + h.shape[0]
        embeds = self.embed[torch.tensor(tokens, dtype=torch.int64)].to(self.head.dtype)
        cos, sin = self.cos[start:end][None], self.sin[start:end][None]
        mask = None
        if T > 1:  # causal among the new rows; every cached row is visible
            mask = torch.zeros(T, end, dtype=self.head.dtype)
            mask[:, start:] = torch.full((T, T), -torch.inf, dtype=self.head.dtype).triu(1)
        return self.head.step(h[None], embeds[None], cos, sin, self.k_cache, self.v_cache, start, end, mask)[0]

    def _q(self, out: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
        """out [D] -> q [V]: the head's distribution over its Vd tokens, zero elsewhere, adjusted like p."""
        logits = torch.full((self.vocab_size,), -torch.inf)
        logits[self.head.draft_ids] = self.head.logits(out)
        return adjust(logits, sampling)

    @torch.inference_mode()
    def propose(
        self, context: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator | None
    ) -> Proposal:
        gamma = min(gamma, self.max_length - len(context) + 1)
        if gamma <= 0 or self.known == 0:
            return Proposal.empty(self.vocab_size)
        if self.known != len(context) - 1:
            raise ValueError(f"the feature draft has the target's features of {self.known} positions, but the context "
                             f"needs {len(context) - 1}: the engine must observe every pass")
        if self.pending:  # positions fed .. known - 1, each with the token after it
            features = torch.cat(self.pending).to(self.head.dtype)
            self.last = self._pass(self.head.fuse(features), context[self.fed + 1: self.known + 1], self.fed)[-1]
            self.pending, self.fed = [], self.known
        out = self.last  # [D]: the head's output at the last position the target has seen
        tokens, rows = [], []
        position = self.known  # the next slot: drafts run on the head's own output
        for i in range(gamma):
            q = self._q(out, sampling)
            token = int(sample(q, generator))
            tokens.append(token)
            rows.append(q)
            if i + 1 < gamma:
                out = self._pass(out[None], [token], position)[-1]
                position += 1
        return Proposal(torch.tensor(tokens, dtype=torch.int64), torch.stack(rows), forward_passes=gamma)
