"""The draft protocol: one small interface for every kind of guesser (a smaller model, prompt lookup, n-gram tables).

A draft proposes up to gamma tokens after the current context, each with the distribution q it was drawn from. A
deterministic draft (prompt lookup, an argmax model) reports a one-hot q; the rule then stays exact with no special
case. A draft may propose fewer than gamma tokens, even none: the round is then an ordinary target step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from ..models.base import CausalLM
from ..sampling import SamplingConfig


@dataclass
class Proposal:
    tokens: torch.Tensor  # [g] int64, g <= gamma
    probs: torch.Tensor  # [g, V] float: row i is the q that tokens[i] was drawn from
    forward_passes: int = 0  # draft model calls spent on this proposal (0 for model-free drafts)
    # time spent feeding the draft model text it had not yet seen, beyond its first pass of the round (its deferred
    # prompt prefill, or a long stretch decoded without it): prefill, not a cost of drafting
    catch_up_seconds: float = 0.0
    # (tokens fed, seconds) of each of the round's draft passes, its sampling included, where the draft times them
    # (`ModelDraft`): what adaptive gamma fits the draft's T_d(k) to, so that the tokens a first pass feeds besides
    # its own (text decoded or copied without the draft) are priced per token, not as a dearer draft pass
    pass_times: tuple[tuple[int, float], ...] = ()
    # the draft stopped short of gamma on its own: its last guess's top probability fell below its confidence
    # threshold (`ModelDraft`), so that adaptive gamma learns how often its rounds end that way
    stopped: bool = False

    @staticmethod
    def empty(vocab_size: int) -> Proposal:
        return Proposal(torch.empty(0, dtype=torch.int64), torch.empty(0, vocab_size))

    @staticmethod
    def one_hot(tokens: list[int], vocab_size: int) -> Proposal:
        """A deterministic proposal: q is a point mass on each proposed token."""
        ids = torch.tensor(tokens, dtype=torch.int64)
        return Proposal(ids, torch.zeros(len(tokens), vocab_size).scatter_(1, ids.unsqueeze(1), 1.0))


@runtime_checkable
class Draft(Protocol):
    """A draft subclasses `Draft` and defines name, vocab_size, begin and propose; a feature draft (drafts/feature.py)
    also sets feature_layers and overrides observe."""

    name: str  # shown by the CLI and the server
    vocab_size: int  # must equal the target's V (a smaller draft vocabulary is padded with q = 0 by its adapter)
    feature_layers: tuple[int, ...] = ()  # the target layers whose features it reads; () for a draft that reads none

    def begin(self, prompt_ids: list[int]) -> None:
        """Start a new sequence with this prompt (drop any state of an earlier one)."""
        ...

    def propose(
        self, context: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator | None
    ) -> Proposal:
        """Propose up to gamma tokens to follow context (the prompt and every token generated so far)."""
        ...

    def clear(self) -> None:
        """Forget anything kept for reuse between sequences (a model's cached cells): a cold start."""

    def copies(self, context: list[int]) -> bool:
        """Whether this round's proposal would be copied from the context (prompt lookup's, no draft pass: only its
        verify rows cost), so that adaptive gamma prices it apart from a model's guesses."""
        return False

    def behind(self, context: list[int]) -> int:
        """Tokens of the context its model has not yet seen, to feed before its next guess: a deferred prompt
        prefill, or text decoded or copied without it (0 for drafts that keep no cache). Adaptive gamma prices
        the catch-up they cost (`AdaptiveGamma.choose`, the server's allotment)."""
        return 0

    def fork(self, sequence: Callable[[CausalLM], CausalLM]) -> Draft:
        """A draft like this one with state of its own, to draft for another sequence served beside this one's:
        every model it drafts with is replaced by sequence(model), a view of it with a cache of its own. Drafts
        that cannot (a feature draft reads one target's hidden states) raise ValueError."""
        raise ValueError(f"the {self.name} draft cannot draft for several sequences at once")

    def observe(self, features: torch.Tensor) -> None:
        """features [n, F]: the target's, for the next n positions of the context (only when feature_layers is set:
        the engine then hands over those of every position it keeps)."""
