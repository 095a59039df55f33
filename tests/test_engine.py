"""The loop (paper 2.1) on toy pairs: exact sequence distributions, greedy identity, caches, stats, bad input.

The sequence-level tests use `prefix_pair`: toy models whose next word depends on the whole prefix, so that a cache
rolled back to the wrong place changes the output (the bigram pair cannot notice), with a draft that is accepted
about 89% of the time, so that most rounds go through the rollback after several accepted drafts.
"""

import itertools

import numpy as np
import pytest
import torch
from conftest import SIGNIFICANCE, chi_square_pvalue

from specdecode import (
    Generation,
    ModelDraft,
    Proposal,
    SamplingConfig,
    adjust,
    expected_tokens,
    generate,
    generate_plain,
)
from specdecode.adaptive import AdaptiveGamma
from specdecode.drafts.base import Draft
from specdecode.drafts.hybrid import HybridDraft
from specdecode.toy import WORDS, BigramLM, PrefixLM, bigram_pair, bigram_tables, prefix_pair

V = len(WORDS)


def exact_continuations(target: PrefixLM, prompt: list[int], length: int, config: SamplingConfig) -> np.ndarray:
    """P(w_1 .. w_length | prompt) under the adjusted target, by enumerating all V^length continuations, each
    prefix through a fresh copy of the model."""
    fresh = PrefixLM(target.table, "fresh", noise_seed=0)
    fresh.offsets = target.offsets

    def next_probs(prefix: tuple[int, ...]) -> np.ndarray:
        fresh.rollback(0)
        return adjust(fresh.extend(torch.tensor([*prompt, *prefix]))[-1].double(), config).numpy()

    probs = np.ones([V] * length)
    for depth in range(length):
        for prefix in itertools.product(range(V), repeat=depth):
            row = next_probs(prefix)
            for rest in itertools.product(range(V), repeat=length - depth):
                probs[(*prefix, *rest)] *= row[rest[0]]
    return probs


def checked_run(generation: Generation) -> list[int]:
    """Run a generation, asserting after every round the engine's cache invariant: the target's cache holds exactly
    the context but its last token (prompt and output so far)."""
    context = list(generation.prompt)
    for rnd in generation:
        context += rnd.emitted
        assert generation.target.tokens == context[:-1], f"the target's cache is off after round {rnd}"
    return generation.new_tokens


@pytest.mark.parametrize("config", [SamplingConfig(temperature=1.0), SamplingConfig(temperature=0.8, top_p=0.8)],
                         ids=["temperature 1", "temperature 0.8 top-p 0.8"])
@pytest.mark.parametrize("gamma", [1, 2])
def test_three_token_continuations_follow_the_target_exactly(config, gamma):
    """Chi-square of 12,000 speculative runs against the exactly enumerated distribution over all 512 outcomes.
    gamma 1 and 2 are every schedule there is here: the round after the prefill's drafts min(gamma, 2) tokens and any
    later one at most 1, so a larger gamma runs exactly as 2 does."""
    target, draft = prefix_pair(seed=0)
    prompt = [0, 1]  # "the cat"
    expected = exact_continuations(target, prompt, 3, config)
    counts = np.zeros([V] * 3)
    torch.manual_seed(gamma)
    accepted = 0
    for _ in range(12_000):
        # (4 tokens asked, the first 3 counted: the first is the prefill's, so the round after it drafts 2)
        result = generate(target, draft, prompt, max_new_tokens=4, gamma=gamma, sampling=config)
        counts[tuple(result.new_tokens[:3])] += 1
        accepted += result.stats.tokens_accepted
    assert chi_square_pvalue(counts, expected) > SIGNIFICANCE
    assert accepted > 12_000 * 0.5 * min(gamma, 2)  # most rounds accept drafts, so most go through the rollback


