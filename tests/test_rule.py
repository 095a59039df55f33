"""The rule (paper 2.3) keeps the target's distribution exactly: analytically, and in 100,000-draw chi-square tests."""

import numpy as np
import pytest
import torch
from conftest import SIGNIFICANCE, chi_square_pvalue
from hypothesis import given, settings
from hypothesis import strategies as st

from specdecode import GREEDY, SamplingConfig, adjust, output_distribution, sample, verify, verify_greedy

CONFIGS = {
    "greedy": SamplingConfig(temperature=0),
    "temperature 0.7": SamplingConfig(temperature=0.7),
    "top-k 3": SamplingConfig(top_k=3),
    "top-p 0.8": SamplingConfig(top_p=0.8),
}

any_config = st.one_of(
    st.sampled_from(list(CONFIGS.values())),
    st.builds(SamplingConfig, temperature=st.floats(0.05, 4.0), top_k=st.one_of(st.none(), st.integers(1, 60)),
              top_p=st.one_of(st.none(), st.floats(0.05, 1.0))),
)


@settings(max_examples=300, deadline=None)
@given(config=any_config, seed=st.integers(0, 2**31), vocab=st.integers(2, 60),
       closeness=st.sampled_from([0.0, 0.1, 1.0, 5.0]))
def test_analytic_output_distribution_is_p(config, seed, vocab, closeness):
    """q keep + P(reject) p' == p to 1e-6, for lists made by `adjust` from random logits under any config."""
    g = torch.Generator().manual_seed(seed)
    target_logits = torch.randn(3, vocab, generator=g, dtype=torch.float64) * 3
    draft_logits = target_logits + closeness * torch.randn(3, vocab, generator=g, dtype=torch.float64)
    p, q = adjust(target_logits, config), adjust(draft_logits, config)
    assert torch.allclose(output_distribution(p, q), p, atol=1e-6, rtol=0)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**31), vocab=st.integers(2, 30))
def test_analytic_output_distribution_is_p_for_one_hot_and_equal_lists(seed, vocab):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(vocab, generator=g, dtype=torch.float64), -1)
    one_hot = torch.nn.functional.one_hot(torch.randint(vocab, (), generator=g), vocab).to(torch.float64)
    assert torch.allclose(output_distribution(p, one_hot), p, atol=1e-6, rtol=0)
    assert torch.allclose(output_distribution(p, p), p, atol=1e-6, rtol=0)


def _random_round(config: SamplingConfig, gamma: int, seed: int):
    """p [gamma+1, V] and q [gamma, V] from random logits (draft = target + noise), V drawn from 10..50."""
    g = torch.Generator().manual_seed(seed)
    vocab = int(torch.randint(10, 51, (), generator=g))
    target_logits = torch.randn(gamma + 1, vocab, generator=g, dtype=torch.float64) * 2
    draft_logits = target_logits[:gamma] + torch.randn(gamma, vocab, generator=g, dtype=torch.float64)
    return adjust(target_logits, config), adjust(draft_logits, config)


def _emitted(p, q, draws, seed, rule=verify):
    """Run `draws` independent rounds in one batched call -> (tokens [draws, gamma+1], n_accepted [draws])."""
    g = torch.Generator().manual_seed(seed)
    gamma = q.shape[0]
    drafts = sample(q.expand(draws, gamma, -1), g)  # [draws, gamma]
    n, nxt = rule(p.expand(draws, -1, -1), q.expand(draws, -1, -1), drafts, g)
    tokens = torch.cat([drafts, torch.zeros(draws, 1, dtype=torch.int64)], dim=1)
    tokens[torch.arange(draws), n] = nxt  # emitted: accepted drafts, then the corrected or bonus token
    return tokens, n


def _position_pvalues(p, tokens, n):
    """For each position k, among rounds that emitted it (n >= k), a chi-square test of the token against p[k]."""
    pvalues = []
    for k in range(p.shape[0]):
        reached = n >= k
        counts = np.bincount(tokens[reached, k].numpy(), minlength=p.shape[1])
        pvalues.append(chi_square_pvalue(counts, p[k].numpy()))
    return pvalues


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("gamma", [1, 3])
def test_rule_reproduces_p_token_by_token(name, gamma):
    """100,000 rounds per config: at every position the emitted token is distributed as that row of p."""
    p, q = _random_round(CONFIGS[name], gamma, seed=gamma)
    tokens, n = _emitted(p, q, 100_000, seed=7)
    pvalues = _position_pvalues(p, tokens, n)
    assert min(pvalues) > SIGNIFICANCE, pvalues
    if name == "greedy":  # a point mass: every emitted token is the target's arg-max
        assert torch.equal(tokens[n >= 0, 0], p[0].argmax().expand(100_000))


