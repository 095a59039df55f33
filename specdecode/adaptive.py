"""Adaptive gamma: the paper's optimum (section 3.5), recomputed every round from what this run has measured.

Each round the controller picks the gamma in 0..max_gamma that maximises expected tokens per second,

    E[tokens](alpha, gamma) / (T(gamma + 1) + D(gamma))

with alpha the running acceptance rate (a Beta prior, then exponentially forgetting old rounds), T(k) the measured
time of a target pass of k tokens (a straight line fitted online: on CPU a verify pass is not free), and D(gamma) the
round's drafting: gamma draft passes of T_d(1), the first also feeding the last round's last draft when that round
accepted every draft (T_d(2), with probability alpha^gamma), T_d(k) a line fitted as T(k) is to the draft's passes
(or, for a reproducible schedule, fixed costs instead of timings: see `AdaptiveGamma.reproducible`). gamma = 0 is
plain decoding, chosen when the draft would not pay even at alpha's upper bound (a plain round measures nothing of
alpha: near the margin drafting is the cheap way to find out); every `explore_every` plain rounds (4x that while
drafting looks hopeless) it then still drafts one token, so that alpha keeps being measured. With T flat and T_d
flat at c T(1) this is exactly `analysis.best_gamma(alpha, c)` wherever plain decoding is not a near thing.

A first pass that feeds a longer backlog (text decoded plainly or copied since the draft last ran) costs a one-time
catch-up, not a dearer draft: the line prices it per token instead of raising T_d(1). That catch-up,
T_d(1 + behind) - T_d(1) (a new request's first: its whole prompt), is paid once for the rest of the request, so a
round is charged its share of it, per token it expects, over the tokens the request may still write. Where that
share makes drafting not pay (a short answer after a long prompt, on a CPU where drafting gains little), the request
decodes plainly and never pays for the draft's prefill; no exploring round either, which would pay all of it.

A draft that stops short of gamma when unsure (`ModelDraft`'s confidence, `Proposal.stopped`) is priced with its
measured stop rate s, the share of its guesses after which it stopped: its j-th guess is made with probability
(1 - s)^(j - 1), so a round of at most gamma guesses expects 1 + sum_j alpha^j (1 - s)^(j - 1) tokens for
sum_j (1 - s)^(j - 1) draft passes and verify rows (j = 1 .. gamma; with s = 0 the paper's E[tokens]).

Proposals copied from the context (prompt lookup's: `Draft.copies`) are priced apart: they cost no draft pass
(D = 0) and have an acceptance rate of their own, so a round with a match may verify a long copy while the
draft model's guesses would not pay, and the model's rounds are not judged by the copies' acceptance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from .analysis import expected_tokens
from .models.base import VERIFY_SLOPE, CausalLM


def catch_up_cost(draft_time: Callable[[int], float], behind: int) -> float:
    """Seconds of a draft's catch-up: feeding the `behind` tokens it missed costs T_d(1 + behind) - T_d(1) beyond the
    pass it makes anyway. The server's allotment charges it whole to the round that pays it (`Scheduler.allot`)."""
    return draft_time(1 + behind) - draft_time(1) if behind else 0.0


def catch_up_owed(draft_time: Callable[[int], float], behind: int, remaining: int | None) -> float:
    """Seconds of a draft's catch-up (`catch_up_cost`) charged to each token a drafting round expects: paid once and
    spread over the `remaining` tokens the request may still write (None: no end in sight, so nothing is charged), as
    the lone request's controller (`AdaptiveGamma.choose`) prices it."""
    if not remaining:
        return 0.0
    return catch_up_cost(draft_time, behind) / remaining


