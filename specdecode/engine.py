"""The loop (paper 2.1): draft gamma tokens, verify them in ONE target pass, keep the accepted prefix plus one
corrected or bonus token, roll the caches back, repeat.

Cache invariant: before every round the target has seen every token of the context except the last one. A round
feeds [last token, d_1 .. d_g] (g + 1 tokens, one forward pass) and gets the g + 1 rows of p it needs; after n
drafts are accepted it rolls back to keep [last, d_1 .. d_n], and the new last token is the corrected or bonus one.
Plain decoding is the same loop with g = 0. The first round is the prompt's prefill: its last row chooses the first
token (no draft), so the first token costs no pass beyond the prefill.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

from .adaptive import AdaptiveGamma
from .analysis import acceptance_rate, check_gamma
from .drafts.base import Draft, Proposal
from .drafts.model import ModelDraft
from .models.base import CausalLM
from .rule import verify, verify_greedy
from .sampling import SamplingConfig, adjust, check_logits, log_probs, seeded
from .stops import StopStrings
from .tokenizer import Tokenizer

StopReason = Literal["length", "stop_token", "stop_string", "context"]


@dataclass
class TokenLogprob:
    """An emitted token's log-probability under the target's adjusted list at its position (from the pass that
    verified it, drafted or not; `sampling.log_probs`), and the most likely tokens there: [(token, logprob)]."""

    token: int
    logprob: float
    top: list[tuple[int, float]]


@dataclass
class Round:
    """What one round did. `emitted` is what it added to the output (trimmed at max_new_tokens, a stop token or a
    stop string); `logprobs`, one per emitted token, when the generation was asked for them."""

    drafted: list[int]
    n_accepted: int
    next_token: int  # the corrected token (after a rejection) or the bonus token (all drafts accepted)
    emitted: list[int]
    logprobs: list[TokenLogprob] = field(default_factory=list)

    @property
    def kind(self) -> Literal["corrected", "bonus"]:
        return "bonus" if self.n_accepted == len(self.drafted) else "corrected"

    def labelled(self) -> list[tuple[int, str]]:
        """(token, "accepted" | "rejected" | "corrected" | "bonus") for showing the round: the accepted drafts, the
        rejected draft if any, then the target's own token; cut short like the output when the run ended inside the
        accepted drafts."""
        n = self.n_accepted
        parts = [(t, "accepted") for t in self.drafted[:n]]
        if n < len(self.drafted):
            parts.append((self.drafted[n], "rejected"))
        parts.append((self.next_token, self.kind))
        return parts[: len(self.emitted)] if len(self.emitted) <= n else parts


@dataclass
class GenerationStats:
    """Counters of one run. target_calls counts the target passes that chose tokens, one per round: the first round is
    the prompt's prefill, whose last row chooses the first token (its time is prefill_seconds, not target_seconds)."""

    gamma: int = 0  # the largest gamma any round used
    rounds: int = 0
    target_calls: int = 0
    draft_calls: int = 0  # draft model forward passes (0 for model-free drafts)
    tokens_drafted: int = 0
    tokens_accepted: int = 0
    rejections: int = 0  # rounds that ended with a rejected draft (the others ended with a bonus token)
    stopped_rounds: int = 0  # rounds whose draft stopped short of gamma on its own (`ModelDraft`'s confidence)
    new_tokens: int = 0
    tested_at: list[int] = field(default_factory=list)  # per draft position: how often the rule looked at it
    accepted_at: list[int] = field(default_factory=list)  # per draft position: how often it was accepted
    accepted_per_round: list[int] = field(default_factory=list)
    drafted_per_round: list[int] = field(default_factory=list)
    passes_per_round: list[int] = field(default_factory=list)  # draft model passes (0: a copy, or no draft)
    seconds: float = 0.0  # wall clock of the whole run, prefill included
    prefill_seconds: float = 0.0
    prefill_rounds: int = 0  # 1 when the first token came from the prefill (a round with no draft)
    target_seconds: float = 0.0  # time in target decoding passes (the prefill's apart)
    draft_seconds: float = 0.0  # time in draft proposals

    @property
    def alpha(self) -> float | None:
        """Measured acceptance rate (`analysis.acceptance_rate`); None when no draft was ever judged."""
        return acceptance_rate(self.tokens_accepted, self.rejections)

    @property
    def tokens_per_target_call(self) -> float:
        return self.new_tokens / self.target_calls if self.target_calls else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def acceptance_by_position(self) -> list[float | None]:
        return [a / t if t else None for a, t in zip(self.accepted_at, self.tested_at, strict=True)]

    @property
    def decoding_calls(self) -> int:
        """Target passes after the prefill's (one per decoding round): those target_seconds times."""
        return self.target_calls - self.prefill_rounds

    @property
    def draft_cost(self) -> float | None:
        """Measured c: time of one draft forward pass over time of one target decoding pass."""
        if not self.draft_calls or not self.decoding_calls or not self.target_seconds:
            return None
        return (self.draft_seconds / self.draft_calls) / (self.target_seconds / self.decoding_calls)

    def record(self, proposal: Proposal, n_accepted: int, n_emitted: int) -> None:
        """Count a round by what it emitted: when the output ended inside the accepted drafts (a stop token or stop
        string), the drafts after the end were never used, so they count neither as accepted nor as judged."""
        g = len(proposal.tokens)
        if n_emitted <= n_accepted:
            n_accepted, judged = n_emitted, n_emitted
        else:
            judged = min(n_accepted + 1, g)
        self.rounds += 1
        self.target_calls += 1
        self.draft_calls += proposal.forward_passes
        self.tokens_drafted += g
        self.tokens_accepted += n_accepted
        self.rejections += int(judged > n_accepted)
        self.stopped_rounds += int(proposal.stopped)
        self.gamma = max(self.gamma, g)
        if len(self.tested_at) < g:
            grow = g - len(self.tested_at)
            self.tested_at += [0] * grow
            self.accepted_at += [0] * grow
        for i in range(judged):
            self.tested_at[i] += 1
        for i in range(n_accepted):
            self.accepted_at[i] += 1
        self.accepted_per_round.append(n_accepted)
        self.drafted_per_round.append(g)
        self.passes_per_round.append(proposal.forward_passes)

    @classmethod
    def total(cls, runs: Sequence[GenerationStats]) -> GenerationStats:
        """The counters of several runs added up (their rounds one after the other); one run is itself."""
        if len(runs) == 1:
            return runs[0]
        total = cls()
        for run in runs:
            for f in dataclasses.fields(cls):
                mine, theirs = getattr(total, f.name), getattr(run, f.name)
                if f.name == "gamma":
                    total.gamma = max(mine, theirs)
                elif f.name in ("tested_at", "accepted_at"):  # per draft position
                    longer, shorter = (mine, theirs) if len(mine) >= len(theirs) else (theirs, mine)
                    setattr(total, f.name, [a + b for a, b in itertools.zip_longest(longer, shorter, fillvalue=0)])
                else:  # counts, seconds, and per-round lists (joined)
                    setattr(total, f.name, mine + theirs)
        return total

    def as_dict(self) -> dict:
        """Every counter and derived figure, JSON-ready."""
        decoding = self.decoding_calls
        return dataclasses.asdict(self) | {
            "alpha": self.alpha, "tokens_per_target_call": self.tokens_per_target_call,
            "tokens_per_second": self.tokens_per_second, "acceptance_by_position": self.acceptance_by_position,
            "draft_cost": self.draft_cost, "mean_gamma": self.tokens_drafted / decoding if decoding else 0.0,
        }


