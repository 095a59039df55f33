"""The draft shipped in the package: offline, the target's vocabulary, standard transformers format, the default."""

import json

import torch

from specdecode.cli import main
from specdecode.load import SHIPPED_DRAFT, SHIPPED_NGRAM, load_draft
from specdecode.models.default import default_model_dir
from specdecode.prompts import load_prompts


def test_it_is_small_standard_and_shares_the_targets_vocabulary():
    weights = SHIPPED_DRAFT / "model.safetensors"
    assert weights.stat().st_size <= 20 * 2**20
    config = json.loads((SHIPPED_DRAFT / "config.json").read_text())
    target_config = json.loads((default_model_dir() / "config.json").read_text())
    assert config["model_type"] == "llama" and config["vocab_size"] == target_config["vocab_size"]
    ours = json.loads((SHIPPED_DRAFT / "tokenizer.json").read_text())["model"]["vocab"]
    theirs = json.loads((default_model_dir() / "tokenizer.json").read_text())["model"]["vocab"]
    assert ours == theirs  # the same token for every id
    assert (SHIPPED_DRAFT / "README.md").read_text().startswith("# A distilled draft")
    assert SHIPPED_NGRAM.is_file()


def test_it_loads_offline_and_is_the_default_draft(smollm2, capsys):
    draft = load_draft("trained", smollm2)
    assert draft.vocab_size == smollm2.model.vocab_size
    # the default draft on transformers (native: lookup+eagle; llama.cpp: prompt lookup; see load.default_draft)
    assert main(["generate", "--json", "--engine", "transformers", "--max-new-tokens", "16",
                 "What is the capital of Japan?"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["draft"] == "lookup+trained" and report["engine"] == "transformers"
    assert report["tokens_accepted"] > 0


def test_it_works_as_assistant_model_in_transformers(smollm2_fp32):
    """transformers' own assisted generation with the shipped directory gives transformers' plain greedy output."""
    from transformers import AutoModelForCausalLM

    assistant = AutoModelForCausalLM.from_pretrained(SHIPPED_DRAFT, dtype=torch.float32)
    model, tok = smollm2_fp32.transformers_model(), smollm2_fp32.tokenizer
    for prompt in load_prompts("test", ("qa", "chat"))[:3]:
        ids = torch.tensor([tok.encode(prompt.prompt)])
        with torch.inference_mode():
            plain = model.generate(ids, max_new_tokens=20, do_sample=False, pad_token_id=2)
            assisted = model.generate(ids, max_new_tokens=20, do_sample=False, pad_token_id=2,
                                      assistant_model=assistant)
        assert assisted.tolist() == plain.tolist(), prompt.id
