"""The paper's arithmetic (sections 3.1 to 3.5): acceptance, tokens per target call, speed-up, extra work, best gamma.

    beta         sum_x min(p(x), q(x)): the chance one drafted token survives, for one pair of lists
    alpha        E[beta] over the text: the acceptance rate
    c            cost of one draft forward pass / cost of one target forward pass (wall clock)
    c_hat        the same ratio in arithmetic operations
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def _check_alpha(alpha: float) -> None:
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")


def check_gamma(gamma, auto: bool = False) -> None:
    """gamma (drafts per round) must be an integer >= 1 (or "auto" where `auto` allows it): ValueError otherwise."""
    if auto and gamma == "auto":
        return
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        allowed = "an integer >= 1 or 'auto'" if auto else "an integer >= 1"
        raise ValueError(f"gamma (drafts per round) must be {allowed}, got {gamma!r}")


def _check_cost(c: float, name: str = "c") -> None:
    if not (math.isfinite(c) and c >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {c}")


def beta(p: Sequence[float] | torch.Tensor, q: Sequence[float] | torch.Tensor) -> float:
    """sum_x min(p(x), q(x)): the probability that a token drafted from q is accepted against p (paper 3.1)."""
    p_t, q_t = torch.as_tensor(p, dtype=torch.float64), torch.as_tensor(q, dtype=torch.float64)
    if p_t.shape != q_t.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p_t.shape)} and {tuple(q_t.shape)}")
    return float(torch.minimum(p_t, q_t).sum(dim=-1).mean())


def expected_tokens(alpha: float, gamma: int) -> float:
    """E[tokens per target call] = (1 - alpha^(gamma+1)) / (1 - alpha); gamma + 1 at alpha = 1 (paper 3.2)."""
    _check_alpha(alpha)
    check_gamma(gamma)
    if alpha == 1:
        return gamma + 1.0
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def speedup(alpha: float, gamma: int, c: float, verify_cost: float = 1.0) -> float:
    """Expected wall-clock speed-up: E[tokens] / (gamma c + verify_cost) (paper 3.3).

    verify_cost = T(gamma + 1) / T(1), the time of the target pass over gamma + 1 tokens in units of a one-token
    pass. The paper takes it as 1 (idle parallel hardware); on a CPU it is measured (`models.costs.pass_times`).
    """
    _check_cost(c)
    if not (math.isfinite(verify_cost) and verify_cost > 0):
        raise ValueError(f"verify_cost must be a finite number > 0, got {verify_cost}")
    return expected_tokens(alpha, gamma) / (gamma * c + verify_cost)


def extra_arithmetic(alpha: float, gamma: int, c_hat: float) -> float:
    """Factor of extra arithmetic operations: (gamma c_hat + gamma + 1) / E[tokens] (paper 3.4)."""
    _check_cost(c_hat, "c_hat")
    return (gamma * c_hat + gamma + 1) / expected_tokens(alpha, gamma)


def best_gamma(alpha: float, c: float, max_gamma: int = 32, verify_cost=None) -> int:
    """The gamma in 1..max_gamma with the highest `speedup` (the smallest one on ties) (paper 3.5).

    verify_cost: None (the paper: 1 for every gamma) or a function k -> T(k) / T(1).
    """
    check_gamma(max_gamma)
    cost = verify_cost or (lambda k: 1.0)
    return max(range(1, max_gamma + 1), key=lambda g: (speedup(alpha, g, c, cost(g + 1)), -g))


def measured_verify_cost(ratio: dict[int, float]):
    """k -> T(k) / T(1) from a few measured points {k: T(k) / T(1)} (`models.costs.pass_times`): linear between them,
    and beyond the last along its last segment (a CPU's pass grows about linearly once compute-bound), or flat where
    that segment falls (noise in passes of microseconds: a pass of more tokens is not taken to cost less, nor less
    than nothing)."""
    ks = sorted(int(k) for k in ratio)
    r = {int(k): float(v) for k, v in ratio.items()}
    if not ks or ks[0] != 1:
        raise ValueError(f"measured verify costs must start at k = 1, got k = {ks}")

    def cost(k: float) -> float:
        if len(ks) == 1:
            return r[1]
        k = max(k, 1)
        hi = next((x for x in ks if x >= k), ks[-1])
        lo = max(x for x in ks if x < hi) if hi > ks[0] else ks[0]
        if hi == lo:
            return r[lo]
        slope = (r[hi] - r[lo]) / (hi - lo)
        if k > hi:  # beyond the last point
            return r[hi] + max(slope, 0.0) * (k - hi)
        return r[lo] + slope * (k - lo)

    return cost


def acceptance_rate(accepted: int, rejected: int) -> float | None:
    """alpha estimated from counts of draft decisions: accepted / (accepted + rejected); None without any.

    Each time the rule looks at a drafted token is one Bernoulli trial with success probability alpha (the paper's
    i.i.d. model); drafts after a rejection are never looked at, so they are not trials. This is the maximum
    likelihood estimate under that model.
    """
    trials = accepted + rejected
    return accepted / trials if trials else None


def alpha_from_stats(stats) -> float:
    """`acceptance_rate` of a run's counters (tokens_accepted, rejections); an error when it made no decision."""
    alpha = acceptance_rate(stats.tokens_accepted, stats.rejections)
    if alpha is None:
        raise ValueError("the run made no draft decisions (no drafted tokens): alpha cannot be estimated")
    return alpha


# Table 2 of the paper: T5-XXL (11B) target on one TPU-v4, batch 1; drafts T5-small (77M), T5-base (250M) and
# T5-large (800M) with the paper's cost ratios c. (task, draft, temperature, gamma, alpha, reported speed-up)
PAPER_DRAFT_COST = {"T5-small": 0.02, "T5-base": 0.04, "T5-large": 0.11}
PAPER_TABLE_2 = [
    ("EnDe", "T5-small", 0, 7, 0.75, 3.4), ("EnDe", "T5-base", 0, 7, 0.80, 2.8),
    ("EnDe", "T5-large", 0, 7, 0.82, 1.7), ("EnDe", "T5-small", 1, 7, 0.62, 2.6),
    ("EnDe", "T5-base", 1, 5, 0.68, 2.4), ("EnDe", "T5-large", 1, 3, 0.71, 1.4),
    ("CNNDM", "T5-small", 0, 5, 0.65, 3.1), ("CNNDM", "T5-base", 0, 5, 0.73, 3.0),
    ("CNNDM", "T5-large", 0, 3, 0.74, 2.2), ("CNNDM", "T5-small", 1, 5, 0.53, 2.3),
    ("CNNDM", "T5-base", 1, 3, 0.55, 2.2), ("CNNDM", "T5-large", 1, 3, 0.56, 1.7),
]


def paper_table() -> list[dict]:
    """Table 2's rows with the speed-up the formula predicts from their alpha, gamma and c, and the best gamma."""
    rows = []
    for task, draft, temperature, gamma, alpha, reported in PAPER_TABLE_2:
        c = PAPER_DRAFT_COST[draft]
        rows.append({"task": task, "draft": draft, "temperature": temperature, "gamma": gamma, "alpha": alpha,
                     "c": c, "predicted": speedup(alpha, gamma, c), "reported": reported,
                     "best_gamma": best_gamma(alpha, c, max_gamma=20)})
    return rows