@dataclass
class GenerationResult:
    new_tokens: list[int]
    stats: GenerationStats
    stop_reason: StopReason
    rounds: list[Round]
    text: str | None = None  # the decoded output, cut before a stop string (when given a tokenizer)
    logprobs: list[TokenLogprob] | None = None  # one per new token (when asked for)


class Generation:
    """One decoding run. Iterate it to get each `Round` as it happens (for streaming); or call `run()`.

    Arguments are checked when it is built, so bad input fails before any model work.
    """

    def __init__(
        self,
        target: CausalLM,
        draft: Draft | CausalLM | None,
        prompt_ids: Sequence[int] | torch.Tensor,
        *,
        max_new_tokens: int,
        gamma: int | str | AdaptiveGamma = 5,
        sampling: SamplingConfig | None = None,
        seed: int | None = None,
        stop_token_ids: Sequence[int] = (),
        stop: str | Sequence[str] = (),
        tokenizer: Tokenizer | None = None,
        logprobs: int | None = None,
        first_from_prefill: bool = True,
    ):
        """The one signature of a run's options (keyword-only; `generate` and `generate_plain` pass them on).

        gamma: drafts per round, or "auto" (an `AdaptiveGamma` chooses each round; pass your own instance to
        keep what it learned across runs); without a draft it is unused. With a seed, "auto" uses
        `AdaptiveGamma.reproducible()`, whose schedule does not depend on timings, so that the seed reproduces the
        text (except where any schedule gives the same text: `timing_free`).

        first_from_prefill: the prefill's last row chooses the first token, in a round with no draft (so the first
        token costs no pass beyond the prefill, as in plain decoding); False: the prompt's last token waits for the
        first round, which drafts (the page's one-round figure).

        stop: stop strings (`stops.StopStrings`), matched on the text `tokenizer` decodes; the tokenizer also gives
        `text()`. logprobs: report each new token's log-probability and this many most likely alternatives."""
        self.prompt = _check_prompt(prompt_ids, target)
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
        if draft is not None and (draft is target or isinstance(draft, ModelDraft) and draft.model is target):
            raise ValueError("the draft is the target model itself: the two would share one cache; load a second "
                             "copy of the model to draft with it")
        if draft is not None and not isinstance(draft, Draft):
            if not isinstance(draft, CausalLM):
                raise ValueError(f"draft must be a Draft or a CausalLM, got {type(draft).__name__}")
            draft = ModelDraft(draft)  # a bare model drafts by sampling from its own q
        self.sampling = sampling if sampling is not None else SamplingConfig()
        if not isinstance(self.sampling, SamplingConfig):
            raise ValueError(f"sampling must be a SamplingConfig, got {type(self.sampling).__name__}")
        self.controller = None
        if draft is not None:
            if gamma == "auto":
                gamma = AdaptiveGamma.reproducible(slope=target.verify_slope) \
                    if timing_free(seed, self.sampling, target) else AdaptiveGamma.for_target(target)
            if isinstance(gamma, AdaptiveGamma):
                self.controller, gamma = gamma, gamma.max_gamma
            else:
                check_gamma(gamma, auto=True)
            if draft.vocab_size != target.vocab_size:
                raise ValueError(
                    f"target and draft vocabularies differ in size: target {target.vocab_size}, "
                    f"draft {draft.vocab_size}"
                )
        # A feature draft (drafts/feature.py) reads the target's hidden states of every position it keeps.
        self.observe = draft.observe if draft is not None and draft.feature_layers else None
        if self.observe and target.feature_layers != draft.feature_layers:
            raise ValueError("the feature draft was built for another target object: build it with this one")
        self.target, self.draft = target, draft
        self.max_new_tokens = max_new_tokens
        self.gamma = gamma if draft is not None else 0
        self.generator = seeded(seed) if seed is not None else None
        self.stop_token_ids = frozenset(int(t) for t in stop_token_ids)
        if stop and tokenizer is None:
            raise ValueError("stop strings need the tokenizer, to match them on the decoded text")
        self.stops = StopStrings(tokenizer, stop) if tokenizer is not None else None
        if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int)
                                     or not 0 <= logprobs <= target.vocab_size):
            raise ValueError(f"logprobs must be an integer in 0..{target.vocab_size} or None, got {logprobs!r}")
        self.top_logprobs = logprobs
        self.first_from_prefill = first_from_prefill
        self.logprobs: list[TokenLogprob] = []
        self.new_tokens: list[int] = []
        self.stats = GenerationStats()
        self.stop_reason: StopReason = "length"

    def __iter__(self) -> Iterator[Round]:
        start = time.perf_counter()
        target, draft, stats = self.target, self.draft, self.stats
        context = list(self.prompt)
        target.rollback(0)
        empty = Proposal.empty(target.vocab_size)
        try:
            # The prefill's last row chooses the first token: a round with no draft (none when no token is asked).
            prefill = context if self.first_from_prefill else context[:-1]
            logits = target.prefill(torch.tensor(prefill), keep=1) if prefill and self.max_new_tokens else None
            if draft is not None:
                draft.begin(list(self.prompt))
            if self.observe and logits is not None:
                self.observe(target.features)
            stats.prefill_seconds = time.perf_counter() - start
            if logits is not None and self.first_from_prefill:
                stats.prefill_rounds = 1
                yield self._close(logits, [], empty, *self._judge(logits, empty), context)
            while len(self.new_tokens) < self.max_new_tokens and self.stop_reason not in ("stop_token", "stop_string"):
                room = target.max_length - len(context) if target.max_length else self.max_new_tokens
                if room < 0:
                    self.stop_reason = "context"
                    break
                # Never draft past what the output or the context window can still take.
                copied = draft is not None and draft.copies(context)  # prompt lookup's match: no draft pass
                if self.controller:
                    behind = draft.behind(context) if draft is not None and not copied else 0
                    wanted = self.controller.choose(copied, behind, self.max_new_tokens - len(self.new_tokens))
                else:
                    wanted = self.gamma
                gamma = min(wanted, self.max_new_tokens - len(self.new_tokens) - 1, room)
                t0 = time.perf_counter()
                proposal = draft.propose(context, gamma, self.sampling, self.generator) if gamma > 0 else empty
                t1 = time.perf_counter()
                drafted = proposal.tokens.tolist()
                logits = target.extend(torch.tensor([context[-1], *drafted], dtype=torch.int64))  # [g+1, V]
                n_accepted, next_token = self._judge(logits, proposal)
                target.rollback(target.length - len(drafted) + n_accepted)
                if self.observe:
                    self.observe(target.features[: n_accepted + 1])
                t2 = time.perf_counter()
                drafting = t1 - t0 - proposal.catch_up_seconds  # the draft's prompt prefill counts as prefill
                stats.target_seconds += t2 - t1
                stats.draft_seconds += drafting
                stats.prefill_seconds += proposal.catch_up_seconds
                if self.controller:
                    self.controller.update(len(drafted), n_accepted, t2 - t1, drafting, proposal.forward_passes,
                                           copied and not proposal.forward_passes, pass_times=proposal.pass_times,
                                           stopped=proposal.stopped)
                yield self._close(logits, drafted, proposal, n_accepted, next_token, context)
        finally:
            stats.new_tokens = len(self.new_tokens)
            stats.seconds = time.perf_counter() - start

    def _judge(self, logits: torch.Tensor, proposal: Proposal) -> tuple[int, int]:
        """The rule on one round: logits [g + 1, V] of the target after the context and each draft -> (drafts
        accepted, the corrected or bonus token)."""
        if self.sampling.greedy:  # the same rule with p a point mass, without building p
            check_logits(logits)
            return verify_greedy(logits, proposal.tokens)
        p = adjust(logits, self.sampling)
        n, token = verify(p[None], proposal.probs[None].to(p.dtype), proposal.tokens[None], self.generator)
        return int(n), int(token)

    def _close(self, logits: torch.Tensor, drafted: list[int], proposal: Proposal, n_accepted: int, next_token: int,
               context: list[int]) -> Round:
        """Emit a judged round's tokens (extending context), count it, score it -> its `Round`."""
        emitted = self._emit([*drafted[:n_accepted], next_token])
        self.stats.record(proposal, n_accepted, len(emitted))
        context += emitted
        scored = self._score(logits[: len(emitted)], emitted) if self.top_logprobs is not None else []
        self.logprobs += scored
        return Round(drafted, n_accepted, next_token, emitted, scored)

    def _emit(self, tokens: list[int]) -> list[int]:
        """Append a round's tokens to the output, trimmed at max_new_tokens, after the first stop token and after the
        token that completes a stop string."""
        tokens = tokens[: self.max_new_tokens - len(self.new_tokens)]
        for i, t in enumerate(tokens):
            if t in self.stop_token_ids:
                tokens = tokens[: i + 1]
                self.stop_reason = "stop_token"
                break
        before = len(self.new_tokens)
        self.new_tokens += tokens
        end = self.stops.end(self.new_tokens, before) if self.stops is not None else None
        if end is not None:
            del self.new_tokens[end:]
            tokens = tokens[: end - before]
            self.stop_reason = "stop_string"
        return tokens

    def _score(self, logits: torch.Tensor, emitted: list[int]) -> list[TokenLogprob]:
        """logits [m, V], the rows that chose the m emitted tokens -> their `TokenLogprob`s."""
        rows = log_probs(logits, self.sampling)  # [m, V]
        chosen = rows.gather(1, torch.tensor(emitted, dtype=torch.int64)[:, None])[:, 0].tolist()  # [m]
        values, tokens = torch.topk(rows, self.top_logprobs, dim=-1)  # [m, top] each
        return [TokenLogprob(t, lp, [(int(a), float(v)) for a, v in zip(ts, vs, strict=True) if v > -torch.inf])
                for t, lp, ts, vs in zip(emitted, chosen, tokens.tolist(), values.tolist(), strict=True)]

    def text(self, final: bool = True) -> str:
        """The output as text (needs the tokenizer), cut before a stop string; not final (still growing): without
        the tail that might yet become a stop string or a character, as a stream may show it."""
        if self.stops is None:
            raise ValueError("the output's text needs the tokenizer: give Generation one")
        return self.stops.text(self.new_tokens, final)

    def run(self) -> GenerationResult:
        rounds = list(self)
        return GenerationResult(self.new_tokens, self.stats, self.stop_reason, rounds,
                                self.text() if self.stops is not None else None,
                                self.logprobs if self.top_logprobs is not None else None)


