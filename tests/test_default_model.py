"""The embedded default target (SmolLM2-135M-Instruct) through the transformers adapter, every draft type, the CLI."""

import json

import pytest
import torch
from tiny import save_model, tiny_llama

from specdecode import SamplingConfig, generate, generate_plain
from specdecode.cli import main
from specdecode.load import load_draft
from specdecode.models.default import default_model_dir
from specdecode.prompts import KINDS, load_prompts

NEW_TOKENS = 16


def identity_prompts() -> list[str]:
    """20 held-out prompts, taken round-robin over the six kinds."""
    by_kind = {k: load_prompts("test", (k,)) for k in KINDS}
    rounds = zip(*by_kind.values(), strict=True)
    return [p.prompt for group in rounds for p in group][:20]


def plain_greedy(target, prompts: int = 20) -> list[tuple[list[int], list[int]]]:
    tok = target.tokenizer
    outputs = []
    for text in identity_prompts()[:prompts]:
        ids = tok.encode(text)
        outputs.append((ids, generate_plain(target.model, ids, max_new_tokens=NEW_TOKENS, sampling=SamplingConfig(0),
                                            stop_token_ids=tok.stop_token_ids).new_tokens))
    return outputs


@pytest.fixture(scope="module")
def plain_outputs(smollm2):
    return plain_greedy(smollm2)


@pytest.fixture(scope="module")
def plain_fp32_outputs(smollm2_fp32):
    """The transformers engine in fp32 (slow on CPUs without native bf16): 10 prompts."""
    return plain_greedy(smollm2_fp32, 10)


