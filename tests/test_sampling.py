"""Standardized sampling (paper 2.2): one function turns logits into p and q for every decoding setting."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specdecode import SamplingConfig, adjust, sample


def test_greedy_is_a_point_mass_on_the_argmax_with_ties_to_the_lowest_id():
    logits = torch.tensor([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0]])
    probs = adjust(logits, SamplingConfig(temperature=0))
    assert probs.tolist() == [[0, 1, 0, 0], [1, 0, 0, 0]]


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
    {"temperature": 1e300}, {"temperature": 0.009}, {"top_k": 0},
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