def test_prompt_lookup_then_a_draft_model_follows_the_target_exactly():
    """The hybrid draft on a prompt that repeats itself ("the cat sat the cat"): lookup proposes when the last two
    tokens occurred before, the draft model otherwise; both branches happen, and the output is still the target's."""
    target, draft = prefix_pair(seed=0)
    prompt = [0, 1, 2, 0, 1]
    expected = exact_continuations(target, prompt, 3, SamplingConfig())
    counts = np.zeros([V] * 3)
    torch.manual_seed(11)
    passes = 0
    for _ in range(12_000):
        result = generate(target, HybridDraft(ModelDraft(draft)), prompt, max_new_tokens=3, gamma=3)
        counts[tuple(result.new_tokens)] += 1
        passes += result.stats.draft_calls
    assert chi_square_pvalue(counts, expected) > SIGNIFICANCE
    assert 0 < passes < 12_000 * 3  # the draft model ran in some rounds, lookup served others


def test_a_draft_that_stops_when_unsure_follows_the_target_exactly():
    """A draft model that stops drafting after a guess whose probability is below 0.45 (about half its guesses
    here): when to stop depends on its own lists only, so the output is still the target's (the same chi-square over
    12,000 runs of up to 3 drafts a round), and both kinds of round happen."""
    target, draft = prefix_pair(seed=0)
    prompt = [0, 1]
    config = SamplingConfig(temperature=1.0)
    expected = exact_continuations(target, prompt, 3, config)
    counts = np.zeros([V] * 3)
    torch.manual_seed(5)
    stopped = rounds = 0
    for _ in range(12_000):
        result = generate(target, ModelDraft(draft, confidence=0.45), prompt, max_new_tokens=4, gamma=3,
                          sampling=config)
        counts[tuple(result.new_tokens[:3])] += 1
        stopped += result.stats.stopped_rounds
        rounds += sum(g > 0 for g in result.stats.drafted_per_round)
    assert chi_square_pvalue(counts, expected) > SIGNIFICANCE
    assert 0.2 * rounds < stopped < 0.8 * rounds


def test_a_draft_stops_after_its_first_unsure_guess_and_proposes_it():
    target, draft_model = prefix_pair(seed=0)
    context = [0, 1]
    for confidence, gamma, drafted, stopped in [(0.0, 3, 3, False), (1.0, 3, 1, True), (1.0, 1, 1, False)]:
        draft = ModelDraft(draft_model, confidence=confidence)
        draft.begin(context)
        proposal = draft.propose(context, gamma, SamplingConfig(temperature=0), None)
        assert (len(proposal.tokens), proposal.forward_passes, proposal.stopped) == (drafted, drafted, stopped)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="confidence threshold"):
            ModelDraft(draft_model, confidence=bad)
    # greedy output is plain decoding's, whatever stops the draft makes
    plain = generate_plain(target, context, max_new_tokens=30, sampling=SamplingConfig(temperature=0))
    spec = generate(target, ModelDraft(draft_model, confidence=0.45), context, max_new_tokens=30, gamma=4,
                    sampling=SamplingConfig(temperature=0))
    assert spec.new_tokens == plain.new_tokens and spec.stats.stopped_rounds > 0


def test_the_sequence_test_catches_a_draft_sampled_without_correction():
    """Negative control: outputting the draft's own samples (no rule) is rejected by the same test."""
    target, draft = prefix_pair(seed=0)
    expected = exact_continuations(target, [0, 1], 3, SamplingConfig())
    counts = np.zeros([V] * 3)
    torch.manual_seed(0)
    for _ in range(12_000):
        counts[tuple(generate_plain(draft, [0, 1], max_new_tokens=3).new_tokens)] += 1
    assert chi_square_pvalue(counts, expected) < SIGNIFICANCE


class _KeepsOneRejected(PrefixLM):
    """A cache whose rollback is off by one: after a rejection it keeps the first rejected draft."""

    def rollback(self, length: int) -> None:
        super().rollback(min(length + 1, self.length) if 0 < length < self.length else length)


