"""The native Llama-family path in every weight format: logits equal to transformers', batch invariance where claimed,
greedy identity, fallback. Run again with SPECDECODE_CPU=avx2 by test_cpu_paths.py."""

import random

import pytest
import torch
from tiny import save_model, tiny_gpt2, tiny_llama, word_tokenizer

from specdecode import SamplingConfig, generate, generate_plain
from specdecode.cli import main
from specdecode.cpu import capability
from specdecode.drafts.model import ModelDraft
from specdecode.load import load_draft, load_target
from specdecode.models.hf import HFCausalLM, load_hf_model
from specdecode.models.kernels import kernel_isa
from specdecode.models.linear import BATCH_INVARIANT_ROWS, FORMATS, UnavailableFormat
from specdecode.models.native import UnsupportedModel, load_native
from specdecode.prompts import load_prompts

# Each format against transformers in the dtype it computes in: fp32 to 1e-4; bf16 to 0.05 in logit units (one bf16
# rounding step at |logit| ~ 8; in practice bitwise, since the native path computes in transformers' order); int8
# (weights rounded to 255 levels per row, a slightly different model) against fp32 on these tiny models, whose logits
# are at most 0.73: measured at most 0.0039 apart (native and forced-AVX2 paths alike), bound 0.006 (1.5x that; an
# int8 with 63 levels per row is 0.011 or more apart: test_the_int8_bound_catches_a_coarser_int8); int4 (16 levels
# per group of 32; int4-dot8 the same weights against a 16-bit reading of the activations) to 0.2.
TOLERANCE = {"fp32": 1e-4, "bf16": 5e-2, "bf16-onednn": 5e-2, "int8": 6e-3, "int4": 2e-1, "int4-dot8": 2e-1}
REFERENCE_DTYPE = {"fp32": torch.float32, "bf16": torch.bfloat16, "bf16-onednn": torch.bfloat16, "int8": torch.float32,
                   "int4": torch.float32, "int4-dot8": torch.float32}
RUNNABLE = [f for f in FORMATS if (f != "bf16-onednn" or capability().bf16_matmul)
            and (f != "int4-dot8" or kernel_isa(capability()) is not None)]
INVARIANT = [f for f in RUNNABLE if f in BATCH_INVARIANT_ROWS]


def tiny_qwen2(vocab_size=48, seed=0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         tie_word_embeddings=True)
    return Qwen2ForCausalLM(config).eval()


def tiny_llama3_rope(vocab_size=48, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=256,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 32})
    return LlamaForCausalLM(config).eval()


def _pair(model, directory, fmt):
    save_model(model, word_tokenizer(["x"]), directory)
    return load_native(directory, fmt), HFCausalLM(load_hf_model(directory, REFERENCE_DTYPE[fmt])[0])


@pytest.mark.parametrize("fmt", RUNNABLE)
@pytest.mark.parametrize("make", [tiny_llama, tiny_qwen2, tiny_llama3_rope], ids=["llama", "qwen2", "llama3-rope"])
def test_logits_equal_transformers_after_prefill_and_rollbacks(make, fmt, tmp_path):
    _assert_logits_close(*_pair(make(vocab_size=48), tmp_path, fmt), TOLERANCE[fmt])


def _assert_logits_close(native, reference, atol: float) -> None:
    """A prefill of 12 tokens, then 25 passes of 1-7 tokens each followed by a rollback of 0 to all of them."""
    rng = random.Random(0)
    tokens = [rng.randrange(48) for _ in range(12)]
    for model in (native, reference):
        model.rollback(0)
    torch.testing.assert_close(native.extend(torch.tensor(tokens)), reference.extend(torch.tensor(tokens)),
                               atol=atol, rtol=0)
    for _ in range(25):
        new = torch.tensor([rng.randrange(48) for _ in range(rng.randint(1, 7))])
        torch.testing.assert_close(native.extend(new), reference.extend(new), atol=atol, rtol=0)
        keep = native.length - rng.randint(0, len(new))
        native.rollback(keep)
        reference.rollback(keep)


