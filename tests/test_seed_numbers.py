"""Every number of the annotated paper's worked examples, through the public API (paper 2.3, 3.1-3.6)."""

import pytest
import torch

from specdecode import analysis, output_distribution, residual
from specdecode.rule import keep_probability
from specdecode.toy import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_WORDS


def test_rule_on_the_worked_example():
    p, q = EXAMPLE_P, EXAMPLE_Q
    assert EXAMPLE_WORDS == ("cat", "dog", "fish")
    keep = keep_probability(p, q)
    assert round(float(keep[0]), 3) == 0.833  # keep "cat" with probability 0.5 / 0.6
    assert keep[1:].tolist() == [1.0, 1.0]  # "dog" and "fish" always kept
    rejected = float((q * (1 - keep)).sum())
    assert round(rejected, 1) == 0.1  # 0.6 x 0.167
    assert residual(p, q).tolist() == pytest.approx([0.0, 1.0, 0.0])  # a rejected "cat" becomes "dog"
    final = output_distribution(p, q)
    assert [round(x, 3) for x in final.tolist()] == [0.5, 0.3, 0.2]  # exactly p


def test_acceptance_and_tokens_per_call():
    assert round(analysis.beta([0.5, 0.3, 0.2], [0.6, 0.2, 0.2]), 1) == 0.9
    assert round(0.8 ** (5 + 1), 3) == 0.262
    assert round(analysis.expected_tokens(0.8, 5), 2) == 3.69


def test_speedup_and_extra_arithmetic():
    assert round(analysis.speedup(0.8, 5, 0.05), 2) == 2.95
    assert round(analysis.speedup(0.8, 5, 0), 2) == 3.69
    assert round(analysis.extra_arithmetic(0.8, 5, 0), 2) == 1.63


def test_bigram_draft_of_section_3_6():
    """alpha = 0.2 with c ~ 0 still gives a 1.25x speed-up (at the best gamma)."""
    g = analysis.best_gamma(0.2, 0.0, max_gamma=32)
    assert round(analysis.speedup(0.2, g, 0.0), 2) == 1.25


def test_alpha_one_and_edges():
    assert analysis.expected_tokens(1.0, 5) == 6.0
    assert analysis.speedup(1.0, 5, 0.0) == 6.0
    assert analysis.expected_tokens(0.0, 5) == 1.0
    assert analysis.best_gamma(1.0, 0.0, max_gamma=12) == 12
    assert analysis.best_gamma(0.0, 0.1) == 1
    # the limit alpha -> 1 agrees with the special case
    assert analysis.expected_tokens(1 - 1e-9, 5) == pytest.approx(6.0, rel=1e-6)


def test_best_gamma_is_the_argmax_of_speedup():
    for alpha in (0.3, 0.6, 0.8, 0.9, 0.95):
        for c in (0.0, 0.01, 0.05, 0.2):
            best = analysis.best_gamma(alpha, c, max_gamma=20)
            values = [analysis.speedup(alpha, g, c) for g in range(1, 21)]
            assert values[best - 1] == max(values)


@pytest.mark.parametrize("call", [
    lambda: analysis.expected_tokens(1.5, 5),
    lambda: analysis.expected_tokens(0.5, 0),
    lambda: analysis.speedup(0.5, 3, -0.1),
    lambda: analysis.extra_arithmetic(0.5, 3, float("nan")),
    lambda: analysis.best_gamma(0.5, 0.1, max_gamma=0),
    lambda: analysis.beta([0.5, 0.5], [1.0]),
])
def test_bad_arguments_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_beta_of_batched_rows_is_their_mean():
    p = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    q = torch.tensor([[0.0, 1.0], [0.5, 0.5]])
    assert analysis.beta(p, q) == pytest.approx(0.5)
