"""The transformers adapter on tiny random-weight models: KV-cache rollback, sampling exactness, greedy identity."""

import itertools
import random

import numpy as np
import pytest
import torch
from conftest import SIGNIFICANCE, chi_square_pvalue
from tiny import tiny_gpt2, tiny_llama

from specdecode import ModelDraft, SamplingConfig, adjust, generate, generate_plain
from specdecode.models.hf import HFCausalLM


@torch.no_grad()
def fresh_logits(model, tokens: list[int]) -> torch.Tensor:
    """Logits [len, V] of a forward pass over all tokens with no cache."""
    return model(input_ids=torch.tensor([tokens])).logits[0].float()


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2], ids=["llama", "gpt2"])
def test_cached_logits_equal_a_fresh_pass_after_any_accept_reject_pattern(make):
    model = make(vocab_size=32, seed=0)
    lm = HFCausalLM(model)
    rng = random.Random(0)
    tokens = [rng.randrange(32) for _ in range(5)]
    lm.rollback(0)
    lm.extend(torch.tensor(tokens))
    for _ in range(40):
        k = rng.randint(1, 6)  # a verify pass of k tokens ...
        new = [rng.randrange(32) for _ in range(k)]
        got = lm.extend(torch.tensor(new))
        want = fresh_logits(model, tokens + new)[-k:]
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        keep = rng.randint(0, k)  # ... then keep any prefix of it, as after a rejection
        tokens += new[:keep]
        lm.rollback(len(tokens))
        assert lm.length == len(tokens)
    lm.rollback(0)
    torch.testing.assert_close(lm.extend(torch.tensor(tokens[:3])), fresh_logits(model, tokens[:3]))


def test_rollback_out_of_range_is_refused():
    lm = HFCausalLM(tiny_llama())
    lm.extend(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="cannot roll back"):
        lm.rollback(5)


def exact_two_token_distribution(lm: HFCausalLM, prompt: list[int], config: SamplingConfig) -> np.ndarray:
    """P(w1, w2 | prompt) under the adjusted target, enumerating every w1 with fresh forward passes."""
    vocab = lm.vocab_size
    first = adjust(fresh_logits(lm.model, prompt)[-1].double(), config)
    joint = np.zeros((vocab, vocab))
    for w1 in range(vocab):
        second = adjust(fresh_logits(lm.model, prompt + [w1])[-1].double(), config)
        joint[w1] = (first[w1] * second).numpy()
    return joint


@pytest.mark.parametrize("config", [SamplingConfig(temperature=1.0), SamplingConfig(temperature=0.9, top_p=0.8)],
                         ids=["temperature 1", "top-p 0.8"])
def test_sampled_continuations_follow_the_target(config):
    """Target Llama, draft GPT-2 (different architectures, same 8 ids): the first two tokens of 5,000 runs,
    chi-square."""
    target = HFCausalLM(tiny_llama(vocab_size=8, seed=1, scale=8.0))
    draft = ModelDraft(HFCausalLM(tiny_gpt2(vocab_size=8, seed=2)))
    prompt = [3, 1, 4]
    expected = exact_two_token_distribution(target, prompt, config)
    counts = np.zeros((8, 8))
    torch.manual_seed(0)
    accepted = 0
    for _ in range(5000):
        # (3 tokens asked, the first 2 counted: the first is the prefill's, the second a draft's judged by the rule)
        result = generate(target, draft, prompt, max_new_tokens=3, gamma=2, sampling=config)
        counts[tuple(result.new_tokens[:2])] += 1
        accepted += result.stats.tokens_accepted
    assert accepted > 500  # the draft is really being used
    assert chi_square_pvalue(counts, expected) > SIGNIFICANCE


def test_greedy_identity_with_a_tiny_draft_model():
    target = HFCausalLM(tiny_llama(vocab_size=64, seed=3, scale=4.0))
    draft = ModelDraft(HFCausalLM(tiny_llama(vocab_size=64, seed=4, scale=4.0)))
    rng = random.Random(1)
    for gamma, _ in itertools.product((1, 3, 6), range(5)):
        prompt = [rng.randrange(64) for _ in range(rng.randint(1, 8))]
        plain = generate_plain(target, prompt, max_new_tokens=30, sampling=SamplingConfig(0)).new_tokens
        result = generate(target, draft, prompt, max_new_tokens=30, gamma=gamma, sampling=SamplingConfig(0))
        assert result.new_tokens == plain


def test_a_draft_with_a_smaller_vocabulary_is_padded():
    target = HFCausalLM(tiny_llama(vocab_size=40, seed=5, scale=4.0))
    draft = ModelDraft(HFCausalLM(tiny_llama(vocab_size=32, seed=6)), vocab_size=40)
    plain = generate_plain(target, [1, 2], max_new_tokens=20, sampling=SamplingConfig(0)).new_tokens
    result = generate(target, draft, [1, 2], max_new_tokens=20, gamma=3, sampling=SamplingConfig(0))
    assert result.new_tokens == plain


def test_the_context_window_is_respected():
    target = HFCausalLM(tiny_llama(vocab_size=16, max_positions=24))
    draft = ModelDraft(HFCausalLM(tiny_llama(vocab_size=16, seed=9, max_positions=24)))
    result = generate(target, draft, list(range(10)), max_new_tokens=100, gamma=5, seed=0)
    assert result.stop_reason == "context" and 10 + len(result.new_tokens) <= 25


def test_a_prompt_longer_than_the_draft_window_drafts_from_its_most_recent_tokens():
    """GPT-2 cannot go past its position table: a 16-position draft under a 128-position target, prompts of up to 60
    tokens and 40 new ones. It used to fail in `begin` (an index error); it now drafts from its recent window every
    round, and greedy output equals plain decoding."""
    target = HFCausalLM(tiny_llama(vocab_size=16, seed=1, scale=8.0))
    draft = ModelDraft(HFCausalLM(tiny_gpt2(vocab_size=16, seed=1, max_positions=16)))
    rng = random.Random(2)
    for length, gamma in [(15, 4), (16, 5), (17, 1), (40, 3), (60, 16)]:
        prompt = [rng.randrange(16) for _ in range(length)]
        plain = generate_plain(target, prompt, max_new_tokens=40, sampling=SamplingConfig(0)).new_tokens
        result = generate(target, draft, prompt, max_new_tokens=40, gamma=gamma, sampling=SamplingConfig(0))
        assert result.new_tokens == plain
        assert draft.model.length <= 16
        assert result.stats.tokens_drafted >= 40 / 2  # the draft proposed in every round