def test_the_harness_catches_a_wrong_rule():
    """Negative controls: the same test rejects a rule that keeps every draft, and one that forgets max(0, .)."""
    p, q = _random_round(CONFIGS["temperature 0.7"], 1, seed=1)

    def accept_all(target_probs, draft_probs, draft_tokens, generator):
        return torch.ones(draft_tokens.shape[0], dtype=torch.int64), sample(target_probs[:, -1], generator)

    def no_residual(target_probs, draft_probs, draft_tokens, generator):
        n, _ = verify(target_probs, draft_probs, draft_tokens, generator)
        redraw = sample(target_probs[:, 0], generator)  # redraws from p instead of norm(max(0, p - q))
        bonus = sample(target_probs[:, -1], generator)
        return n, torch.where(n == 0, redraw, bonus)

    for wrong in (accept_all, no_residual):
        tokens, n = _emitted(p, q, 100_000, seed=7, rule=wrong)
        assert _position_pvalues(p, tokens, n)[0] < SIGNIFICANCE


def test_equal_lists_accept_every_draft():
    p = torch.softmax(torch.randn(4, 20, generator=torch.Generator().manual_seed(0)), -1)
    tokens, n = _emitted(p, p[:3], 5000, seed=0)
    assert torch.all(n == 3)


def test_a_token_the_target_rules_out_is_never_accepted():
    p = torch.tensor([[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]])
    q = torch.tensor([[1.0, 0.0, 0.0]])  # always drafts token 0, which p forbids
    tokens, n = _emitted(p, q, 20000, seed=0)
    assert torch.all(n == 0) and torch.all(tokens[:, 0] != 0)


def test_a_draft_token_with_q_zero_is_kept():
    """If a draft reports q(x) = 0 for its own token (a rounding corner), the rule keeps it, not dividing by 0."""
    p = torch.tensor([[[0.5, 0.5], [0.5, 0.5]]])
    q = torch.tensor([[[1.0, 0.0]]])
    n, _ = verify(p, q, torch.tensor([[1]]))
    assert n.tolist() == [1]


def test_rows_that_do_not_sum_to_one_are_renormalised():
    p, q = _random_round(CONFIGS["temperature 0.7"], 3, seed=3)
    a, na = _emitted(p, q, 20000, seed=5)
    b, nb = _emitted(p * 3.0, q * 0.5, 20000, seed=5)
    assert (na == nb).float().mean() > 0.999 and (a[:, 0] == b[:, 0]).float().mean() > 0.999


def test_gamma_zero_is_a_plain_draw_from_p():
    p = torch.tensor([[[0.2, 0.8]]]).expand(50000, 1, 2)
    n, token = verify(p, torch.empty(50000, 0, 2), torch.empty(50000, 0, dtype=torch.int64),
                      torch.Generator().manual_seed(0))
    assert torch.all(n == 0)
    assert chi_square_pvalue(np.bincount(token.numpy(), minlength=2), np.array([0.2, 0.8])) > SIGNIFICANCE


def test_shape_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="shapes do not agree"):
        verify(torch.ones(1, 3, 4), torch.ones(1, 3, 4), torch.zeros(1, 3, dtype=torch.int64))


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**31), vocab=st.integers(2, 40), gamma=st.integers(0, 6), ties=st.booleans(),
       draft_config=any_config)
def test_the_greedy_shortcut_is_the_rule_with_a_point_mass_p(seed, vocab, gamma, ties, draft_config):
    """verify_greedy(logits, drafts) == verify(adjust(logits, greedy), q, drafts) for drafts drawn from any q (a
    sampled draft, an arg-max draft, ...), tied logits included (both take the lowest tied id)."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(gamma + 1, vocab, generator=gen)
    if ties:
        logits = logits.round()  # many exact ties
    q = adjust(torch.randn(gamma, vocab, generator=gen), draft_config)
    # drafts: from q, but often the target's own arg-max, so that runs of acceptances happen
    drafts = sample(q, gen) if gamma else torch.empty(0, dtype=torch.int64)
    use_best = torch.rand(gamma, generator=gen) < 0.7
    drafts = torch.where(use_best & (q.gather(-1, logits[:-1].argmax(-1, keepdim=True)).squeeze(-1) > 0),
                         logits[:-1].argmax(-1), drafts) if gamma else drafts
    n, token = verify(adjust(logits, GREEDY)[None], q[None], drafts[None], gen)
    assert verify_greedy(logits, drafts) == (int(n), int(token))
