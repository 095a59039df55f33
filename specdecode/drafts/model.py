"""A smaller causal LM as the draft: it samples gamma tokens one at a time from its own adjusted list q."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import torch

from ..models.base import CausalLM
from ..sampling import SamplingConfig, adjust, argmax, check_logits, sample
from .base import Draft, Proposal

# A longer backlog of unseen tokens is a prefill: fed in a pass of its own and timed apart from the round's
# drafting. A shorter one (after a round copied by prompt lookup, or a few plain ones) rides in the round's
# first pass and counts as drafting: a pass of its own would cost a whole draft pass more.
CATCH_UP = 32


def check_confidence(value: float, what: str = "a draft's confidence threshold") -> float:
    """A confidence threshold (`ModelDraft`) is a probability: value, or a one-line ValueError naming `what`."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{what} must be in [0, 1], not {value!r}")
    return value


class ModelDraft(Draft):
    """Wraps any `CausalLM` as a draft, keeping its KV cache in step with the accepted text.

    The draft sees the context from `self.start` on (its view), and its cache holds `self.cached`, a prefix of the
    view. Each round the cache is rolled back to the longest prefix the view still shares (everything after the
    first rejected draft goes), the missing tokens are fed in one pass, and then the gamma drafts are sampled one
    forward pass each. The prompt is fed at the first proposal, not at `begin`: a request that never drafts (plain
    decoding chosen throughout, as under load in the server) never pays the draft's prefill. A backlog of more than
    CATCH_UP tokens is fed apart from the round's first pass and timed as `Proposal.catch_up_seconds`. vocab_size
    may exceed the model's own (q = 0 on the extra ids). Between `begin` calls, each context must extend the
    previous one (as the engine's do).

    A context longer than the draft model's window (`max_length`) does not fit its cache: the draft then drafts from
    the most recent tokens only. When the view and gamma drafts would overflow the window, the view restarts with
    the last window - max(gamma, window / 2) + 1 tokens: one prefill of about half a window, once every half window
    of text. (A prompt longer than the window starts with its last half window.) A proposal may depend on the
    context in any way, so the output stays exact.

    confidence: drafting stops short of gamma after a guess whose top probability is below this (the draft's own
    list: its softmax when greedy, its adjusted q when sampling), as llama.cpp's --draft-p-min and transformers'
    assistant_confidence_threshold do: an unsure guess is likely rejected, and the guesses after it more so, so their
    passes are saved. The guess itself is still proposed (its verify row is cheap). When to stop depends on the
    draft's own lists only, so the output stays exact. 0: always gamma guesses.
    """

    def __init__(self, model: CausalLM, vocab_size: int | None = None, name: str | None = None,
                 confidence: float = 0.0):
        self.model, self.confidence = model, check_confidence(confidence)
        self.vocab_size = vocab_size or model.vocab_size
        if self.vocab_size < model.vocab_size:
            raise ValueError(
                f"the draft's vocabulary ({model.vocab_size}) is larger than the target's ({self.vocab_size})"
            )
        self.name = name or model.name
        self.start = 0  # the view: context[start:]
        self.cached: list[int] = []
        self._synced = 0  # cached[:_synced] is known to equal the view of the last call

    def fork(self, sequence: Callable[[CausalLM], CausalLM]) -> ModelDraft:
        return ModelDraft(sequence(self.model), self.vocab_size, self.name, self.confidence)

    def begin(self, prompt_ids: list[int]) -> None:
        window = self.model.max_length
        fits = window is None or len(prompt_ids) <= window
        self._restart(0 if fits else len(prompt_ids) - max(1, window // 2))

    def clear(self) -> None:
        self.model.clear()

    def _restart(self, start: int) -> None:
        """Empty the cache and view the context from `start` on (fed at the next proposal)."""
        self.model.rollback(0)
        self.start, self.cached, self._synced = start, [], 0

    def _feed(self, tokens: list[int]) -> torch.Tensor:
        """Append tokens to the cache -> the logits row after the last of them, [V] padded to self.vocab_size. Fed
        to an empty cache, they are the view's start: a prompt (`CausalLM.prefill`).

        A target id the draft model lacks is fed as id 0: only the proposal gets worse, never the output.
        """
        ids = torch.tensor(tokens, dtype=torch.int64)
        if self.vocab_size > self.model.vocab_size:
            ids = torch.where(ids < self.model.vocab_size, ids, 0)
        logits = (self.model.extend if self.cached else self.model.prefill)(ids, keep=1)[-1]
        self.cached.extend(tokens)
        pad = self.vocab_size - logits.shape[-1]
        return torch.nn.functional.pad(logits, (0, pad), value=-torch.inf) if pad else logits

    def _common_prefix(self, view: list[int]) -> int:
        """The longest common prefix of the cache and view[:-1] (at least one token must be fed for fresh logits)."""
        limit = min(len(self.cached), len(view) - 1)
        keep = min(self._synced, limit)
        while keep < limit and self.cached[keep] == view[keep]:
            keep += 1
        return keep

    def behind(self, context: list[int]) -> int:
        view = context[self.start:]
        keep = self._common_prefix(view)
        if not self.cached:  # a prompt: the cells the model kept of an earlier one are not fed again (a chat's turns)
            keep = max(keep, self.model.cached(view))
        return max(0, len(view) - 1 - keep)

    def propose(
        self, context: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator | None
    ) -> Proposal:
        window = self.model.max_length
        if window is not None:
            gamma = min(gamma, window)  # the cache ends holding the view and gamma - 1 drafts
            if len(context) - self.start + gamma - 1 > window:  # it would overflow: move the view up
                self._restart(len(context) - (window - max(gamma, window // 2) + 1))
        if gamma <= 0:
            return Proposal.empty(self.vocab_size)
        view = context[self.start:]
        keep = self._common_prefix(view)
        self.model.rollback(keep)
        del self.cached[keep:]

        catch_up = 0.0
        if len(view) - keep > CATCH_UP:
            started = time.perf_counter()
            self._feed(view[keep:-1])
            keep, catch_up = len(view) - 1, time.perf_counter() - started
        self._synced = len(view)
        tokens, rows, passes, fed, stopped = [], [], [], view[keep:], False
        while len(tokens) < gamma and not stopped:  # one pass each: the backlog and the last token, then each draft
            started = time.perf_counter()
            logits = self._feed(fed)  # [V]
            if sampling.greedy:  # q: the point mass on the arg-max (`adjust`'s greedy list), made for all at the end
                token = int(argmax(logits))
                check_logits(logits[token:token + 1])  # the arg-max is finite exactly when the row is usable
                top = float(torch.exp(logits[token] - torch.logsumexp(logits.float(), -1))) if self.confidence > 0 \
                    else 1.0  # the top of its softmax
            else:
                q = adjust(logits, sampling)  # [V]
                token = int(sample(q, generator))
                top = float(q.max()) if self.confidence > 0 else 1.0
                rows.append(q)
            stopped = top < self.confidence and len(tokens) + 1 < gamma
            tokens.append(token)
            passes.append((len(fed), time.perf_counter() - started))
            fed = [token]
        proposal = Proposal.one_hot(tokens, self.vocab_size) if sampling.greedy else \
            Proposal(torch.tensor(tokens, dtype=torch.int64), torch.stack(rows))
        return dataclasses.replace(proposal, forward_passes=len(tokens), catch_up_seconds=catch_up,
                                   pass_times=tuple(passes), stopped=stopped)