@pytest.mark.parametrize("make", [tiny_llama, tiny_qwen2, tiny_llama3_rope], ids=["llama", "qwen2", "llama3-rope"])
def test_the_int8_bound_catches_a_coarser_int8(make, tmp_path):
    """Negative control: int8 weights rounded once more to multiples of 4 (63 levels per row instead of 255) break
    TOLERANCE["int8"], so the bound would catch an int8 path that rounds more coarsely than it should."""
    native, reference = _pair(make(vocab_size=48), tmp_path, "int8")
    for linear in [native.head] + [lin for layer in native.layers
                                   for lin in (layer.qkv, layer.o, layer.gate_up, layer.down)]:
        if linear.format == "int8":
            linear.weight = (torch.round(linear.weight.float() / 4) * 4).clamp(-127, 127).to(torch.int8)
    with pytest.raises(AssertionError):
        _assert_logits_close(native, reference, TOLERANCE["int8"])


def test_the_default_model_agrees_with_transformers(smollm2_fp32):
    native = load_native(smollm2_fp32.source, "fp32")
    reference = smollm2_fp32.model if isinstance(smollm2_fp32.model, HFCausalLM) else \
        HFCausalLM(smollm2_fp32.transformers_model())
    ids = torch.tensor(smollm2_fp32.tokenizer.encode("Name three rivers in Europe."))
    reference.rollback(0)
    torch.testing.assert_close(native.extend(ids), reference.extend(ids), atol=1e-4, rtol=0)
    native.rollback(len(ids) - 3)
    reference.rollback(len(ids) - 3)
    more = torch.tensor([200, 300, 400, 500])
    torch.testing.assert_close(native.extend(more), reference.extend(more), atol=1e-4, rtol=0)


@pytest.mark.parametrize("fmt", INVARIANT)
def test_passes_are_batch_invariant_where_claimed(fmt, smollm2_native):
    """Each position's logits are bitwise the same whether it is computed alone or inside a k-token pass."""
    model = smollm2_native.model if smollm2_native.model.format == fmt else load_native(smollm2_native.source, fmt)
    ids = smollm2_native.tokenizer.encode("Write a Python function that reverses a string.")
    extra = [100, 2000, 31, 7, 999, 12, 13, 14]
    for k in (2, 3, 5, 8):
        model.rollback(0)
        model.extend(torch.tensor(ids), keep=1)
        together = model.extend(torch.tensor(extra[:k]))
        model.rollback(len(ids))
        alone = torch.cat([model.extend(torch.tensor([t])) for t in extra[:k]])
        assert torch.equal(together, alone), k


@pytest.mark.parametrize("fmt", INVARIANT)
def test_a_batched_pass_gives_each_sequence_bitwise_its_own_rows(fmt, smollm2_native):
    """Sequences of different lengths in one pass (`extend_batch`, the server's batches): each one's logits are
    bitwise those of its own pass, prefill and verify alike, so no request's output depends on who else is served."""
    model = smollm2_native.model if smollm2_native.model.format == fmt else load_native(smollm2_native.source, fmt)
    tok = smollm2_native.tokenizer
    prompts = [tok.encode(p) for p in ("Write a Python function that reverses a string.",
                                        "Name three rivers in Europe.", "What is 17 * 23?")]
    extra = [[100], [2000, 31, 7, 999], [12, 13]]
    sequences = [model.sequence(i) for i in range(3)]
    for sequence in sequences:
        sequence.rollback(0)
    prefills = model.extend_batch([(s, torch.tensor(ids), 1) for s, ids in zip(sequences, prompts, strict=True)])
    together = model.extend_batch([(s, torch.tensor(e), None) for s, e in zip(sequences, extra, strict=True)])
    assert [s.length for s in sequences] == [len(p) + len(e) for p, e in zip(prompts, extra, strict=True)]
    for sequence, ids, more, prefill, verified in zip(sequences, prompts, extra, prefills, together, strict=True):
        sequence.rollback(0)
        assert torch.equal(sequence.extend(torch.tensor(ids), keep=1), prefill)
        assert torch.equal(sequence.extend(torch.tensor(more)), verified)
    assert not torch.equal(together[1][-1], together[2][-1])  # the rows differ: a mix-up would show
    with pytest.raises(ValueError, match="twice"):
        model.extend_batch([(sequences[1], torch.tensor([5]), None), (sequences[1], torch.tensor([6]), None)])


