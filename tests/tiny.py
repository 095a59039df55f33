"""Tiny random-weight models built from configs: no download, fast, fine for exactness tests. The Llama, the word
tokenizer and the checkpoint writer are the ones `bench --quick` uses (specdecode/bench/tiny.py)."""

from __future__ import annotations

import torch

from specdecode.bench.tiny import save_model, tiny_llama, word_tokenizer

__all__ = ["save_model", "tiny_gpt2", "tiny_llama", "word_tokenizer"]


def tiny_gpt2(vocab_size: int = 16, seed: int = 0, max_positions: int = 128):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=max_positions)
    return GPT2LMHeadModel(config).eval()
