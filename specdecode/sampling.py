"""Standardized sampling (paper 2.2): every decoding setting is "adjust the probability list, then draw from it".

`adjust` is the only place in the project that turns logits into probabilities. The target's list p and the draft's
list q both come from it with the same `SamplingConfig`, so top-k / top-p / temperature can never be applied to one
side and not the other.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

# Below MIN_TEMPERATURE, logits / T overflow float32 (3.4e38) for logits as small as 3.4e8 (1e-39 makes every logit
# above 3.4e-1 infinite: NaN probabilities); `adjust` still refuses the rare logits that overflow above it. Above
# MAX_TEMPERATURE the list is numerically uniform.
MIN_TEMPERATURE, MAX_TEMPERATURE = 1e-30, 1e2


class TemperatureTooSmall(ValueError):
    """Logits divided by the temperature overflow: no distribution to sample from at that temperature."""


def check_logits(logits: torch.Tensor) -> None:
    """Logits may be -inf (a token ruled out), never NaN or +inf, and not -inf for every token of a row: those make
    every probability NaN, and a draw from NaNs would silently return the last token id. (One reduction: a row's
    maximum is finite exactly when the row is usable, since the maximum propagates NaN.)"""
    if not bool(torch.isfinite(logits.amax(dim=-1)).all()):
        raise ValueError("the model returned NaN or +infinity logits (or ruled out every token): no distribution to "
                         "sample from")


@dataclass(frozen=True)
class SamplingConfig:
    """How a row of logits becomes the adjusted probability list.

    temperature: 0 means greedy (a point mass on the arg-max, ties to the lowest token id); otherwise logits / T.
    top_k: keep the k most likely tokens (ties with the k-th are kept too); None keeps all.
    top_p: keep the smallest most-likely set whose mass reaches top_p (nucleus); None keeps all.
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
            raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {t!r}")
        if t != 0 and not MIN_TEMPERATURE <= t <= MAX_TEMPERATURE:
            # 1e-39 overflows float32 logits to infinities (NaN probabilities); 1e300 flattens them to uniform
            raise ValueError(f"temperature must be 0 (greedy) or between {MIN_TEMPERATURE:g} and {MAX_TEMPERATURE:g}, "
                             f"got {t!r}")
        if self.top_k is not None and (isinstance(self.top_k, bool) or not isinstance(self.top_k, int)
                                       or self.top_k < 1):
            raise ValueError(f"top_k must be an integer >= 1 or None, got {self.top_k!r}")
        p = self.top_p
        if p is not None and (isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1):
            raise ValueError(f"top_p must be in (0, 1] or None, got {p!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def describe(self) -> str:
        if self.greedy:
            return "greedy"
        parts = [f"temperature {self.temperature:g}"]
        if self.top_k is not None:
            parts.append(f"top-k {self.top_k}")
        if self.top_p is not None:
            parts.append(f"top-p {self.top_p:g}")
        return ", ".join(parts)


GREEDY = SamplingConfig(temperature=0.0)

MAX_SEED = 2**64 - 1


def seeded(seed: int) -> torch.Generator:
    """A generator whose state depends on every bit of seed (0..2^64 - 1).

    torch's own `manual_seed` keeps only the low 32 bits on the CPU (its Mersenne Twister takes a 32-bit seed), so
    seeds 5 and 2^32 + 5 would draw the same numbers. Seeds below 2^32 are seeded by it as before; larger ones fill the
    same Mersenne Twister state with the reference `init_by_array` of their 32-bit words, as Python's `random` does.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer in 0..2^64 - 1, got {seed!r}")
    generator = torch.Generator()
    if seed < 2**32:
        return generator.manual_seed(seed)
    words = random.Random(seed).getstate()[1][:624]  # the 624-word state init_by_array([low, high]) makes
    state = generator.get_state()  # seed u64, left i32, seeded i32, next u64, state u64[624], ... (CPUGeneratorImpl)
    state[:24] = torch.tensor([seed & (2**63 - 1), 1 | 1 << 32, 0], dtype=torch.int64).view(torch.uint8)
    state[24:24 + 624 * 8] = torch.tensor(words, dtype=torch.int64).view(torch.uint8)
    return generator.set_state(state)


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """logits [..., V] -> [...] int64: the index of each row's maximum, the first one on ties (NaN counts as the
    maximum), as `torch.argmax(dim=-1)`. A CPU float tensor goes through numpy's vectorised argmax: torch's CPU argmax
    takes ~0.8 ms over 4 rows of 152k logits on one thread, numpy's 0.08 (a round's worker thread in the server
    computes on one)."""
    if logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float64) and logits.numel() \
            and not logits.is_neg():  # (a lazily negated view has no numpy form)
        return torch.as_tensor(logits.detach().numpy().argmax(axis=-1), dtype=torch.int64)
    return logits.argmax(dim=-1)


def adjust(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """Logits [..., V] -> adjusted probabilities [..., V] (float32, or float64 for float64 input), rows summing to 1.

    Order as in transformers: temperature, then top-k, then top-p on the tempered list.
    """
    check_logits(logits)
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    logits = logits.to(dtype)
    if config.greedy:
        return torch.zeros_like(logits).scatter_(-1, argmax(logits).unsqueeze(-1), 1.0)  # one-hot
    if config.temperature != 1:  # (logits / 1 is logits, checked above: no copy of [..., V] for it)
        logits = logits / config.temperature
        if not bool(torch.isfinite(logits.amax(dim=-1)).all()):
            raise TemperatureTooSmall(f"temperature {config.temperature:g} is too small for these logits: divided "
                                      "by it, they overflow")
    if config.top_k is not None and config.top_k < logits.shape[-1]:
        kth = torch.topk(logits, config.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    probs = torch.softmax(logits, dim=-1)
    if config.top_p is not None and config.top_p < 1:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
        drop_sorted = mass_before >= config.top_p  # the token that crosses top_p is kept
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def log_probs(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """Logits [..., V] -> the log of the adjusted list [..., V] (-inf where top-k / top-p ruled a token out), what a
    token's reported log-probability is. Greedy reports the unadjusted list (log-softmax at temperature 1), since
    its point mass says nothing (OpenAI does the same at temperature 0)."""
    if config.greedy:
        check_logits(logits)
        return torch.log_softmax(logits.to(torch.float64 if logits.dtype == torch.float64 else torch.float32), dim=-1)
    return adjust(logits, config).log()


def cumulative(probs: torch.Tensor) -> torch.Tensor:
    """The running sum that `sample` draws against: probs [..., V] -> cdf [..., V], always float64.

    A float32 running sum rounds each partial sum to a multiple of 2^-24 near 1: over a 49,152-token list the drawn
    distribution then strayed from p by up to 3.2e-4 in total variation, and tokens with p below about 3e-8 could
    never be drawn. In float64 each token's share of the sum, cdf[i] - cdf[i - 1], is p[i] to within ~1e-16 of the
    total, so the drawn distribution is p to within ~1e-11 in total variation (tests/test_sampling.py checks it).
    """
    return probs.cumsum(dim=-1, dtype=torch.float64)


def sample(probs: torch.Tensor, generator: torch.Generator | None = None,
           num_samples: int | None = None) -> torch.Tensor:
    """Draw one token per row: probs [..., V] (need not sum to 1 exactly) -> token ids [...] (int64); with
    num_samples, that many independent draws per row -> [..., num_samples].

    Inverse CDF in float64: one uniform u in [0, 1) (53 random bits) per draw, and the token is the first index whose
    running sum exceeds u times the row's total (torch.multinomial draws an exponential per entry, about 1 ms for a
    49k-token row here). Tokens of probability 0 are never drawn.
    """
    width = probs.shape[-1]
    cdf = cumulative(probs.reshape(-1, width))  # [N, V]
    total = cdf[:, -1:].contiguous()  # [N, 1]
    draws = 1 if num_samples is None else num_samples
    u = torch.rand(cdf.shape[0], draws, generator=generator, dtype=torch.float64) * total  # [N, n] in [0, total)
    tokens = torch.searchsorted(cdf, u, right=True)  # [N, n]: the first index with cdf > u
    # u * total can round up to total (probability ~2^-53): then take the last token of positive probability.
    tokens = torch.minimum(tokens, torch.searchsorted(cdf, total))
    return tokens.reshape(probs.shape[:-1] if num_samples is None else (*probs.shape[:-1], num_samples))