def test_the_sequence_tests_catch_a_rollback_off_by_one():
    """Negative control: the same cache bug that the bigram pair cannot see (it only reads the last word) changes
    the prefix pair's greedy output and breaks the cache invariant."""
    table, draft = prefix_pair(seed=3)[0].table, prefix_pair(seed=3)[1]
    broken = _KeepsOneRejected(table, "broken", noise_seed=3)
    prompts = [[0], [1, 4], [7, 7, 2], [3, 5, 6, 1]]
    greedy = SamplingConfig(0)
    differs = sum(generate(broken, draft, p, max_new_tokens=30, gamma=4, sampling=greedy).new_tokens !=
                  generate_plain(broken, p, max_new_tokens=30, sampling=greedy).new_tokens for p in prompts)
    assert differs > 0
    caught = 0
    for p in prompts:
        try:
            checked_run(Generation(broken, draft, p, max_new_tokens=30, gamma=4, sampling=greedy))
        except AssertionError as error:
            caught += "cache is off" in str(error)
    assert caught > 0
    bigram_target, bigram_draft = bigram_pair(seed=3)
    blind = type("Blind", (BigramLM,), {"rollback": lambda self, n: BigramLM.rollback(
        self, min(n + 1, self.length) if 0 < n < self.length else n)})(bigram_target.table, "blind")
    assert all(generate(blind, bigram_draft, p, max_new_tokens=30, gamma=4, sampling=greedy).new_tokens ==
               generate_plain(blind, p, max_new_tokens=30, sampling=greedy).new_tokens
               for p in prompts)  # why a bigram cannot tell


@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
def test_greedy_speculative_output_is_identical_to_plain(gamma):
    target, draft = prefix_pair(seed=3)
    rng = np.random.default_rng(0)
    accepted = drafted = 0
    for _ in range(40):
        prompt = rng.integers(0, V, size=int(rng.integers(1, 6))).tolist()
        plain = generate_plain(target, prompt, max_new_tokens=30, sampling=SamplingConfig(0)).new_tokens
        generation = Generation(target, draft, prompt, max_new_tokens=30, gamma=gamma, sampling=SamplingConfig(0))
        assert checked_run(generation) == plain
        assert len(plain) == 30
        accepted += generation.stats.tokens_accepted
        drafted += generation.stats.tokens_drafted
    assert accepted > 0.6 * drafted  # most drafts were accepted, so most rounds rolled back after accepted drafts


def test_sampled_runs_keep_the_cache_invariant_and_seeds_reproduce():
    target, draft = prefix_pair(seed=1)
    for gamma, seed in itertools.product((2, 5), range(5)):
        runs = [checked_run(Generation(target, draft, [seed % V], max_new_tokens=40, gamma=gamma, seed=seed))
                for _ in range(2)]
        assert runs[0] == runs[1]


def test_a_draft_with_a_short_window_drafts_from_its_most_recent_tokens():
    """A draft of window 6 under prompts of up to 20 tokens: every proposal's q is the draft's own distribution after
    the last few tokens of the context (a fresh pass over the view the draft says it sees), the window is never
    overrun (the toy raises), and greedy output equals plain decoding."""
    target, full_draft = prefix_pair(seed=2)
    short = PrefixLM(full_draft.table, "short", noise_seed=2, max_length=6)
    fresh = PrefixLM(full_draft.table, "fresh", noise_seed=2)
    draft = ModelDraft(short)
    greedy = SamplingConfig(0)
    for length, gamma in itertools.product((3, 6, 7, 20), (1, 3, 6, 9)):
        prompt = [(i * 5 + length) % V for i in range(length)]
        draft.begin(prompt)
        proposal = draft.propose(prompt, gamma, SamplingConfig(), torch.Generator().manual_seed(0))
        assert 1 <= len(proposal.tokens) <= min(gamma, 6)
        fresh.rollback(0)
        want = adjust(fresh.extend(torch.tensor(prompt[draft.start:]))[-1], SamplingConfig())
        torch.testing.assert_close(proposal.probs[0], want)
        plain = generate_plain(target, prompt, max_new_tokens=25, sampling=greedy).new_tokens
        assert generate(target, draft, prompt, max_new_tokens=25, gamma=gamma, sampling=greedy).new_tokens == plain


