"""The speculative sampling rule (paper 2.3), batched and pure.

The words used everywhere in specdecode:

    target     the model whose output distribution must be reproduced exactly; its adjusted list is p
    draft      the cheap guesser; its adjusted list is q (a deterministic draft has a one-hot q)
    gamma      how many tokens the draft proposes in a round
    accepted   the leading drafted tokens the rule keeps; a drafted x is kept with probability min(1, p(x) / q(x))
    rejected   the first drafted token the rule does not keep (drafts after it are discarded unseen)
    corrected  the token drawn from norm(max(0, p - q)) at the rejected position
    bonus      the token drawn from the target's last row when all gamma drafts were accepted

Every round thus yields n_accepted + 1 tokens: the accepted drafts, then one corrected or bonus token.
"""

from __future__ import annotations

import torch

from .sampling import argmax, sample


def keep_probability(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """min(1, p / q) elementwise, [..., V] -> [..., V]; 1 where q = 0 (a token the draft never proposes)."""
    return torch.where(q > 0, torch.clamp(p / torch.where(q > 0, q, 1), max=1), torch.ones_like(p))


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) over the last dimension, [..., V] -> [..., V].

    Where nothing is left (p <= q everywhere, i.e. p == q up to rounding, so a rejection had probability ~0),
    the row falls back to p, which is then the exact conditional anyway.
    """
    left = (p - q).clamp_(min=0)
    mass = left.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, left.div_(torch.where(mass > 0, mass, 1)), p)


def output_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The rule's analytic distribution of its output token, [..., V] -> [..., V]:
    q(x) keep(x) + P(reject) p'(x), with P(reject) = sum_x q(x) (1 - keep(x)) and p' = residual(p, q).

    The paper's theorem says this equals p; the tests check it does, numerically.
    """
    keep = keep_probability(p, q)
    rejected = (q * (1 - keep)).sum(dim=-1, keepdim=True)
    return q * keep + rejected * residual(p, q)


def verify(
    target_probs: torch.Tensor,  # [B, gamma + 1, V]  p at each drafted position, then the bonus position
    draft_probs: torch.Tensor,  # [B, gamma, V]       q the drafted tokens were sampled from
    draft_tokens: torch.Tensor,  # [B, gamma] int64
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the rule on a batch of rounds -> (n_accepted [B] int64, next_token [B] int64).

    next_token is the corrected token at the first rejected position, or the bonus token drawn from the last row of
    target_probs when all gamma drafts were accepted. gamma may be 0 (then it is a plain draw from p).
    Rows need not sum to 1 exactly: both p and q are renormalised first. The arithmetic runs in float64 whatever
    the input's dtype (a float32 p - q, and a float32 uniform of 24 bits, would move each probability by ~1e-7).
    """
    batch, gamma = draft_tokens.shape
    if target_probs.shape[:2] != (batch, gamma + 1) or draft_probs.shape[:2] != (batch, gamma):
        raise ValueError(
            f"verify: shapes do not agree: target_probs {tuple(target_probs.shape)}, draft_probs "
            f"{tuple(draft_probs.shape)}, draft_tokens {tuple(draft_tokens.shape)} "
            "(expected [B, gamma+1, V], [B, gamma, V], [B, gamma])"
        )
    if gamma == 0:  # plain decoding: a draw from p (`sample` normalises the rows)
        return torch.zeros(batch, dtype=torch.int64), sample(target_probs[:, 0], generator)
    # Only a row's mass, the drafted tokens' entries and the one row drawn from are read in float64: no float64 copy
    # of [B, gamma + 1, V] (at V ~ 152k, copies of whole rows cost more than the arithmetic).
    p_mass = target_probs.sum(dim=-1, dtype=torch.float64)  # [B, gamma+1]
    q_mass = draft_probs.sum(dim=-1, dtype=torch.float64).clamp_min(torch.finfo(torch.float64).tiny)  # [B, gamma]

    index = draft_tokens.unsqueeze(-1)  # [B, gamma, 1]
    p_drafted = target_probs[:, :gamma].gather(-1, index).squeeze(-1).to(torch.float64) / p_mass[:, :gamma]
    q_drafted = draft_probs.gather(-1, index).squeeze(-1).to(torch.float64) / q_mass  # [B, gamma], as p_drafted
    u = torch.rand((batch, gamma), generator=generator, dtype=torch.float64, device=p_mass.device)  # in [0, 1)
    accepted = u * q_drafted < p_drafted  # probability exactly min(1, p/q); never when p(x) = 0
    n_accepted = accepted.to(torch.int64).cumprod(dim=1).sum(dim=1)  # [B]: the leading run of accepts

    # The row drawn from: p after the last draft (the bonus token; `sample` normalises it), or at the first rejected
    # position norm(max(0, p - q)), with the bonus rows beside it as residual(p, 0) = p.
    rows = torch.arange(batch, device=p_mass.device)
    drawn = target_probs[rows, n_accepted]  # [B, V]
    rejected = n_accepted < gamma  # [B]
    if bool(rejected.any()):
        drawn = drawn.to(torch.float64).div_(p_mass[rows, n_accepted].unsqueeze(-1))
        q_row = torch.zeros_like(drawn)  # [B, V]
        at = n_accepted[rejected]
        q_row[rejected] = draft_probs[rows[rejected], at].to(torch.float64) / q_mass[rows[rejected], at].unsqueeze(-1)
        drawn = residual(drawn, q_row)
    next_token = sample(drawn, generator)  # [B]
    return n_accepted, next_token


def verify_greedy(
    target_logits: torch.Tensor,  # [gamma + 1, V]  the target's logits at each drafted position, then the bonus one
    draft_tokens: torch.Tensor,  # [gamma] int64
) -> tuple[int, int]:
    """`verify` for greedy decoding, without building p: with p a point mass on each row's arg-max (what `adjust`
    makes at temperature 0), a drafted token is kept exactly when it is the arg-max, and the corrected or bonus token
    is the arg-max of the first row not kept. Same result as `verify(adjust(logits, GREEDY), q, drafts)` for any q
    the drafts were drawn from, at a fraction of the cost over a large vocabulary -> (n_accepted, next_token)."""
    best = argmax(target_logits)  # [gamma + 1]
    matches = (best[:-1] == draft_tokens).to(torch.int64)  # [gamma]
    n_accepted = int(matches.cumprod(dim=0).sum())
    return n_accepted, int(best[n_accepted])