@pytest.fixture(scope="module")
def ngram_file(python_corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("ngram") / "stdlib.safetensors"
    assert main(["ngram", "build", str(python_corpus), "-o", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def tiny_draft_dir(tmp_path_factory):
    """A one-layer random Llama that shares SmolLM2's tokenizer: a (poor) draft model of the right vocabulary."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    return save_model(tiny_llama(vocab_size=49152, hidden=32, layers=1, max_positions=8192, scale=20.0),
                      tokenizer, tmp_path_factory.mktemp("tiny-draft"))


def assert_greedy_identity(target, draft, plain_outputs, gamma=3):
    drafted = 0
    for ids, plain in plain_outputs:
        result = generate(target.model, draft, ids, max_new_tokens=NEW_TOKENS, gamma=gamma, sampling=SamplingConfig(0),
                          stop_token_ids=target.tokenizer.stop_token_ids)
        assert result.new_tokens == plain
        drafted += result.stats.tokens_drafted
    assert drafted > 0


@pytest.mark.parametrize("kind", [*(pytest.param(kind, marks=pytest.mark.same_on_every_cpu) for kind in
                                    ("trained", "prompt-lookup", "lookup+trained", "bigram", "unigram")), "model"])
def test_greedy_output_is_identical_to_plain_for_every_draft(kind, smollm2, plain_outputs, ngram_file,
                                                             tiny_draft_dir):
    """The default configuration (native engine, bf16): 20 held-out prompts of six kinds, every draft type (the
    shipped trained draft, prompt lookup, bigram and unigram tables built from stdlib text, a random model). The
    target's passes are what the CPU path changes: the forced-AVX2 rerun checks them with the model draft alone."""
    spec = {"bigram": f"bigram:{ngram_file}", "unigram": f"unigram:{ngram_file}",
            "model": str(tiny_draft_dir)}.get(kind, kind)
    assert_greedy_identity(smollm2, load_draft(spec, smollm2), plain_outputs)


@pytest.mark.same_on_every_cpu
@pytest.mark.parametrize("kind", ["prompt-lookup", "model"])
def test_greedy_identity_on_the_transformers_engine(kind, smollm2_fp32, plain_fp32_outputs, tiny_draft_dir):
    """The transformers adapter in fp32 (in bf16 its logits move by up to ~1 with the pass size: see docs)."""
    draft = load_draft(str(tiny_draft_dir) if kind == "model" else kind, smollm2_fp32, dtype="float32",
                       engine="transformers")
    assert_greedy_identity(smollm2_fp32, draft, plain_fp32_outputs if kind == "prompt-lookup"
                           else plain_fp32_outputs[:6])


def test_plain_decoding_matches_transformers_generate(smollm2_fp32):
    model, tok = smollm2_fp32.model, smollm2_fp32.tokenizer
    for text in identity_prompts()[:3]:
        ids = tok.encode(text)
        ours = generate_plain(model, ids, max_new_tokens=12, sampling=SamplingConfig(0)).new_tokens
        with torch.inference_mode():
            theirs = smollm2_fp32.transformers_model().generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False,
                                          eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
        assert ours == theirs


def test_cache_rollback_on_the_real_model(smollm2_fp32):
    lm = smollm2_fp32.model
    ids = smollm2_fp32.tokenizer.encode("Count from one to ten.")
    lm.rollback(0)
    lm.extend(torch.tensor(ids))
    drafted = torch.tensor([100, 200, 300, 400])
    lm.extend(drafted)
    lm.rollback(len(ids) + 1)  # one draft accepted
    got = lm.extend(torch.tensor([7, 8]))
    with torch.inference_mode():
        want = lm.model(input_ids=torch.tensor([ids + [100, 7, 8]])).logits[0, -2:].float()
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)


@pytest.mark.same_on_every_cpu
def test_generate_json_reports_every_field(capsys):
    code = main(["generate", "--json", "--compare", "--dtype", "float32", "--max-new-tokens", "24",
                 "Fix the bug and return the code:\n\ndef is_even(n):\n    return n % 2 == 1\n"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    for key in ("text", "new_tokens", "rounds", "target_calls", "draft_calls", "tokens_drafted", "tokens_accepted",
                "alpha", "tokens_per_target_call", "seconds", "tokens_per_second", "gamma", "draft", "engine",
                "plain_seconds", "plain_tokens_per_second", "speedup", "identical_to_plain"):
        assert key in report, key
    assert report["identical_to_plain"] is True and report["draft"] == "lookup+eagle"  # native's default draft
    assert report["tokens_per_target_call"] > 1.0


def _stats_line_says(line: str, new_tokens: int) -> bool:
    return line.startswith(f"{new_tokens} new tokens, ") and all(
        part in line for part in (" target calls, ", " tokens per target call, ", "alpha ", " tokens/s "))


@pytest.mark.same_on_every_cpu
def test_generate_streams_text_then_the_stats_line(capsys):
    """The stats line starts with the count the run reports (--json: the same greedy run). Negative control: the
    line without its count, or with another count, fails the same check."""
    argv = ["generate", "--max-new-tokens", "12", "What is the capital of Japan?"]
    assert main(argv + ["--json"]) == 0
    counted = json.loads(capsys.readouterr().out)["new_tokens"]
    assert main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert "Tokyo" in " ".join(out[:-1])
    assert 0 < counted <= 12 and _stats_line_says(out[-1], counted), (counted, out[-1])
    for broken in (f"{counted + 1} new tokens", "new tokens"):
        assert not _stats_line_says(out[-1].replace(f"{counted} new tokens", broken, 1), counted)


@pytest.mark.same_on_every_cpu
def test_show_colours_rounds(capsys):
    assert main(["generate", "--show", "--max-new-tokens", "20", "--raw", "a b c d a b c d a b c"]) == 0
    out = capsys.readouterr().out
    assert "accepted draft" in out and "rejected draft" in out  # the legend
    assert "tokens per target call" in out


@pytest.mark.same_on_every_cpu
def test_ngram_draft_samples_from_its_real_q(smollm2_fp32, ngram_file):
    draft = load_draft(f"bigram:{ngram_file}", smollm2_fp32)
    proposal = draft.propose(smollm2_fp32.tokenizer.encode("def f(x):", chat=False), 4, SamplingConfig(0.8), None)
    assert proposal.tokens.shape == (4,) and proposal.probs.shape == (4, 49152)
    assert torch.allclose(proposal.probs.sum(-1), torch.ones(4))
    assert ((proposal.probs > 0).sum(-1) > 1).all()  # a real distribution, not a point mass


@pytest.mark.same_on_every_cpu
def test_cli_bad_input(capsys, tmp_path, ngram_file):
    from tiny import word_tokenizer

    other = save_model(tiny_llama(vocab_size=12), word_tokenizer(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]),
                       tmp_path / "other")
    short = save_model(tiny_llama(vocab_size=12, max_positions=16), word_tokenizer(list("abcdefghij")),
                       tmp_path / "short")
    (tmp_path / "notes.txt").write_text("not a table")
    cases = [
        (["generate", "--target", str(tmp_path / "missing"), "hi"], "not a directory"),
        (["generate", "--target", "no-such-model-anywhere", "hi"], "cannot load model"),
        (["generate", "--draft", str(other), "hi"], "tokenizers differ"),
        (["generate", "--target", str(short), "--draft", "none", "--raw", " ".join("abcdefghij" * 2)],
         "context window"),
        (["generate", "--gamma", "0", "hi"], "gamma"),
        (["generate", "   "], "empty"),
        (["generate", "--target", str(other), "--raw", "a b", "--draft", "bigram"], "needs a table file"),
        (["generate", "--draft", "lookup+none", "hi"], "lookup+DRAFT needs"),
        (["generate", "--draft", "lookup+prompt-lookup", "hi"], "lookup+DRAFT needs"),
        (["generate", "--draft", "bigram", str(tmp_path / "notes.txt"), "hi"], "not an n-gram table"),
        (["generate", "--target", str(other), "--draft", "bigram", str(ngram_file), "--raw", "a b"],
         "different tokenizer"),
        (["ngram", "build", str(tmp_path / "absent.txt"), "-o", str(tmp_path / "t.st")], "not a file"),
    ]
    capsys.readouterr()  # drop what building the models printed
    for argv, message in cases:
        try:
            code = main(argv)
        except SystemExit as exit:
            code = exit.code
        err = capsys.readouterr().err
        assert code == 2, argv
        assert message in err and len(err.strip().splitlines()) == 1, (argv, err)