class PassTimes:
    """T(k) = t1 + slope (k - 1): a straight line fitted by least squares to measured passes of k tokens, each
    measurement worth `memory` times less one measurement later."""

    def __init__(self, memory: float = 0.97, guess: Literal["flat", "proportional", "lower"] = "flat"):
        """guess: T(k) where the measured passes cannot tell the fixed cost from the slope (no spread in k yet, or a
        line through less than zero at k = 1), from their mean k and time: "flat" (the same at every k: for the
        target's passes, the guess that lets a single request's controller try drafting), "proportional" (to k: for a
        scheduler's target passes, the cautious guess for passes larger than those seen, since its first may be
        four prompts' prefill), or "lower" (the lower of the two: for the draft's passes, whose first timed is often
        its catch-up on a prompt; flat would price every step as the whole catch-up, and it would never draft again
        to time the steps themselves)."""
        self.memory, self.guess = memory, guess
        self._n = self._sk = self._st = self._skk = self._skt = 0.0  # running sums

    @property
    def measured(self) -> bool:
        return self._n > 0

    def observe(self, k: int, seconds: float, weight: float = 1.0) -> None:
        m = self.memory
        self._n, self._sk, self._st = m * self._n + weight, m * self._sk + weight * k, m * self._st + weight * seconds
        self._skk, self._skt = m * self._skk + weight * k * k, m * self._skt + weight * k * seconds

    def __call__(self, k: float) -> float:
        """The line at k (seconds); measured passes first."""
        mean_k, mean_t = self._sk / self._n, self._st / self._n
        var_k = self._skk / self._n - mean_k**2
        slope = max(0.0, (self._skt / self._n - mean_k * mean_t) / var_k) if var_k > 1e-9 else 0.0
        t1 = mean_t - slope * (mean_k - 1)
        if var_k <= 1e-9 or t1 <= 0:  # too little spread in k to separate the fixed cost from the slope
            return mean_t * {"flat": 1.0, "proportional": k / mean_k, "lower": min(1.0, k / mean_k)}[self.guess]
        return t1 + slope * (k - 1)