@pytest.mark.skipif("int4-dot8" not in RUNNABLE, reason="the int4-dot8 kernels need AVX2")
@pytest.mark.parametrize("make", [tiny_llama, tiny_qwen2], ids=["llama", "qwen2"])
def test_the_layer_kernel_computes_the_python_layer(make, tmp_path):
    """An int4-dot8 layer runs in one C++ call (layer.cpp); the Python steps of `LlamaLayer` give the same rows to
    float rounding (1e-5 of the largest), and the same keys and values in each sequence's cache, for two sequences
    with cached tokens in one pass."""
    from specdecode.models.llama import KeyPositions, Segment

    model = make(vocab_size=48)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):  # (qwen2's q, k, v biases: zero as initialised)
                parameter.normal_(0, 0.5)
    native, _ = _pair(model, tmp_path, "int4-dot8")
    shape, layer = native.shape, native.layers[1]
    assert layer._stack is not None
    torch.manual_seed(0)
    x = torch.randn(1, 7, shape.hidden)
    positions = torch.tensor([3, 4, 5, 9, 10, 11, 12])  # sequence a: 3 new rows after 3 cached; b: 4 after 9
    cos, sin = native.cos[positions][None], native.sin[positions][None]
    caches = torch.randn(2, 2, 1, shape.kv_heads, 32, shape.head_dim)  # [a / b, k / v, 1, KV, S, hd]

    def run(kernel):
        if not kernel:
            layer.__dict__["_stack"] = None  # (the cached property, emptied: the Python steps)
        c = caches.clone()
        segments = [Segment(0, 3, c[0, 0], c[0, 1], 3, 3, 32, KeyPositions(positions[:3])),
                    Segment(3, 4, c[1, 0], c[1, 1], 9, 4, 32, KeyPositions(positions[3:]))]
        out = layer(x, shape, cos, sin, segments)
        layer.__dict__.pop("_stack", None)
        return out, c

    (ours, our_caches), (theirs, their_caches) = run(True), run(False)
    torch.testing.assert_close(ours, theirs, atol=1e-5 * theirs.abs().max().item(), rtol=0)
    torch.testing.assert_close(our_caches, their_caches, atol=1e-5 * their_caches.abs().max().item(), rtol=0)
    assert not torch.equal(our_caches, caches)  # the new keys and values were written


@pytest.mark.skipif("int4-dot8" not in RUNNABLE, reason="the int4-dot8 kernels need AVX2")
@pytest.mark.parametrize("make", [tiny_llama, tiny_qwen2], ids=["llama", "qwen2"])
def test_the_layer_stack_in_one_call_is_the_layers_in_turn(make, tmp_path, monkeypatch):
    """`KernelStack`: every int4-dot8 layer in one call of layer.cpp per pass gives bitwise the logits, keys and
    values of the layers called one by one, for two sequences in batched passes after cached tokens; and the engine
    takes that call (no layer is called from Python)."""
    from specdecode.models.llama import LlamaLayer

    model = make(vocab_size=48)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(0, 0.5)
    native, _ = _pair(model, tmp_path, "int4-dot8")
    assert native._stack is not None

    def run(stack: bool):
        native.__dict__["_stack"] = native._stack if stack else None
        a, b = native.sequence(0), native.sequence(1)
        a.clear(), b.clear()
        out = native.extend_batch([(a, torch.tensor([1, 5, 9, 2, 7, 3]), 1), (b, torch.tensor([4, 8, 6]), 1)])
        out += native.extend_batch([(a, torch.tensor([11, 12, 13]), None), (b, torch.tensor([40]), None)])
        native.__dict__.pop("_stack", None)
        return out, [(c.k[:, :, :, :9].clone(), c.v[:, :, :, :9].clone()) for c in native._caches[:2]]

    theirs, their_caches = run(False)

    def refused(*args):
        raise AssertionError("a layer was called from Python")

    monkeypatch.setattr(LlamaLayer, "__call__", refused)
    ours, our_caches = run(True)
    assert all(torch.equal(o, t) for o, t in zip(ours, theirs, strict=True))
    for mine, their in zip(our_caches, their_caches, strict=True):  # each sequence's (k, v)
        assert torch.equal(mine[0], their[0]) and torch.equal(mine[1], their[1])
    assert our_caches[1][0].abs().sum() > 0 and not torch.equal(ours[2][-1], ours[3][-1])  # (a mix-up would show)