def timing_free(seed: int | None, sampling: SamplingConfig, target: CausalLM) -> bool:
    """Whether gamma "auto" must follow a schedule that timings do not change: with a seed, whose text must repeat,
    unless the text is plain greedy decoding's whatever the schedule (greedy on a batch-invariant target)."""
    return seed is not None and not (sampling.greedy and target.batch_invariant)


def generate(target: CausalLM, draft: Draft | CausalLM, prompt_ids: Sequence[int] | torch.Tensor,
             **options) -> GenerationResult:
    """Speculative decoding: the output is distributed exactly as `generate_plain`'s (greedy: the same tokens), and
    so are its logprobs. options: `Generation`'s keyword options (max_new_tokens, gamma, sampling, seed, ...)."""
    return Generation(target, draft, prompt_ids, **options).run()


def generate_plain(target: CausalLM, prompt_ids: Sequence[int] | torch.Tensor, **options) -> GenerationResult:
    """Ordinary decoding, one target pass per token, through the same loop and sampling: the honest baseline.
    options: `Generation`'s keyword options, less gamma (there is no draft)."""
    if "gamma" in options:
        raise TypeError("generate_plain() takes no gamma: plain decoding drafts nothing")
    return Generation(target, None, prompt_ids, **options).run()


def _check_prompt(prompt_ids: Sequence[int] | torch.Tensor, target: CausalLM) -> list[int]:
    if isinstance(prompt_ids, torch.Tensor):
        if prompt_ids.dim() != 1 or prompt_ids.dtype.is_floating_point:
            raise ValueError(f"prompt_ids must be a 1-D integer tensor, got shape {tuple(prompt_ids.shape)} "
                             f"of {prompt_ids.dtype}")
        prompt = prompt_ids.tolist()
    elif isinstance(prompt_ids, str | bytes) or not all(isinstance(t, int) for t in prompt_ids):
        raise ValueError("prompt_ids must be a list of token ids (ints) or a 1-D tensor; encode text first")
    else:
        prompt = [int(t) for t in prompt_ids]
    if not prompt:
        raise ValueError("the prompt is empty: give at least one token")
    bad = [t for t in prompt if not 0 <= t < target.vocab_size]
    if bad:
        raise ValueError(f"prompt token id {bad[0]} is outside the vocabulary [0, {target.vocab_size})")
    if target.max_length is not None and len(prompt) >= target.max_length:
        raise ValueError(
            f"the prompt ({len(prompt)} tokens) does not fit the target's context window ({target.max_length})"
        )
    return prompt