class AdaptiveGamma:
    """Chooses gamma per round; `update` it with what the round did."""

    def __init__(self, max_gamma: int = 10, prior_alpha: float = 0.6, prior_weight: float = 4.0,
                 prior_slope: float = VERIFY_SLOPE, memory: float = 0.97, explore_every: int = 8,
                 fixed_costs: tuple[float, float] | None = None):
        """fixed_costs=(slope, c): assume T(k) = 1 + slope (k - 1) and a draft pass costing c T(1) instead of timing
        the passes; the choices then depend only on which drafts were accepted."""
        if max_gamma < 1:
            raise ValueError(f"max_gamma must be >= 1, got {max_gamma}")
        self.max_gamma = max_gamma
        self.prior_slope = prior_slope  # T(k) / T(1) - 1 per extra token, until measured
        self.memory = memory  # each round's evidence is worth `memory` times less one round later
        self.explore_every = explore_every
        self.fixed_costs = fixed_costs
        self._accepted = prior_alpha * prior_weight  # Beta pseudo-counts: accepted and rejected decisions
        self._rejected = (1 - prior_alpha) * prior_weight
        self._copied = [self._accepted, self._rejected]  # the same for proposals copied from the context
        self._stops = [0.0, 1.0]  # the draft's guesses after which it stopped short of gamma, and went on
        self._times = PassTimes(memory)  # the target's passes, T(k)
        self._draft_times = PassTimes(memory, guess="lower")  # the draft's passes, T_d(k)
        self._draft_passes = 0.0  # (with fixed costs: whether the draft makes passes at all)
        self.draft_timed = False  # whether `update` has timed a draft pass
        self._plain_rounds = [0, 0]  # rounds chosen plain: [for guesses, for copies]

    @classmethod
    def for_target(cls, target: CausalLM, max_gamma: int = 10) -> AdaptiveGamma:
        """A timed controller whose prior verify slope is the target engine's own (`CausalLM.verify_slope`, measured
        on the CPUs seen: `VERIFY_SLOPE` per token for the native engine, 0.6 for llama.cpp)."""
        return cls(max_gamma, prior_slope=target.verify_slope)

    @classmethod
    def reproducible(cls, max_gamma: int = 10, slope: float = VERIFY_SLOPE) -> AdaptiveGamma:
        """A controller whose schedule a seed reproduces: costs fixed rather than timed, since timings differ from
        run to run: the engine's verify slope per token (`CausalLM.verify_slope`) and c = 0.06 (the shipped pair)."""
        return cls(max_gamma, fixed_costs=(slope, 0.06))

    @property
    def alpha(self) -> float:
        """The draft's acceptance rate (of its guesses, not of its copies)."""
        return self._accepted / (self._accepted + self._rejected)

    @property
    def copied_alpha(self) -> float:
        """The acceptance rate of proposals copied from the context."""
        return self._copied[0] / sum(self._copied)

    @property
    def stop_rate(self) -> float:
        """s: the share of the draft's guesses after which it stopped on its own (`Proposal.stopped`)."""
        return self._stops[0] / sum(self._stops)

    def expected_guesses(self, gamma: int, copied: bool = False) -> float:
        """Guesses (draft passes, and verify rows besides the first) a round of at most gamma makes: gamma, or
        sum_j (1 - s)^(j - 1) for a draft that stops when unsure."""
        go_on = 1.0 if copied else 1.0 - self.stop_rate
        return float(gamma) if go_on == 1.0 else sum(go_on**j for j in range(gamma))

    def acceptance(self, copied: bool) -> float:
        return self.copied_alpha if copied else self.alpha

    def target_time(self, k: int) -> float:
        """Estimated time of a target pass of k tokens: in units of T(1) with fixed costs or until measured (the
        prior line 1 + slope (k - 1)), then in seconds from the fitted line."""
        if self.fixed_costs is not None:
            return 1.0 + self.fixed_costs[0] * (k - 1)
        if not self._times.measured:
            return 1.0 + self.prior_slope * (k - 1)
        return self._times(k)

    @property
    def draft_times(self) -> PassTimes:
        """T_d(k) as this controller measured the draft's passes (with fixed costs: never measured)."""
        return self._draft_times

    def draft_time(self, k: int = 1) -> float:
        """Estimated time of a draft pass feeding k tokens (0 for a draft that makes no passes)."""
        if self.fixed_costs is not None:  # model-free drafts make no draft passes: they cost nothing here
            return self.fixed_costs[1] if self._draft_passes else 0.0
        return self._draft_times(k) if self._draft_times.measured else 0.0

    def drafting_time(self, gamma: int) -> float:
        """D(gamma): a round's draft passes (`expected_guesses`), the first feeding the last round's last draft too
        when that round accepted every draft (which has probability alpha^gamma; ignoring early stops)."""
        if not gamma:
            return 0.0
        return self.expected_guesses(gamma) * self.draft_time() + self.alpha**gamma * (
            self.draft_time(2) - self.draft_time())

    def hopeful_acceptance(self, copied: bool) -> float:
        """alpha's upper bound: its mean plus one standard deviation of its Beta distribution (whose counts the
        memory keeps below ~1 / (1 - memory) decisions)."""
        mean, n = self.acceptance(copied), sum(self._copied) if copied else self._accepted + self._rejected
        return min(1.0, mean + math.sqrt(mean * (1 - mean) / (n + 1)))

    def rate(self, gamma: int, copied: bool = False, alpha: float | None = None, owed: float = 0.0) -> float:
        """Expected tokens per second with this gamma, for the draft's guesses or for a copy (no draft pass), at
        alpha (default: the measured acceptance rate); owed: seconds of catch-up charged per token a drafting
        round expects (`choose`)."""
        alpha = self.acceptance(copied) if alpha is None else alpha
        go_on = 1.0 if copied else 1.0 - self.stop_rate
        if go_on == 1.0:
            tokens = expected_tokens(alpha, gamma) if gamma else 1.0
        else:  # the j-th guess made with probability go_on^(j - 1), kept with alpha^j
            tokens = 1.0 + sum(alpha**j * go_on ** (j - 1) for j in range(1, gamma + 1))
        verified = 1.0 + self.expected_guesses(gamma, copied)
        drafting = 0.0 if copied else self.drafting_time(gamma) + (owed * tokens if gamma else 0.0)
        return tokens / (self.target_time(verified) + drafting)

    def _best(self, copied: bool, alpha: float | None = None, owed: float = 0.0) -> int:
        """The gamma with the highest `rate` at alpha (the shortest of equals)."""
        return max(range(self.max_gamma + 1), key=lambda g: (self.rate(g, copied, alpha, owed), -g))

    def choose(self, copied: bool = False, behind: int = 0, remaining: int | None = None) -> int:
        """gamma for this round; copied: its proposal will be copied from the context (`Draft.copies`). behind (the
        tokens the draft has yet to catch up on, `Draft.behind`) and remaining (the tokens the request may still
        write; None: no end in sight): the catch-up, paid once, is charged to each drafting round by the tokens it
        expects, over remaining (`catch_up_owed`)."""
        owed = 0.0 if copied else catch_up_owed(self.draft_time, behind, remaining)
        best = self._best(copied, owed=owed)
        if best == 0:
            # A plain round measures nothing of alpha, so plain decoding is chosen only where drafting would not pay
            # even at alpha's upper bound: near the margin it drafts (as the bound would have it), and what it
            # measures settles the question for this text. (Else a low alpha carried over from other text keeps a
            # well-drafted one plain: it is measured only by the exploring rounds below, one decision at a time.)
            if hopeful := self._best(copied, self.hopeful_acceptance(copied), owed):
                return hopeful
            if owed:  # no exploring round while the draft is behind: it would pay the whole catch-up to measure alpha
                return 0
            self._forget(copied)
            self._plain_rounds[copied] += 1
            # Keep measuring alpha while plain decoding wins; four times less often while drafting looks hopeless
            # (a verify pass dearer than the tokens it could add, as on llama.cpp with 2 cores).
            every = self.explore_every if self.rate(1, copied) >= 0.9 * self.rate(0) else 4 * self.explore_every
            if self._plain_rounds[copied] % every == 0:
                return 1
        return best

    def forget_draft_costs(self) -> None:
        """Drop what the draft's passes were measured to cost: until they are timed again the draft is taken to cost
        nothing, so the next choices draft and time it (`Scheduler._learn`: costs that were not measured for a
        while may be stale)."""
        self._draft_times = PassTimes(self.memory, guess="lower")

    def _forget(self, copied: bool) -> None:
        """A round passes without measuring alpha: what was measured is worth `memory` times less (the text moves
        on), so alpha's upper bound rises until drafting is worth a try."""
        if copied:
            self._copied = [self.memory * n for n in self._copied]
        else:
            self._accepted, self._rejected = self.memory * self._accepted, self.memory * self._rejected

    def update(self, drafted: int, accepted: int, target_seconds: float | None = None,
               draft_seconds: float | None = None, draft_passes: int = 0, copied: bool = False,
               pass_times: Sequence[tuple[int, float]] = (), stopped: bool = False) -> None:
        """Record a round: how many tokens were drafted (copied: copied from the context) and accepted, whether the
        draft stopped short on its own (`Proposal.stopped`), and what the passes cost: draft_seconds over the
        draft's passes, shared as their own timings share it where the draft timed them (`Proposal.pass_times`:
        tokens fed, seconds), else over draft_passes passes of one token."""
        if drafted and not copied:  # after each guess but the last it went on; after the last it stopped, or not
            self._stops = [self.memory * self._stops[0] + int(stopped),
                           self.memory * self._stops[1] + drafted - 1]
        if drafted and copied:
            self._copied = [self.memory * self._copied[0] + accepted,
                            self.memory * self._copied[1] + int(accepted < drafted)]
        elif drafted:
            self._accepted = self.memory * self._accepted + accepted
            self._rejected = self.memory * self._rejected + int(accepted < drafted)
        if self.fixed_costs is not None:
            self._draft_passes = self.memory * self._draft_passes + draft_passes
            return
        if target_seconds is not None:
            if not self._times.measured:  # seed the line with the prior slope through this first measurement
                t1 = target_seconds / (1 + self.prior_slope * drafted)
                for k in (1, self.max_gamma + 1):
                    self._times.observe(k, t1 * (1 + self.prior_slope * (k - 1)), weight=0.5)
            self._times.observe(drafted + 1, target_seconds)
        self.draft_timed |= bool(pass_times) or draft_seconds is not None and draft_passes > 0
        if pass_times:  # the round's drafting time shared among its passes as their own timings share it
            total = sum(seconds for _, seconds in pass_times)
            scale = draft_seconds / total if draft_seconds is not None and total > 0 else 1.0
            for k, seconds in pass_times:
                self._draft_times.observe(k, seconds * scale)
        elif draft_seconds is not None and draft_passes:
            self._draft_times.observe(1, draft_seconds / draft_passes, weight=draft_passes)
