"""Tiny random-weight models built from configs: no download, fast, fine for exactness tests. The Llama, the word
tokenizer and the checkpoint writer are the ones `bench --quick` uses (specdecode/bench/tiny.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from specdecode.bench.tiny import save_model, tiny_llama, word_tokenizer

__all__ = ["save_model", "tiny_gguf", "tiny_gpt2", "tiny_llama", "word_tokenizer"]


def tiny_gpt2(vocab_size: int = 16, seed: int = 0, max_positions: int = 128):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=max_positions)
    return GPT2LMHeadModel(config).eval()


def tiny_gguf(path: Path, seed: int = 0, layers: int = 2, hidden: int = 256, ffn: int = 512, vocab: int = 320,
              head: str | None = None) -> Path:
    """A random-weight Qwen2 GGUF file (biases on q, k, v) whose matrices come in the types a real file mixes: Q4_K
    (raw blocks with random codes and scales), Q8_0, Q5_0 and F32, so that fused projections hold parts of different
    bits once read into int4-dot8. head: the output head's own type (None: tied to the embedding). Metadata only as
    the native engine reads it (no tokenizer)."""
    from gguf import GGMLQuantizationType, GGUFWriter, quants

    rng = np.random.default_rng(seed)
    heads, kv_heads = 4, 2
    head_dim = hidden // heads
    writer = GGUFWriter(str(path), "qwen2")
    for key, value in (("block_count", layers), ("context_length", 256), ("embedding_length", hidden),
                       ("feed_forward_length", ffn), ("attention.head_count", heads),
                       ("attention.head_count_kv", kv_heads)):
        getattr(writer, f"add_{key.replace('attention.', '').replace('.', '_')}")(value)
    writer.add_rope_freq_base(1e6)
    writer.add_layer_norm_rms_eps(1e-6)

    def matrix(name: str, n: int, k: int, kind: str) -> None:
        if kind == "Q4_K":  # 144 bytes a block of 256: d, dmin (float16), 12 bytes of 6-bit scales, 128 of codes
            blocks = rng.integers(0, 256, size=(n * k // 256, 144), dtype=np.uint8)
            blocks[:, 0:2] = np.full((len(blocks), 1), 0.002, dtype=np.float16).view(np.uint8)
            blocks[:, 2:4] = np.full((len(blocks), 1), 0.001, dtype=np.float16).view(np.uint8)
            writer.add_tensor(name, blocks.reshape(n, -1), raw_dtype=GGMLQuantizationType.Q4_K)
            return
        values = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
        if kind == "F32":
            writer.add_tensor(name, values)
        else:
            qtype = GGMLQuantizationType[kind]
            writer.add_tensor(name, quants.quantize(values, qtype), raw_dtype=qtype)

    matrix("token_embd.weight", vocab, hidden, "Q8_0")
    if head is not None:
        matrix("output.weight", vocab, hidden, head)
    writer.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32))
    for i in range(layers):
        b = f"blk.{i}."
        for name in ("attn_norm", "ffn_norm"):
            writer.add_tensor(b + name + ".weight", (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32))
        matrix(b + "attn_q.weight", hidden, hidden, "Q4_K")
        matrix(b + "attn_k.weight", kv_heads * head_dim, hidden, "Q4_K")
        matrix(b + "attn_v.weight", kv_heads * head_dim, hidden, "Q8_0" if i % 2 else "Q5_0")
        for p, size in (("q", hidden), ("k", kv_heads * head_dim), ("v", kv_heads * head_dim)):
            writer.add_tensor(f"{b}attn_{p}.bias", (0.1 * rng.standard_normal(size)).astype(np.float32))
        matrix(b + "attn_output.weight", hidden, hidden, "F32")
        matrix(b + "ffn_gate.weight", ffn, hidden, "Q4_K")
        matrix(b + "ffn_up.weight", ffn, hidden, "Q4_K")
        matrix(b + "ffn_down.weight", hidden, ffn, "Q8_0")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
