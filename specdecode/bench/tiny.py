"""Tiny random-weight checkpoints built from configs (no download), for `bench --quick` and the tests."""

from __future__ import annotations

import re
from pathlib import Path

import torch


def word_tokenizer(words: list[str]):
    """A transformers fast tokenizer over a fixed word list (unknown words become <unk>), built offline."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "</s>", *dict.fromkeys(words)])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", eos_token="</s>")


def tiny_llama_checkpoint(directory: Path, tokenizer, hidden: int = 64, layers: int = 2, seed: int = 0,
                          scale: float = 4.0) -> Path:
    """Save a random Llama sized for `tokenizer` (logits sharpened by `scale`) with it to `directory`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=1024, tie_word_embeddings=True,
                         eos_token_id=tokenizer.eos_token_id)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(scale)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def tiny_pair(directory: Path, texts: list[str]) -> tuple[Path, Path]:
    """(target, draft) tiny checkpoints sharing a word tokenizer over the words of `texts`."""
    tokenizer = word_tokenizer(sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t)}))
    return (tiny_llama_checkpoint(directory / "target", tokenizer, hidden=64, layers=2, seed=0),
            tiny_llama_checkpoint(directory / "draft", tokenizer, hidden=32, layers=1, seed=1))
