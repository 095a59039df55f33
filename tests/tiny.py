"""Tiny random-weight transformers models built from configs: no download, fast, fine for exactness tests."""

from __future__ import annotations

from pathlib import Path

import torch


def tiny_llama(vocab_size: int = 16, seed: int = 0, layers: int = 2, hidden: int = 32, max_positions: int = 128,
               scale: float = 1.0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=max_positions, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # sharper logits than the default init, so continuations are not nearly uniform
        model.lm_head.weight.mul_(scale)
    return model


def tiny_gpt2(vocab_size: int = 16, seed: int = 0, max_positions: int = 128):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=max_positions)
    return GPT2LMHeadModel(config).eval()


def word_tokenizer(words: list[str]):
    """A transformers fast tokenizer over a fixed word list (built offline with `tokenizers`)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "</s>", *words])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", eos_token="</s>")


def save_model(model, tokenizer, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
