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


def tiny_llama(vocab_size: int = 16, seed: int = 0, layers: int = 2, hidden: int = 32, max_positions: int = 128,
               scale: float = 1.0, tied: bool = False, eos_token_id: int | None = None):
    """A random Llama (4 heads, 2 KV heads) whose output head is sharpened by `scale`, so that continuations are not
    nearly uniform (the shared embedding when `tied`)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=max_positions, tie_word_embeddings=tied, eos_token_id=eos_token_id)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(scale)
    return model


def save_model(model, tokenizer, directory: Path) -> Path:
    """A checkpoint directory: the model's config and safetensors beside the tokenizer's files."""
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def tiny_llama_checkpoint(directory: Path, tokenizer, hidden: int = 64, layers: int = 2, seed: int = 0,
                          scale: float = 4.0) -> Path:
    """Save a random Llama sized for `tokenizer` (logits sharpened by `scale`) with it to `directory`."""
    model = tiny_llama(len(tokenizer), seed, layers, hidden, max_positions=1024, scale=scale, tied=True,
                       eos_token_id=tokenizer.eos_token_id)
    return save_model(model, tokenizer, directory)


def tiny_pair(directory: Path, texts: list[str]) -> tuple[Path, Path]:
    """(target, draft) tiny checkpoints sharing a word tokenizer over the words of `texts`."""
    tokenizer = word_tokenizer(sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t)}))
    return (tiny_llama_checkpoint(directory / "target", tokenizer, hidden=64, layers=2, seed=0),
            tiny_llama_checkpoint(directory / "draft", tokenizer, hidden=32, layers=1, seed=1))