def test_a_draft_model_is_fed_the_prompt_at_its_first_proposal_timed_as_prefill():
    """`begin` runs no pass (a request that decodes plainly never pays the draft's prefill); the first proposal feeds
    the prompt, timed apart as catch_up_seconds, and drafts from it as an eager prefill would; a later round with a
    short backlog has nothing to catch up."""
    target, draft_model = prefix_pair(seed=3)
    fresh = PrefixLM(draft_model.table, "fresh", noise_seed=3)
    draft = ModelDraft(draft_model)
    prompt = [(3 * i + 1) % V for i in range(40)]
    draft.begin(prompt)
    assert draft_model.length == 0 and draft.behind(prompt) == len(prompt) - 1  # (the last one rides in a draft pass)
    first = draft.propose(prompt, 3, SamplingConfig(), torch.Generator().manual_seed(0))
    assert first.catch_up_seconds > 0 and draft_model.length == len(prompt) + 2
    torch.testing.assert_close(first.probs[0], adjust(fresh.extend(torch.tensor(prompt))[-1], SamplingConfig()))
    context = prompt + first.tokens[:1].tolist() + [5]  # one draft accepted, then a corrected token
    assert draft.behind(context) == 0 and draft.behind(context + [6, 7]) == 2  # (the last token rides in a pass)
    assert HybridDraft(draft).behind(context + [6, 7]) == 2
    later = draft.propose(context, 3, SamplingConfig(), torch.Generator().manual_seed(0))
    assert later.catch_up_seconds == 0 and len(later.tokens) == 3

    class Plain(AdaptiveGamma):  # chooses plain decoding every round
        def choose(self, copied: bool = False, behind: int = 0, remaining: int | None = None) -> int:
            return 0

    plain = generate(target, ModelDraft(draft_model), prompt, max_new_tokens=8, gamma=Plain(),
                     sampling=SamplingConfig(0))
    assert draft_model.length == 0 and plain.stats.draft_calls == 0 and len(plain.new_tokens) == 8


def test_greedy_is_identical_even_with_a_poor_draft():
    target = bigram_pair(seed=0)[0]
    poor = BigramLM(torch.softmax(torch.randn(V, V, generator=torch.Generator().manual_seed(1)), -1), "poor")
    for prompt in ([0], [1, 4], [7, 7, 2]):
        plain = generate_plain(target, prompt, max_new_tokens=25, sampling=SamplingConfig(0)).new_tokens
        result = generate(target, poor, prompt, max_new_tokens=25, gamma=4, sampling=SamplingConfig(0))
        assert result.new_tokens == plain


@pytest.mark.parametrize("gamma", [3, 5, 7])
def test_tokens_per_target_call_matches_the_formula(gamma):
    """A long run: measured tokens per target call within 2% of expected_tokens(measured alpha, gamma)."""
    target, draft = bigram_pair(seed=0)
    stats = generate(target, draft, [0], max_new_tokens=30_000, gamma=gamma, seed=11).stats
    assert stats.tokens_per_target_call == pytest.approx(expected_tokens(stats.alpha, gamma), rel=0.02)
    assert 0.85 <= stats.alpha <= 1.0  # the draft agrees 85-100% of the time


def test_toy_draft_agrees_85_to_100_percent_in_every_row():
    p, q = bigram_tables(seed=0)
    agreement = torch.minimum(p, q).sum(dim=1)
    assert torch.all(agreement >= 0.85) and torch.all(agreement < 1.0)


def test_stats_are_consistent():
    target, draft = bigram_pair(seed=0)
    result = generate(target, draft, [0], max_new_tokens=200, gamma=4, seed=5)
    s = result.stats
    assert s.rounds == s.target_calls == len(result.rounds) == len(s.accepted_per_round)
    assert s.tokens_accepted == sum(r.n_accepted for r in result.rounds)
    assert s.tokens_drafted == sum(len(r.drafted) for r in result.rounds)
    assert s.draft_calls == s.tokens_drafted  # one draft forward pass per drafted token
    assert s.new_tokens == len(result.new_tokens) == 200 == sum(len(r.emitted) for r in result.rounds)
    assert s.rejections == sum(r.kind == "corrected" for r in result.rounds)
    assert s.prefill_rounds == 1 and not result.rounds[0].drafted  # the first token: the prefill's
    assert s.tested_at[0] == sum(1 for r in result.rounds if r.drafted) and s.accepted_at[0] <= s.tested_at[0]
    assert all(1 <= len(r.emitted) <= len(r.drafted) + 1 for r in result.rounds)  # every round yields a token
    assert s.tokens_per_target_call == pytest.approx(200 / s.target_calls)


