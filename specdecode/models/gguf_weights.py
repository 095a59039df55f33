"""A GGUF file's weights straight into the native engine's formats, without a detour through an fp32 checkpoint.

    Q4_K  (256 weights: 8 sub-blocks of 32, each w = d sc q - dmin m, q in 0..15)
          -> int4 as it is: code = q, scale = d sc, zero = 8 d sc - dmin m (only scale and zero are rounded, to bf16)
    other types (Q6_K, Q5_0, Q8_0, Q4_1, F16, ...)
          -> the `gguf` package's reference dequantisation, then the format's own rounding (`linear.Linear`); in
             the int4 format they go to int8 (per-row scales) unless fused with Q4_K matrices or asked otherwise:
             requantised to 16 levels they moved the 1.5B's top-1 agreement with llama.cpp from ~99% to 91%

Names follow llama.cpp's (`blk.N.attn_q.weight`, ...). llama.cpp's converter permutes the rows of a Llama model's q and
k projections for its interleaved rotary embedding; they are permuted back here so the one shared `LlamaLayer`
(rotate-half) runs them. Qwen2 files are stored rotate-half already.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader, dequantize
from gguf.quants import Q4_K
from tqdm import tqdm

from .linear import GROUP, Linear, activation_dtype
from .llama import LlamaLayer, LlamaShape, UnsupportedModel

__all__ = ["GGUFWeights", "read_gguf"]

ARCHITECTURES = ("qwen2", "llama")
Q4_K_BYTES = 144  # one block: 256 weights


class GGUFWeights:
    """The tensors of one GGUF file, by llama.cpp's names, turned into `Linear`s and dense tensors on request."""

    def __init__(self, path: str | Path, finer_as_int8: bool = True):
        """finer_as_int8: in the int4 format, hold matrices of finer types than Q4_K as int8 (the more accurate
        choice: a target's) rather than int4 (the cheaper one: a draft's)."""
        self.finer_as_int8 = finer_as_int8
        try:
            self.reader = GGUFReader(str(path))
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot read GGUF file {str(path)!r}: {error}") from None
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.arch = self.field("general.architecture")
        if self.arch not in ARCHITECTURES:
            raise UnsupportedModel(f"the native engine reads GGUF files of {', '.join(ARCHITECTURES)} models, "
                                   f"not {self.arch!r}")

    def field(self, key: str, default=None):
        field = self.reader.fields.get(key)
        return default if field is None else field.contents()

    def shape(self) -> LlamaShape:
        a, f = self.arch, self.field
        heads, hidden = f(f"{a}.attention.head_count"), f(f"{a}.embedding_length")
        embed = self.tensors["token_embd.weight"]
        return LlamaShape(
            vocab_size=int(embed.shape[1]), hidden=hidden, intermediate=f(f"{a}.feed_forward_length"),
            layers=f(f"{a}.block_count"), heads=heads, kv_heads=f(f"{a}.attention.head_count_kv", heads),
            head_dim=f(f"{a}.attention.key_length", hidden // heads), rope_theta=float(f(f"{a}.rope.freq_base", 1e4)),
            rms_eps=float(f(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)), max_positions=f(f"{a}.context_length"),
            tied_embeddings="output.weight" not in self.tensors, qkv_bias="blk.0.attn_q.bias" in self.tensors,
            rope_scaling=None,
        )

    def dense(self, name: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """A tensor de-quantized by the `gguf` package: [N, K] for a matrix (llama.cpp stores it as [K, N])."""
        t = self.tensors[name]
        values = dequantize(t.data, t.tensor_type).reshape([int(n) for n in reversed(t.shape)])
        return torch.from_numpy(np.array(values, dtype=np.float32)).to(dtype)  # a writable copy

    def q4_k(self, name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A Q4_K matrix as int4 codes [N, K] (uint8), scale and zero [N, K / 32] (float32)."""
        t = self.tensors[name]
        n, k = int(t.shape[1]), int(t.shape[0])
        blocks = np.array(t.data).reshape(-1, Q4_K_BYTES)  # [N K / 256, 144], a writable copy
        d = blocks[:, 0:2].view(np.float16).astype(np.float32)  # [B, 1]
        dmin = blocks[:, 2:4].view(np.float16).astype(np.float32)
        sc, m = Q4_K.get_scale_min(blocks[:, 4:16])  # [B, 8] each: 6-bit sub-block scales and minima
        qs = blocks[:, 16:].reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
        codes = (qs & 0x0F).reshape(n, k)  # sub-block 2j: the low nibbles of bytes 32j..; 2j + 1: the high ones
        scale = (d * sc).reshape(n, k // GROUP)
        minimum = (dmin * m).reshape(n, k // GROUP)
        return torch.from_numpy(codes), torch.from_numpy(scale), torch.from_numpy(8 * scale - minimum)

    def linear(self, names: list[str], fmt: str, bias: bool = False, permute: list[int | None] | None = None
               ) -> Linear:
        """The matrices `names` stacked along N (fused projections) as one Linear in fmt; Q4_K goes to int4 as it
        is. permute[i]: undo llama.cpp's q/k row permutation for that many heads."""
        permute = permute or [None] * len(names)
        biases = torch.cat([self.dense(n.replace(".weight", ".bias")) for n in names]) if bias else None
        q4_k = [self.tensors[n].tensor_type == GGMLQuantizationType.Q4_K for n in names]
        if fmt == "int4" and all(q4_k):
            parts = [self.q4_k(n) for n in names]
            parts = [[_unpermute(x, h) for x in part] for part, h in zip(parts, permute, strict=True)]
            return Linear.from_int4(*(torch.cat(xs) for xs in zip(*parts, strict=True)), bias=biases)
        weight = torch.cat([_unpermute(self.dense(n), h) for n, h in zip(names, permute, strict=True)])
        if fmt == "int4" and not any(q4_k) and self.finer_as_int8:
            fmt = "int8"  # 16 levels per 32 weights lose too much of Q6_K / Q5_0 / Q8_0 (docs/real-pair.md)
        return Linear(weight, biases, fmt)

    def layer(self, i: int, shape: LlamaShape, fmt: str) -> LlamaLayer:
        b, dtype = f"blk.{i}.", activation_dtype(fmt)
        llama = self.arch == "llama"
        return LlamaLayer(
            attn_norm=self.dense(b + "attn_norm.weight", dtype),
            qkv=self.linear([b + f"attn_{p}.weight" for p in "qkv"], fmt, shape.qkv_bias,
                            [shape.heads, shape.kv_heads, None] if llama else None),
            o=self.linear([b + "attn_output.weight"], fmt),
            mlp_norm=self.dense(b + "ffn_norm.weight", dtype),
            gate_up=self.linear([b + "ffn_gate.weight", b + "ffn_up.weight"], fmt),
            down=self.linear([b + "ffn_down.weight"], fmt),
        )


def _unpermute(x: torch.Tensor, heads: int | None) -> torch.Tensor:
    """Rows [heads * hd, ...] from llama.cpp's interleaved order back to rotate-half (None: unchanged)."""
    if heads is None:
        return x
    rest = x.shape[1:]
    return x.reshape(heads, -1, 2, *rest).transpose(1, 2).reshape(x.shape)


def read_gguf(path: str | Path, fmt: str, progress: str | None = None, finer_as_int8: bool = True) -> dict:
    """NativeLlama's parts (shape, embed [V, D], norm [D], layers, head) from a GGUF file, the matrices in weight
    format fmt; head_weight() gives the head as a dense [V, D] matrix on demand (`NativeLlama.restrict_output`).
    progress: a progress bar's label (None: no bar)."""
    weights = GGUFWeights(path, finer_as_int8)
    shape, dtype = weights.shape(), activation_dtype(fmt)
    layers = [weights.layer(i, shape, fmt) for i in tqdm(range(shape.layers), desc=progress, unit="layer",
                                                         file=sys.stderr, leave=False, disable=progress is None)]
    head = "token_embd.weight" if shape.tied_embeddings else "output.weight"
    return {"shape": shape, "embed": weights.dense("token_embd.weight", dtype), "layers": layers,
            "norm": weights.dense("output_norm.weight", dtype), "head": weights.linear([head], fmt),
            "head_weight": lambda: weights.dense(head, dtype)}
