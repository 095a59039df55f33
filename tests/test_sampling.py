"""Standardized sampling (paper 2.2): one function turns logits into p and q for every decoding setting."""

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from conftest import SIGNIFICANCE, chi_square_pvalue
from hypothesis import given, settings
from hypothesis import strategies as st

from specdecode import SamplingConfig, adjust, sample
from specdecode.sampling import argmax, cumulative

VOCAB = 49_152  # SmolLM2's vocabulary


def test_greedy_is_a_point_mass_on_the_argmax_with_ties_to_the_lowest_id():
    logits = torch.tensor([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0]])
    probs = adjust(logits, SamplingConfig(temperature=0))
    assert probs.tolist() == [[0, 1, 0, 0], [1, 0, 0, 0]]


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 4), vocab=st.integers(1, 40), seed=st.integers(0, 2**31), nan=st.booleans(),
       dead_row=st.booleans(), transposed=st.booleans())
def test_argmax_is_torchs_ties_nans_dead_rows_and_strides_included(rows, vocab, seed, nan, dead_row, transposed):
    """`argmax` (numpy's on the CPU, for speed) picks what torch.argmax picks: the first maximum, NaN as the maximum,
    index 0 of a row ruled out entirely, on a non-contiguous view too, in float32 and float64."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randint(-2, 3, (vocab, rows) if transposed else (rows, vocab), generator=g).float()
    logits = logits.t() if transposed else logits  # [rows, vocab], strided when transposed
    if nan:
        logits[0, vocab // 2] = math.nan
    if dead_row:
        logits[-1] = -math.inf
    for x in (logits, logits.double(), logits[0]):
        assert torch.equal(argmax(x), x.argmax(dim=-1))


def test_temperature_scales_logits():
    logits = torch.tensor([0.0, 1.0, 2.0])
    probs = adjust(logits, SamplingConfig(temperature=0.5))
    assert torch.allclose(probs, torch.softmax(logits / 0.5, dim=-1))


def test_top_k_keeps_the_k_largest_and_their_ties():
    logits = torch.tensor([4.0, 3.0, 3.0, 1.0, 0.0])
    assert (adjust(logits, SamplingConfig(top_k=1)) > 0).tolist() == [True, False, False, False, False]
    assert (adjust(logits, SamplingConfig(top_k=2)) > 0).tolist() == [True, True, True, False, False]
    probs = adjust(logits, SamplingConfig(top_k=4))
    assert probs[4] == 0 and math.isclose(float(probs.sum()), 1, rel_tol=1e-6)


def test_top_p_keeps_the_token_that_crosses_the_mass():
    probs_in = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
    kept = lambda p: (adjust(probs_in.log(), SamplingConfig(top_p=p)) > 0).tolist()  # noqa: E731
    assert kept(0.5) == [True, False, False, False]
    assert kept(0.6) == [True, True, False, False]
    assert kept(0.79) == [True, True, False, False]
    assert kept(0.81) == [True, True, True, False]
    assert kept(1.0) == [True, True, True, True]
    out = adjust(probs_in.log(), SamplingConfig(top_p=0.6))
    assert out.tolist() == pytest.approx([0.625, 0.375, 0, 0])


def test_top_p_applies_to_the_tempered_list():
    logits = torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64)
    hot = adjust(logits, SamplingConfig(temperature=5.0, top_p=0.5))
    cold = adjust(logits, SamplingConfig(temperature=0.2, top_p=0.5))
    assert (hot > 0).sum() == 2 and (cold > 0).sum() == 1


def test_float64_is_kept_and_lower_precision_becomes_float32():
    assert adjust(torch.zeros(3, dtype=torch.float64), SamplingConfig()).dtype == torch.float64
    assert adjust(torch.zeros(3, dtype=torch.bfloat16), SamplingConfig()).dtype == torch.float32


configs = st.one_of(
    st.just(SamplingConfig(temperature=0)),
    st.builds(SamplingConfig, temperature=st.floats(0.05, 5.0),
              top_k=st.one_of(st.none(), st.integers(1, 60)),
              top_p=st.one_of(st.none(), st.floats(0.01, 1.0))),
)


@settings(max_examples=200, deadline=None)
@given(config=configs, seed=st.integers(0, 2**31), vocab=st.integers(2, 50))
def test_rows_are_distributions_within_the_allowed_set(config, seed, vocab):
    logits = torch.randn(4, vocab, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3
    probs = adjust(logits, config)
    assert torch.all(probs >= 0)
    assert torch.allclose(probs.sum(-1), torch.ones(4, dtype=torch.float64))
    assert torch.all(probs.argmax(-1) == logits.argmax(-1))  # the mode always survives
    if config.top_k is not None and not config.greedy:
        assert torch.all((probs > 0).sum(-1) <= config.top_k)


@pytest.mark.parametrize("kwargs", [
    {"temperature": -0.1}, {"temperature": float("nan")}, {"temperature": float("inf")}, {"temperature": 1e-39},
    {"temperature": 1e300}, {"temperature": 1e-31}, {"top_k": 0},
    {"top_k": 2.5}, {"top_p": 0.0}, {"top_p": 1.2}, {"top_p": -1}, {"temperature": "hot"},
])
def test_bad_configs_raise_clear_value_errors(kwargs):
    with pytest.raises(ValueError, match="temperature|top_k|top_p"):
        SamplingConfig(**kwargs)


def test_sample_follows_the_probabilities():
    g = torch.Generator().manual_seed(0)
    probs = torch.tensor([0.1, 0.0, 0.9]).expand(20000, 3)
    counts = torch.bincount(sample(probs, g), minlength=3)
    assert counts[1] == 0
    assert abs(counts[2] / 20000 - 0.9) < 0.01


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("config", [SamplingConfig(0), SamplingConfig(1.0), SamplingConfig(0.7, top_p=0.9)])
def test_nan_or_infinite_logits_are_an_error_not_the_last_token(bad, config):
    """A NaN or +inf logit used to make every probability NaN, and the draw then returned the last id every time."""
    logits = torch.randn(2, 10)
    logits[1, 3] = bad
    with pytest.raises(ValueError, match="NaN or \\+infinity"):
        adjust(logits, config)
    ruled_out = torch.randn(10).index_fill_(0, torch.tensor([2, 5]), -float("inf"))  # -inf is a legal logit
    assert adjust(ruled_out, config)[[2, 5]].sum() == 0
    with pytest.raises(ValueError, match="ruled out every token"):
        adjust(torch.full((10,), -float("inf")), config)


def _tail_heavy() -> torch.Tensor:
    """A float32 list [49152] that a float32 running sum cannot draw from exactly: token 0 holds 0.5, then 16,383
    pairs (tiny t = 2^-26, medium 2^-15 - t) keep every partial sum on the grid of 2^-15, and t is less than half the
    float32 spacing there (2^-25), so each tiny token's partial sum rounds back down and it is never drawn. The tiny
    tokens hold 2.4e-4 of the mass; the last 16,385 tokens have p = 0."""
    pairs, tiny, step = 16_383, 2.0**-26, 2.0**-15
    probs = torch.zeros(VOCAB, dtype=torch.float32)
    probs[0] = 0.5
    probs[1:1 + 2 * pairs:2] = tiny
    probs[2:2 + 2 * pairs:2] = step - tiny
    return probs


def _drawn_distribution(probs: torch.Tensor) -> list[Fraction]:
    """What `sample` draws from a row [V], computed exactly: token i owns the uniform's share
    (cdf[i] - cdf[i - 1]) / cdf[-1] of [0, 1). (The uniform's 53-bit grid adds at most V * 2^-53 = 5e-12.)"""
    cdf = [Fraction(c) for c in cumulative(probs).tolist()]
    return [(c - b) / cdf[-1] for b, c in zip([Fraction(0), *cdf[:-1]], cdf, strict=True)]


@pytest.mark.parametrize("kind", ["softmax of random logits", "tail-heavy"])
def test_the_drawn_distribution_is_p_to_1e_6_over_the_full_vocabulary(kind):
    """Exact arithmetic over all 49,152 tokens: total variation from p below 1e-6, and every token with p > 0 can be
    drawn. (A float32 running sum gave 3.0e-4 with 9,487 undrawable tokens on the first list, 2.4e-4 and 16,383 on
    the second.)"""
    logits = torch.randn(VOCAB, generator=torch.Generator().manual_seed(0)) * 3
    probs = adjust(logits, SamplingConfig()) if kind == "softmax of random logits" else _tail_heavy()
    assert probs.dtype == torch.float32
    exact = [Fraction(x) for x in probs.tolist()]
    total = sum(exact)
    drawn = _drawn_distribution(probs)
    assert float(sum(abs(d - e / total) for d, e in zip(drawn, exact, strict=True)) / 2) < 1e-6
    assert all(d > 0 for d, e in zip(drawn, exact, strict=True) if e > 0)
    assert all(d == 0 for d, e in zip(drawn, exact, strict=True) if e == 0)


def test_tail_tokens_are_drawn_as_often_as_p_says():
    """400,000 draws from the tail-heavy list: the head, the medium tokens and the tiny tail tokens (p = 1.5e-8
    each, 2.4e-4 together: ~98 draws expected, none with a float32 running sum) each at their frequency."""
    probs = _tail_heavy()
    tokens = sample(probs, torch.Generator().manual_seed(1), num_samples=400_000)
    assert tokens.shape == (400_000,)
    counts = np.bincount(tokens.numpy(), minlength=VOCAB)
    groups = [counts[:1], counts[2:32_767:2], counts[1:32_767:2], counts[32_767:]]  # head, medium, tiny, p = 0
    p = probs.double() / probs.double().sum()
    expected = [float(p[:1].sum()), float(p[2:32_767:2].sum()), float(p[1:32_767:2].sum())]
    observed = [int(g.sum()) for g in groups]
    assert observed[3] == 0
    assert observed[2] > 0
    assert chi_square_pvalue(np.array(observed[:3]), np.array(expected)) > SIGNIFICANCE


def test_num_samples_draws_independently_from_each_row():
    g = torch.Generator().manual_seed(0)
    probs = torch.tensor([[0.25, 0.0, 0.75], [0.0, 1.0, 0.0]], dtype=torch.float64)
    tokens = sample(probs, g, num_samples=20_000)
    assert tokens.shape == (2, 20_000) and bool((tokens[1] == 1).all()) and not bool((tokens[0] == 1).any())
    assert abs(float((tokens[0] == 2).double().mean()) - 0.75) < 0.015
    assert sample(probs, torch.Generator().manual_seed(3)).tolist() == \
        sample(probs, torch.Generator().manual_seed(3)).tolist()  # a seed reproduces its draws