def test_plain_decoding_makes_one_target_call_per_token():
    target, _ = bigram_pair()
    s = generate_plain(target, [0], max_new_tokens=50, seed=1).stats
    assert s.target_calls == s.rounds == 50 and s.tokens_per_target_call == 1.0 and s.alpha is None


def test_a_round_that_overshoots_is_trimmed_and_seeds_reproduce():
    target, draft = bigram_pair()
    for n in (0, 1, 2, 7, 13):
        result = generate(target, draft, [0], max_new_tokens=n, gamma=5, seed=2)
        assert len(result.new_tokens) == n
    twice = [generate(target, draft, [0], max_new_tokens=40, seed=9).new_tokens for _ in range(2)]
    assert twice[0] == twice[1]


def test_stop_tokens_end_the_output_after_the_stop_token():
    target, draft = bigram_pair()
    stop = WORDS.index("mat")
    result = generate(target, draft, [0], max_new_tokens=500, gamma=5, seed=4, stop_token_ids=[stop])
    assert result.stop_reason == "stop_token"
    assert result.new_tokens[-1] == stop and stop not in result.new_tokens[:-1]


class _NoGuess(Draft):
    """A draft that never proposes anything: every round is then a plain target step."""

    name, vocab_size = "none", V

    def begin(self, prompt_ids):
        pass

    def propose(self, context, gamma, sampling, generator):
        return Proposal.empty(V)


def test_a_draft_may_propose_nothing():
    target, _ = bigram_pair()
    result = generate(target, _NoGuess(), [0], max_new_tokens=10, gamma=4, seed=1)
    assert result.new_tokens == generate_plain(target, [0], max_new_tokens=10, seed=1).new_tokens
    assert result.stats.target_calls == 10


def test_a_draft_model_with_a_smaller_vocabulary_is_padded_with_zero_probability():
    p, _ = bigram_tables()
    small = BigramLM(torch.softmax(torch.randn(6, 6, generator=torch.Generator().manual_seed(0)), -1), "small")

    class Wide(BigramLM):  # accepts any target id, predicts over its own 6 words
        def extend(self, tokens, keep=None):
            return super().extend(tokens.clamp(max=5), keep)

    draft = ModelDraft(Wide(small.table, "small"), vocab_size=V)
    result = generate(BigramLM(p, "t"), draft, [0], max_new_tokens=60, gamma=3, seed=0)
    drafted = [t for r in result.rounds for t in r.drafted]
    assert max(drafted) <= 5 and len(result.new_tokens) == 60


def test_the_context_window_ends_generation():
    target, draft = bigram_pair()
    target.max_length = draft.max_length = 10
    result = generate(target, draft, [0, 1, 4], max_new_tokens=100, gamma=5, seed=0)
    assert result.stop_reason == "context" and len(result.new_tokens) == 8  # 3 + 8 = 11 = window + one last token


@pytest.mark.parametrize("kwargs, message", [
    ({"gamma": 0}, "gamma"),
    ({"gamma": -3}, "gamma"),
    ({"max_new_tokens": -1}, "max_new_tokens"),
    ({"prompt_ids": []}, "empty"),
    ({"prompt_ids": [0, 99]}, "outside the vocabulary"),
    ({"prompt_ids": "the cat"}, "token ids"),
    ({"sampling": "greedy"}, "SamplingConfig"),
])
def test_bad_arguments_raise_clear_value_errors(kwargs, message):
    target, draft = bigram_pair()
    args = {"prompt_ids": [0], "max_new_tokens": 5, "gamma": 3} | kwargs
    with pytest.raises(ValueError, match=message):
        generate(target, draft, **args)


