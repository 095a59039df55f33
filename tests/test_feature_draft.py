"""The feature-level (EAGLE-3) draft: its checkpoint layout, its proposals, exactness with it, and its training.

A tiny random Llama target (8 layers, so the head reads the streams entering layers 2, 4 and 5) and heads made by
the trainer's own initialisation: no download, seconds per test."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from scipy import stats

from specdecode import SamplingConfig, generate, generate_plain
from specdecode.bench.tiny import tiny_llama_checkpoint, word_tokenizer
from specdecode.distill.eagle import EagleBudget, initial_tensors, train_eagle
from specdecode.distill.eagle.loss import rollout_mask
from specdecode.drafts.feature import FeatureDraft
from specdecode.load import load_draft, load_target
from specdecode.models.eagle import ARCHITECTURE, TENSORS, eagle_config, save_eagle

VOCAB_WORDS = 10  # V = 12 with <unk> and </s>
GREEDY = SamplingConfig(0.0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    directory = tiny_llama_checkpoint(tmp_path_factory.mktemp("eagle") / "target",
                                      word_tokenizer([f"w{i}" for i in range(VOCAB_WORDS)]), hidden=64, layers=8,
                                      scale=3.0)
    return load_target(str(directory), engine="native")


def make_head(target, directory, draft_vocab=None, seed=0):
    config = json.loads((target.source / "config.json").read_text())
    vocabulary = torch.arange(config["vocab_size"])[: draft_vocab or config["vocab_size"]]
    head_config = eagle_config(config, len(vocabulary), target.name)
    tensors = initial_tensors(target, head_config, vocabulary, seed)
    g = torch.Generator().manual_seed(seed + 1)  # a random head that drafts something other than the target's top
    for name in ("midlayer.self_attn.o_proj.weight", "midlayer.mlp.down_proj.weight"):
        tensors[name] = torch.randn(tensors[name].shape, generator=g) * 0.3
    save_eagle(directory, tensors, head_config)
    return directory


def test_the_saved_layout_has_every_key_an_eagle3_loader_reads(tiny, tmp_path):
    directory = make_head(tiny, tmp_path / "head", draft_vocab=8)
    config = json.loads((directory / "config.json").read_text())
    target_config = json.loads((tiny.source / "config.json").read_text())
    D, V = target_config["hidden_size"], target_config["vocab_size"]
    assert config["architectures"] == [ARCHITECTURE] and config["model_type"] == "llama"
    assert config["num_hidden_layers"] == 1 and config["draft_vocab_size"] == 8 and config["vocab_size"] == V
    assert config["target_hidden_size"] == D == config["hidden_size"]
    for key in ("num_attention_heads", "num_key_value_heads", "intermediate_size", "rms_norm_eps",
                "max_position_embeddings"):
        assert config[key] == target_config[key], key
    assert config["rope_theta"] == tiny.model.shape.rope_theta and config["head_dim"] == tiny.model.shape.head_dim
    H, KV, inner = config["num_attention_heads"], config["num_key_value_heads"], config["intermediate_size"]
    hd = D // H
    expected = {
        "fc.weight": (D, 3 * D), "midlayer.input_layernorm.weight": (D,), "midlayer.hidden_norm.weight": (D,),
        "midlayer.self_attn.q_proj.weight": (H * hd, 2 * D), "midlayer.self_attn.k_proj.weight": (KV * hd, 2 * D),
        "midlayer.self_attn.v_proj.weight": (KV * hd, 2 * D), "midlayer.self_attn.o_proj.weight": (D, H * hd),
        "midlayer.post_attention_layernorm.weight": (D,), "midlayer.mlp.gate_proj.weight": (inner, D),
        "midlayer.mlp.up_proj.weight": (inner, D), "midlayer.mlp.down_proj.weight": (D, inner),
        "norm.weight": (D,), "lm_head.weight": (8, D), "d2t": (8,), "t2d": (V,),
    }
    assert set(expected) == set(TENSORS)
    with safe_open(str(directory / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == set(expected)
        for name, shape in expected.items():
            tensor = f.get_tensor(name)
            assert tuple(tensor.shape) == shape, name
        d2t, t2d = f.get_tensor("d2t"), f.get_tensor("t2d")
    assert d2t.dtype == torch.int64 and t2d.dtype == torch.bool
    target_ids = torch.arange(8) + d2t  # vLLM's and SGLang's reading of d2t
    assert t2d.sum() == 8 and t2d[target_ids].all()
    draft = load_draft(f"eagle:{directory}", tiny)
    assert isinstance(draft, FeatureDraft) and draft.vocab_size == V
    assert torch.equal(draft.head.draft_ids, target_ids)


def test_proposals_have_the_right_shapes_and_q_is_zero_outside_the_draft_vocabulary(tiny, tmp_path):
    draft = load_draft(f"eagle:{make_head(tiny, tmp_path / 'head', draft_vocab=6)}", tiny)
    result = generate(tiny.model, draft, [2, 3, 4, 5], max_new_tokens=12, gamma=3, sampling=SamplingConfig(1.0), seed=0)
    assert result.stats.tokens_drafted > 0
    context = [2, 3, 4, 5, *result.new_tokens]
    draft_vocabulary = set(draft.head.draft_ids.tolist())
    # The draft is in step with the target after the run: propose again on the full context.
    tiny.model.rollback(0)
    tiny.model.extend(torch.tensor(context[:-1]), keep=1)
    draft.begin(context)
    draft.observe(tiny.model.features)
    proposal = draft.propose(context, 3, SamplingConfig(1.0), torch.Generator().manual_seed(0))
    assert proposal.tokens.shape == (3,) and proposal.probs.shape == (3, tiny.model.vocab_size)
    assert torch.allclose(proposal.probs.sum(-1), torch.ones(3))
    outside = [t for t in range(tiny.model.vocab_size) if t not in draft_vocabulary]
    assert (proposal.probs[:, outside] == 0).all()
    assert set(proposal.tokens.tolist()) <= draft_vocabulary


def test_the_first_draft_is_drawn_from_the_q_it_reports(tiny, tmp_path):
    """Chi-square of 3000 first drafts against the q row reported with them (same context each time)."""
    draft = load_draft(f"eagle:{make_head(tiny, tmp_path / 'head')}", tiny)
    context = [2, 7, 3, 9, 4]
    tiny.model.rollback(0)
    tiny.model.extend(torch.tensor(context[:-1]), keep=1)
    draft.begin(context)
    draft.observe(tiny.model.features)
    generator = torch.Generator().manual_seed(1)
    counts = np.zeros(tiny.model.vocab_size)
    q = None
    for _ in range(3000):
        proposal = draft.propose(context, 1, SamplingConfig(1.0), generator)
        counts[int(proposal.tokens[0])] += 1
        q = proposal.probs[0] if q is None else q
        assert torch.equal(proposal.probs[0], q)  # the same context gives the same q
    expected = q.double().numpy() * counts.sum()
    keep = expected > 5
    assert counts[~keep].sum() <= 20
    observed = counts[keep] * expected[keep].sum() / counts[keep].sum()
    assert stats.chisquare(observed, expected[keep]).pvalue > 1e-3


def test_greedy_output_is_identical_to_plain_decoding(tiny, tmp_path):
    draft = load_draft(f"eagle:{make_head(tiny, tmp_path / 'head')}", tiny)
    hybrid = load_draft(f"lookup+eagle:{tmp_path / 'head'}", tiny)
    for prompt in ([2], [2, 3, 4], [5, 5, 6, 7, 8, 9, 2, 3], [11, 10, 2, 2, 2, 2]):
        plain = generate_plain(tiny.model, prompt, max_new_tokens=30, sampling=GREEDY).new_tokens
        for d in (draft, hybrid):
            for gamma in (1, 4, "auto"):
                result = generate(tiny.model, d, prompt, max_new_tokens=30, gamma=gamma, sampling=GREEDY)
                assert result.new_tokens == plain, (prompt, d.name, gamma)
                assert result.stats.tokens_drafted > 0


def test_sampled_output_keeps_the_targets_distribution(tiny, tmp_path):
    """The first two new tokens of 3000 sampled runs with the feature draft (gamma 3) against the target's exact
    joint distribution (enumerated): chi-square, cells of expected count < 5 merged."""
    draft = load_draft(f"eagle:{make_head(tiny, tmp_path / 'head', draft_vocab=9)}", tiny)
    prompt, V = [3, 4, 5], tiny.model.vocab_size
    model = tiny.model
    with torch.inference_mode():
        model.rollback(0)
        first = torch.softmax(model.extend(torch.tensor(prompt))[-1].double(), -1)
        joint = torch.zeros(V, V, dtype=torch.float64)
        for a in range(V):
            model.rollback(len(prompt))
            joint[a] = first[a] * torch.softmax(model.extend(torch.tensor([a]))[-1].double(), -1)
    counts = np.zeros(V * V)
    drafted = 0
    for seed in range(3000):
        # (3 tokens asked: the first is the prefill's, the second a draft's judged by the rule)
        result = generate(model, draft, prompt, max_new_tokens=3, gamma=3, sampling=SamplingConfig(1.0), seed=seed)
        counts[result.new_tokens[0] * V + result.new_tokens[1]] += 1
        drafted += result.stats.tokens_drafted
    assert drafted > 0
    expected = joint.flatten().numpy() * counts.sum()
    order = np.argsort(expected)
    small = order[np.cumsum(expected[order]) < 20]  # merge the rarest cells into one of expected count >= 20
    keep = np.setdiff1d(np.arange(V * V), small)
    observed = np.append(counts[keep], counts[small].sum())
    wanted = np.append(expected[keep], expected[small].sum())
    assert stats.chisquare(observed, wanted).pvalue > 1e-3


def test_the_rollout_mask_sees_what_drafting_sees():
    """Step 3 at position 5 drafts after step-1 positions <= 3 (target features), then steps 2 and 3 at 4 and 5."""
    mask = rollout_mask(8, 3)  # [8, 24]
    visible = (mask[5] == 0).nonzero().flatten().tolist()
    assert visible == [0, 1, 2, 3, 8 + 4, 16 + 5]
    assert (rollout_mask(8, 1) == 0).sum() == 8 * 9 // 2  # step 1 is plain causal attention


def test_a_short_training_run_lowers_held_out_loss_and_beats_a_random_head(tiny, tmp_path):
    model = tiny.model
    documents = []  # the tiny target's own sampled text
    for seed in range(48):
        prompt = [2 + seed % VOCAB_WORDS]
        documents.append(prompt + generate_plain(model, prompt, max_new_tokens=40, sampling=SamplingConfig(1.0),
                                                 seed=seed).new_tokens)
    budget = EagleBudget(seq_len=48, batch=8, rollout=2, lr=3e-3, train_seconds=600)
    random_dir = make_head(tiny, tmp_path / "random")
    out = tmp_path / "trained"
    summary = train_eagle(tiny, out, budget, {"answers": documents}, seed=0, progress=False, evaluate_after=False,
                          max_steps=80)
    run = summary["runs"][-1]
    assert run["steps"] == 80
    before, after = run["held_out_before"], run["held_out_after"]
    assert after["loss"][0] < before["loss"][0] - 0.1 and after["loss"][1] < before["loss"][1]
    assert (out / "README.md").is_file() and summary["cpu_hours"] > 0

    def greedy_alpha(directory):
        draft = load_draft(f"eagle:{directory}", tiny)
        accepted = rejected = 0
        for seed in range(6):
            s = generate(model, draft, [2 + seed, 3], max_new_tokens=40, gamma=3, sampling=GREEDY).stats
            accepted, rejected = accepted + s.tokens_accepted, rejected + s.rejections
        return accepted / max(accepted + rejected, 1)

    trained, random = greedy_alpha(out), greedy_alpha(random_dir)
    assert trained > random + 0.1, (trained, random)


def test_the_scoring_cache_is_reused_only_for_the_same_documents(tiny, tmp_path, capsys):
    """The cache is keyed by a hash of the documents and the target: other documents of the same count and lengths
    are scored afresh, not served the cached scores."""
    from specdecode.distill.eagle.teacher import scored_documents

    vocabulary, layers, cache = torch.arange(tiny.model.vocab_size), (2, 4, 5), tmp_path / "scored.pt"
    documents = {"answers": [[2, 3, 4, 5, 6, 7, 8, 9], [9, 9, 3, 3, 4, 4, 5, 5]]}
    others = {"answers": [list(reversed(d)) for d in documents["answers"]]}
    first, _ = scored_documents(tiny, documents, {}, layers, vocabulary, 4, cache, False)
    again, _ = scored_documents(tiny, documents, {}, layers, vocabulary, 4, cache, False)
    assert "reusing" in capsys.readouterr().out
    assert all(torch.equal(a.top_probs, b.top_probs) for a, b in zip(first["answers"], again["answers"], strict=True))
    fresh, _ = scored_documents(tiny, others, {}, layers, vocabulary, 4, cache, False)
    assert "reusing" not in capsys.readouterr().out
    assert [d.ids.tolist() for d in fresh["answers"]] == others["answers"]


def test_the_trainer_refuses_bad_input_with_value_errors(tiny, tmp_path):
    budget = EagleBudget(seq_len=48, batch=8, rollout=2)
    with pytest.raises(ValueError, match="no training document"):
        train_eagle(tiny, tmp_path / "out", budget, {"answers": [[2, 3, 4]]}, progress=False, evaluate_after=False)
    documents = {"answers": [[2 + i % 10] * 12 for i in range(4)]}
    with pytest.raises(ValueError, match="holds no EAGLE-3 head"):
        train_eagle(tiny, tmp_path / "none", budget, documents, resume=True, progress=False, evaluate_after=False)


# Engine against teacher features: measured at most 0.002 apart (bf16 rounding; 0.0005 in int8 on the AVX2 path),
# features up to 0.23 in size; a layer off by one is 0.066 or more away. 2x the measured worst:
FEATURE_ATOL = 0.004


def test_the_engines_features_are_the_ones_the_trainer_reads(tiny):
    """Training reads the teacher's batched prefill; drafting reads the engine's passes (prefill, then verify passes
    of a few tokens): the same residual streams, to bf16 rounding. Negative control: the teacher's streams of any
    one layer off by one fail the same comparison."""
    from specdecode.distill.teacher import BatchedTeacher

    model, layers = tiny.model, (2, 4, 8)
    tokens = [2, 7, 3, 9, 4, 4, 5, 11, 6, 2]
    saved = model.feature_layers
    try:
        model.feature_layers = layers
        model.rollback(0)
        model.extend(torch.tensor(tokens[:6]))
        parts = [model.features]
        model.extend(torch.tensor(tokens[6:]))
        parts.append(model.features)
        engine = torch.cat(parts).float()  # [10, 3 D]
    finally:
        model.feature_layers = saved
    _, teacher = BatchedTeacher(model).prefill(torch.tensor([tokens]), layers)
    assert engine.shape == teacher[0].shape == (len(tokens), 3 * model.shape.hidden)
    assert torch.allclose(engine, teacher[0].float(), atol=FEATURE_ATOL, rtol=0)
    for wrong in ((1, 4, 8), (3, 4, 8), (2, 3, 8), (2, 5, 8), (2, 4, 7)):
        _, other = BatchedTeacher(model).prefill(torch.tensor([tokens]), wrong)
        assert not torch.allclose(engine, other[0].float(), atol=FEATURE_ATOL, rtol=0), wrong
    # The last feature layer may be the target's last layer's output (layer 8 of 8).
    D = model.shape.hidden
    assert not torch.equal(engine[:, :D], engine[:, 2 * D:])


def test_the_eagle_draft_is_refused_clearly_where_it_cannot_run(tiny, tmp_path):
    head = make_head(tiny, tmp_path / "head")
    on_transformers = load_target(str(tiny.source), engine="transformers", dtype="float32")
    with pytest.raises(ValueError, match="only the native engine"):
        load_draft(f"eagle:{head}", on_transformers)
    with pytest.raises(ValueError, match="holds no EAGLE-3 draft head"):
        load_draft(f"eagle:{tiny.source}", tiny)
    other = load_target(str(tiny_llama_checkpoint(tmp_path / "wide", word_tokenizer([f"w{i}" for i in range(10)]),
                                                  hidden=32, layers=8)), engine="native")
    with pytest.raises(ValueError, match="trained for another target"):
        load_draft(f"eagle:{head}", other)
    draft = load_draft(f"eagle:{head}", tiny)
    tiny.model.feature_layers = ()  # another draft (or user) changed what the target keeps
    try:
        with pytest.raises(ValueError, match="another target"):
            generate(tiny.model, draft, [2, 3], max_new_tokens=4)
    finally:
        tiny.model.feature_layers = draft.feature_layers


def test_the_shipped_head_loads_offline_for_smollm2_and_drafts_what_it_reports(smollm2_native):
    """The package's head: the target's vocabulary and width, the engines' default feature layers, under 30 MB, and
    greedy output with it (behind prompt lookup, the native default) identical to plain decoding."""
    from specdecode.load import SHIPPED_EAGLE, default_draft

    target = smollm2_native
    assert (SHIPPED_EAGLE / "model.safetensors").stat().st_size < 30e6
    assert default_draft(target) == "lookup+eagle"
    draft = load_draft("eagle", target)
    config = json.loads((SHIPPED_EAGLE / "config.json").read_text())
    assert draft.vocab_size == target.model.vocab_size == config["vocab_size"]
    assert draft.feature_layers == (2, 15, 27) == tuple(config["specdecode"]["feature_layers"])
    assert len(draft.head.draft_ids) == config["draft_vocab_size"]
    ids = target.tokenizer.encode("Name three rivers in Europe.")
    plain = generate_plain(target.model, ids, max_new_tokens=24, sampling=GREEDY).new_tokens
    result = generate(target.model, load_draft("lookup+eagle", target), ids, max_new_tokens=24, gamma="auto",
                      sampling=GREEDY)
    assert result.new_tokens == plain and result.stats.tokens_accepted > 0
