"""The llama.cpp engine: the default GGUF file as shipped behind `CausalLM`; rollback, batch invariance, greedy
identity, agreement with the transformers reference, and clear errors when the binding is missing."""

import sys

import pytest
import torch

from specdecode import SamplingConfig, generate, generate_plain
from specdecode.cli import main
from specdecode.load import load_draft, load_target
from specdecode.models import llama_cpp
from specdecode.models.default import gguf_path
from specdecode.prompts import load_prompts


@pytest.fixture(scope="module")
def target():
    return load_target(engine="llama.cpp")


def test_the_default_target_runs_as_shipped_on_llama_cpp(target):
    assert target.engine == "llama.cpp" and target.precision == "gguf"
    assert target.model.vocab_size == 49152 and target.model.path == gguf_path()
    assert target.model.weight_bytes < 100e6  # Q4_1 layers + a Q8_0 embedding: the file, not a de-quantized copy


def test_logits_agree_with_the_transformers_reference(target, smollm2_fp32):
    """The GGUF file's Q4_1 / Q8_0 weights, run by llama.cpp, against their fp32 de-quantization run by transformers:
    the same weights, but llama.cpp rounds activations to 8 bits for its dot products and keeps an f16 KV cache.
    Stated tolerance (measured: at most 0.083, mean 0.03, 95-97% equal argmax over prompt positions): total
    variation between the two next-token distributions below 0.15 on every row and 0.05 on average, and the same
    argmax on at least 90% of rows."""
    model, reference = target.model, smollm2_fp32.model
    for text in ("Name three rivers in Europe.", "Write a Python function that reverses a string."):
        ids = torch.tensor(target.tokenizer.encode(text))
        model.rollback(0)
        reference.rollback(0)
        got, want = model.extend(ids), reference.extend(ids)
        tv = 0.5 * (got.softmax(-1) - want.softmax(-1)).abs().sum(-1)
        assert tv.max() < 0.15 and tv.mean() < 0.05
        assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.9


def test_passes_are_batch_invariant(target):
    """Built as bin/bootstrap builds it, a k-token pass gives each row bitwise as 1-token passes do, for k up to 16,
    also across the cache's 256-cell boundary."""
    model = target.model
    assert model.batch_invariant
    extra = torch.tensor([100, 2000, 31, 7, 999, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22])
    for prefix in (torch.arange(1000, 1040), torch.arange(1000, 1250)):
        model.rollback(0)
        model.extend(prefix, keep=1)
        alone = torch.cat([model.extend(extra[i:i + 1]) for i in range(16)])
        for k in (2, 3, 5, 8, 16):
            model.rollback(len(prefix))
            assert torch.equal(model.extend(extra[:k]), alone[:k]), (len(prefix), k)


def test_rollback_after_rejections_and_after_a_bonus_token_forgets_the_tail(target):
    """What was rolled back is invisible: the same passes after different discarded tails give bitwise the same
    logits, and equal a run that never saw a tail."""
    model = target.model
    prefix = torch.arange(500, 530)

    def run(tails: list[list[int]]) -> torch.Tensor:
        model.rollback(0)
        model.extend(prefix, keep=1)
        for tail in tails:  # each: a verify pass of 4, of which the first 2 are kept
            model.extend(torch.tensor(tail))
            model.rollback(model.length - 2)
        return model.extend(torch.tensor([42, 43]))

    rejected = run([[1, 2, 3, 4], [5, 6, 7, 8]])
    assert torch.equal(rejected, run([[1, 2, 90, 91], [5, 6, 92, 93]]))
    model.rollback(0)
    model.extend(prefix, keep=1)
    model.extend(torch.tensor([1, 2, 5, 6]))  # never saw a tail
    assert torch.equal(rejected, model.extend(torch.tensor([42, 43])))
    # after a bonus token: a full pass kept whole, then a rollback of nothing
    model.rollback(len(prefix))
    full = model.extend(torch.tensor([1, 2, 3]))
    model.rollback(model.length)
    model.rollback(len(prefix) + 2)
    assert torch.equal(model.extend(torch.tensor([3])), full[2:])


@pytest.mark.parametrize("draft_name", ["prompt-lookup", "lookup+trained"])
def test_greedy_speculative_output_is_bitwise_plain(target, draft_name):
    """12 held-out prompts of all six kinds, 32 tokens, gamma 4: the same tokens as plain decoding on llama.cpp."""
    draft = load_draft(draft_name, target)
    tok = target.tokenizer
    drafted = 0
    for prompt in load_prompts("test")[::5][:12]:
        ids = tok.encode(prompt.prompt)
        plain = generate_plain(target.model, ids, max_new_tokens=32, sampling=SamplingConfig(0),
                               stop_token_ids=tok.stop_token_ids)
        spec = generate(target.model, draft, ids, max_new_tokens=32, gamma=4, sampling=SamplingConfig(0),
                        stop_token_ids=tok.stop_token_ids)
        assert spec.new_tokens == plain.new_tokens, prompt.id
        drafted += spec.stats.tokens_accepted
    assert drafted > 20  # the drafts were often accepted, so the comparison tested multi-token passes


def test_a_missing_binding_is_one_line_naming_the_install_step(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now raises ImportError
    assert not llama_cpp.available()
    with pytest.raises(llama_cpp.MissingBinding, match="bin/bootstrap"):
        load_target(engine="llama.cpp")
    assert load_target().engine == "native"  # auto falls back to the native engine without a word
    assert main(["generate", "--engine", "llama.cpp", "--max-new-tokens", "2", "hello"]) == 2
    err = capsys.readouterr().err
    assert "llama-cpp-python" in err and "bin/bootstrap" in err and len(err.strip().splitlines()) == 1


def test_llama_cpp_forced_on_what_it_cannot_run_exits_2(tmp_path, capsys):
    from tiny import save_model, tiny_llama, word_tokenizer

    directory = save_model(tiny_llama(vocab_size=12), word_tokenizer(list("abcdefghij")), tmp_path / "tiny")
    assert main(["generate", "--target", str(directory), "--engine", "llama.cpp", "a b"]) == 2
    err = capsys.readouterr().err
    assert "GGUF" in err and len(err.strip().splitlines()) == 1
    assert main(["generate", "--target", str(tmp_path / "missing.gguf"), "a b"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_prompt_that_starts_like_the_last_one_reuses_its_cells_exactly(target):
    """After rollback(0), a prefill whose first tokens equal the cached ones skips them: its logits equal a fresh
    model's, and the cells it reused were not recomputed (the decoded-token count shows it)."""
    model, shared = target.model, list(range(300, 330))
    model.rollback(0)
    model.extend(torch.tensor(shared + [1, 2, 3]), keep=1)
    model.rollback(0)
    decoded = []
    original = model._decode
    model._decode = lambda chunk, want: decoded.append(len(chunk)) or original(chunk, want)
    try:
        reused = model.extend(torch.tensor(shared + [7, 8]), keep=1)
    finally:
        del model._decode
    assert decoded == [2] and model.length == len(shared) + 2
    fresh = llama_cpp.LlamaCppLM(gguf_path())
    assert torch.equal(reused, fresh.extend(torch.tensor(shared + [7, 8]), keep=1))
