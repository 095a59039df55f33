"""`specdecode train-draft` end to end on a tiny budget: it writes a loadable draft, and its loss goes down."""

import json

import torch

from specdecode import SamplingConfig, generate, generate_plain
from specdecode.bench.tiny import tiny_llama_checkpoint, word_tokenizer
from specdecode.cli import main
from specdecode.distill.prompts import training_prompts
from specdecode.load import load_draft, load_target
from specdecode.prompts import load_prompts


def test_training_on_a_tiny_budget_writes_a_loadable_draft_whose_loss_went_down(tmp_path, capsys):
    words = {w for text in training_prompts(40) + [p.prompt for p in load_prompts()] for w in text.split()}
    target_dir = tiny_llama_checkpoint(tmp_path / "target", word_tokenizer(sorted(words)), hidden=64, layers=2)
    out = tmp_path / "draft"
    code = main(["train-draft", "--target", str(target_dir), "--out", str(out), "--prompts", "24",
                 "--answer-tokens", "12", "--batch", "8", "--text-positions", "1024", "--train-minutes", "0.2",
                 "--hidden", "32", "--layers", "1", "--eval-prompts", "2", "--eval-tokens", "8"])
    assert code == 0
    assert "held-out alpha" in capsys.readouterr().out
    summary = json.loads((out / "training.json").read_text())
    assert summary["training"]["steps"] > 5
    assert summary["training"]["held_out_after"] < summary["training"]["held_out_before"]
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}

    target = load_target(str(target_dir), dtype="float32")
    draft = load_draft(str(out), target, dtype="float32")  # the tokenizer check passes
    ids = target.tokenizer.encode("Explain gravity in simple terms.", chat=False)
    plain = generate_plain(target.model, ids, max_new_tokens=12, sampling=SamplingConfig(0)).new_tokens
    result = generate(target.model, draft, ids, max_new_tokens=12, gamma=3, sampling=SamplingConfig(0))
    assert result.new_tokens == plain

    from transformers import AutoModelForCausalLM  # a standard transformers checkpoint: it also works as assistant

    assistant = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    with torch.inference_mode():
        hf_out = target.transformers_model().generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False,
                                                      assistant_model=assistant, pad_token_id=0)
    assert hf_out[0, len(ids):].tolist()[: len(plain)] == plain[: hf_out.shape[1] - len(ids)]


def test_training_prompts_are_deterministic_and_disjoint_from_the_bench():
    prompts = training_prompts(300, seed=0)
    assert prompts == training_prompts(300, seed=0) and len(set(prompts)) == 300
    assert not set(prompts) & {p.prompt for p in load_prompts()}


def test_the_teachers_batched_pass_equals_the_engines_pass_on_the_same_tokens(tmp_path):
    """The teacher runs the engine's own Llama layer over a batch: its top-k lists at every position of each document
    equal the engine's log-softmax of a single-sequence prefill of that document (fp32; the log-probabilities are
    stored in float16, so they agree to one float16 step)."""
    from specdecode.distill.teacher import BatchedTeacher
    from specdecode.models.native import load_native

    directory = tiny_llama_checkpoint(tmp_path / "t", word_tokenizer([f"w{i}" for i in range(40)]), hidden=32,
                                      layers=2)
    model = load_native(directory, "fp32")
    documents = [[3, 5, 7, 9, 11, 13, 2], [4, 4, 8, 15, 16, 23, 42 % 40, 1, 30, 31], [6, 7]]
    answers = BatchedTeacher(model).score(documents, top_k=5)
    for doc, answer in zip(documents, answers, strict=True):
        model.rollback(0)
        logprobs = torch.log_softmax(model.extend(torch.tensor(doc))[:-1], dim=-1)  # [len - 1, V]
        top = logprobs.topk(5, dim=-1)
        assert torch.equal(answer.top_ids.long(), top.indices)
        torch.testing.assert_close(answer.top_logprobs.float(), top.values, atol=4e-3, rtol=0)