def test_the_options_are_passed_by_name():
    """Positions cannot bind a value to the wrong option: every option after the prompt is keyword-only."""
    target, draft = bigram_pair()
    with pytest.raises(TypeError):
        generate(target, draft, [0], 5)
    with pytest.raises(TypeError, match="gamma"):
        generate_plain(target, [0], max_new_tokens=5, gamma=3)


def test_mismatched_vocabularies_are_refused():
    target, _ = bigram_pair()
    other = BigramLM(torch.full((5, 5), 0.2), "five words")
    with pytest.raises(ValueError, match="vocabularies differ in size: target 8, draft 5"):
        generate(target, other, [0], max_new_tokens=5)


def test_the_prompt_must_fit_the_context_window():
    target, draft = bigram_pair()
    target.max_length = 4
    with pytest.raises(ValueError, match="context window"):
        Generation(target, draft, [0, 1, 2, 3], max_new_tokens=5)


def test_a_prompt_tensor_is_accepted():
    target, draft = bigram_pair()
    a = generate(target, draft, torch.tensor([0, 1]), max_new_tokens=10, seed=3).new_tokens
    assert a == generate(target, draft, [0, 1], max_new_tokens=10, seed=3).new_tokens


def test_the_hybrid_copies_when_the_text_repeats_and_asks_the_model_otherwise():
    target, draft = bigram_pair(seed=0)
    hybrid = HybridDraft(ModelDraft(draft))
    hybrid.begin([3, 4, 5, 6, 3, 4])
    copied = hybrid.propose([3, 4, 5, 6, 3, 4], 2, SamplingConfig(), None)
    assert copied.tokens.tolist() == [5, 6] and copied.forward_passes == 0  # "3 4" occurred before: copy "5 6"
    assert hybrid.copies([3, 4, 5, 6, 3, 4])  # and says so before proposing, for adaptive gamma to price it
    guessed = hybrid.propose([3, 4, 5, 6, 3, 4, 7], 2, SamplingConfig(), None)
    assert guessed.forward_passes == 2 and (guessed.probs > 0).sum(-1).gt(1).all()  # "4 7" is new: the model's q
    assert not hybrid.copies([3, 4, 5, 6, 3, 4, 7]) and not ModelDraft(draft).copies([3, 4, 3])


def test_a_draft_that_is_the_target_itself_is_refused():
    """They would share one cache (the output then drifted from the target's by a total variation of 0.76)."""
    target, _ = bigram_pair()
    for draft in (target, ModelDraft(target)):
        with pytest.raises(ValueError, match="the draft is the target model itself"):
            generate(target, draft, [0], max_new_tokens=5, gamma=2)


def test_greedy_decoding_of_nan_logits_is_an_error():
    class Broken(BigramLM):
        def extend(self, tokens, keep=None):
            return torch.full_like(super().extend(tokens, keep), float("nan"))

    target, draft = bigram_pair()
    broken = Broken(target.table, "broken")
    with pytest.raises(ValueError, match="NaN"):
        generate_plain(broken, [0], max_new_tokens=3, sampling=SamplingConfig(0))
    with pytest.raises(ValueError, match="NaN"):
        generate(broken, draft, [0], max_new_tokens=3, gamma=2, sampling=SamplingConfig(0))


def test_a_seed_pins_the_auto_schedule_only_where_the_schedule_could_change_the_text():
    """With a seed, gamma "auto" follows a timing-free schedule so that the seed repeats the text; greedy decoding on a
    batch-invariant target gives plain greedy text whatever the schedule, so there timings choose gamma."""
    target, draft = prefix_pair(seed=0)

    def timed(sampling, seed, invariant):
        target.batch_invariant = invariant
        try:
            return Generation(target, draft, [1, 2], max_new_tokens=4, gamma="auto", sampling=sampling,
                              seed=seed).controller.fixed_costs is None
        finally:
            del target.batch_invariant

    greedy, sampled = SamplingConfig(0), SamplingConfig(1.0)
    assert timed(greedy, None, False) and timed(sampled, None, True)  # unseeded: timed
    assert timed(greedy, 7, True)  # greedy on an invariant target: the seed pins nothing
    assert not timed(greedy, 7, False) and not timed(sampled, 7, True)