def test_batch_invariance_holds_across_a_key_block_boundary(smollm2_native):
    """A pass whose keys span two attention blocks (positions 505..512) still matches token-by-token passes."""
    model = smollm2_native.model
    prefix = torch.arange(1000, 1505)
    extra = torch.tensor([5, 6, 7, 8, 9, 10, 11, 12])
    model.rollback(0)
    model.extend(prefix, keep=1)
    together = model.extend(extra)
    model.rollback(len(prefix))
    assert torch.equal(together, torch.cat([model.extend(extra[i:i + 1]) for i in range(8)]))


@pytest.mark.parametrize("n", [33, 35, 66, 195])
def test_a_prompts_last_row_is_the_same_prefilled_whole_or_in_chunks(n, smollm2_native):
    """torch's flash attention splits a pass's queries into blocks (32 rows below 192): a last block of 1-3 rows
    would round differently, so the logits of a prompt's last row (the first token's) and the cache would depend on
    how the prompt was cut into passes (the server prefills in chunks of 32)."""
    model = smollm2_native.model
    ids = torch.arange(n) * 37 % 5000 + 100
    model.rollback(0)
    whole, after_whole = model.extend(ids, keep=1), model.extend(torch.tensor([7, 8]))
    model.rollback(0)
    for start in range(0, n - 32, 32):
        model.extend(ids[start: start + 32], keep=1)
    chunked = model.extend(ids[(n - 1) // 32 * 32:], keep=1)
    assert torch.equal(whole, chunked) and torch.equal(after_whole, model.extend(torch.tensor([7, 8])))


def test_a_prompt_sharing_its_start_with_the_cached_one_reuses_its_cells(smollm2_native, monkeypatch):
    """A prompt that starts as the cache's last one did (a system prompt, a chat's earlier turns) feeds only the rest:
    the cells of the shared start are bitwise what a pass would write, so the logits are a fresh prefill's. Cells
    written over since (after a rollback) are not reused, nor any after `clear`, nor any while a feature draft
    wants every row's features."""
    model = smollm2_native.model
    monkeypatch.setattr(model, "feature_layers", ())  # (a feature draft loaded by an earlier test sets them)
    cached, fresh = model.sequence(1), model.sequence(2)
    shared = (torch.arange(40) * 37 % 5000 + 100).tolist()
    first, second = torch.tensor([*shared, 7, 8, 9]), torch.tensor([*shared, 11, 12, 13, 14])

    def check(tokens: torch.Tensor, reused: int) -> None:
        before = model.reused_tokens
        logits = cached.extend(tokens, keep=1)
        assert model.reused_tokens - before == reused
        fresh.rollback(0)
        assert torch.equal(logits, fresh.extend(tokens)[-1:])  # (every row wanted: nothing reused)
        more = torch.tensor([5, 6, 7])
        assert torch.equal(cached.extend(more), fresh.extend(more))

    cached.rollback(0)
    cached.extend(torch.tensor([1]), keep=1)  # (whatever it held before)
    cached.rollback(0)
    check(first, 0)
    cached.rollback(0)
    check(second, 40)
    cached.rollback(10)
    cached.extend(torch.tensor([1, 2, 3]))  # cells 10.. written over
    cached.rollback(0)
    check(second, 10)
    cached.clear()  # a cold start
    check(second, 0)
    cached.rollback(0)
    monkeypatch.setattr(model, "feature_layers", (2,))
    check(second, 0)


def test_a_drafts_catch_up_leaves_out_the_cells_its_model_will_reuse(smollm2_native, monkeypatch):
    """A new prompt's catch-up (`Draft.behind`, which adaptive gamma prices) counts only what the draft's model will
    compute: a prompt sharing its start with the last one (a chat's earlier turns) reuses those cells."""
    model = smollm2_native.model
    monkeypatch.setattr(model, "feature_layers", ())  # (a feature draft loaded by an earlier test sets them)
    sequence = model.sequence(3)
    sequence.rollback(0)
    sequence.extend(torch.tensor([1]), keep=1)  # (whatever it held before)
    draft = ModelDraft(sequence)
    shared = (torch.arange(40) * 37 % 5000 + 100).tolist()
    first, second = [*shared, 7, 8, 9], [*shared, 11, 12, 13, 14]
    draft.begin(first)
    assert draft.behind(first) == len(first) - 1  # (its last token rides in the first draft pass)
    draft.propose(first, 2, SamplingConfig(), None)
    draft.begin(second)
    before = model.reused_tokens
    assert draft.behind(second) == len(second) - 1 - len(shared)
    draft.propose(second, 2, SamplingConfig(), None)
    assert model.reused_tokens - before == len(shared)


def test_greedy_speculative_output_is_bitwise_plain(smollm2_native):
    """On the native path the batch invariance makes greedy identity hold in the format this CPU runs (bf16 or
    int8), on 10 held-out prompts."""
    target, tok = smollm2_native.model, smollm2_native.tokenizer
    draft = load_draft("prompt-lookup", smollm2_native)
    for prompt in load_prompts("test")[::3][:10]:
        ids = tok.encode(prompt.prompt)
        plain = generate_plain(target, ids, max_new_tokens=24, sampling=SamplingConfig(0),
                               stop_token_ids=tok.stop_token_ids)
        spec = generate(target, draft, ids, max_new_tokens=24, gamma=5, sampling=SamplingConfig(0),
                        stop_token_ids=tok.stop_token_ids)
        assert spec.new_tokens == plain.new_tokens, prompt.id


def test_native_speculative_greedy_equals_transformers_plain_greedy(smollm2_fp32):
    """fp32: the native path with a draft produces exactly the tokens of plain decoding on the transformers path."""
    native = load_target(dtype="float32", engine="native")
    assert native.model.format == "fp32"
    reference = HFCausalLM(smollm2_fp32.transformers_model())
    draft = load_draft("prompt-lookup", native)
    tok = native.tokenizer
    for prompt in load_prompts("test", ("code_edit", "summarize", "qa"))[:6]:
        ids = tok.encode(prompt.prompt)
        want = generate_plain(reference, ids, max_new_tokens=20, sampling=SamplingConfig(0),
                              stop_token_ids=tok.stop_token_ids)
        got = generate(native.model, draft, ids, max_new_tokens=20, gamma=4, sampling=SamplingConfig(0),
                       stop_token_ids=tok.stop_token_ids)
        assert got.new_tokens == want.new_tokens, prompt.id


def test_unsupported_architectures_fall_back_or_fail_clearly(tmp_path, capsys):
    directory = save_model(tiny_gpt2(vocab_size=12), word_tokenizer(list("abcdefghij")), tmp_path / "gpt2")
    with pytest.raises(UnsupportedModel, match="gpt2"):
        load_native(directory)
    target = load_target(str(directory), dtype="float32")
    assert target.engine == "transformers"
    assert main(["generate", "--target", str(directory), "--draft", "none", "--raw", "--max-new-tokens", "3",
                 "a b c"]) == 0
    assert "on transformers" in capsys.readouterr().out  # the stats line says which engine ran
    assert main(["generate", "--target", str(directory), "--engine", "native", "--raw", "a b"]) == 2
    err = capsys.readouterr().err
    assert "the native engine cannot run" in err and len(err.strip().splitlines()) == 1


def test_a_format_the_cpu_lacks_is_refused_clearly_and_auto_never_picks_it(tmp_path):
    save_model(tiny_llama(vocab_size=48), word_tokenizer(["x"]), tmp_path)
    auto = load_native(tmp_path)
    assert auto.format == ("bf16-onednn" if capability().bf16_matmul else "int8")
    if not capability().bf16_matmul:
        with pytest.raises(UnavailableFormat, match="native bf16"):
            load_native(tmp_path, "bf16-onednn")
    assert load_target(str(tmp_path), dtype="bfloat16").model.format in ("bf16", "bf16-onednn")


def test_the_context_window_is_enforced(tmp_path):
    native, _ = _pair(tiny_llama(vocab_size=48, max_positions=16), tmp_path, "fp32")
    native.extend(torch.arange(10))
    with pytest.raises(ValueError, match="context window"):
        native.extend(torch.arange(10))
