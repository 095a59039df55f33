"""A GGUF file's weights straight into the native engine's formats, without a detour through an fp32 checkpoint.

    Q4_K  (256 weights: 8 sub-blocks of 32, each w = d sc q - dmin m, q in 0..15)
          -> int4-dot8's 4-bit blocks as they are (`dot8.Blocks`: the same integers and float16s, dmin negated);
             int4: code = q, scale = d sc, zero = 8 d sc - dmin m (only scale and zero are rounded, to bf16)
    Q6_K  (256 weights: 16 sub-blocks of 16, each w = d sc (q - 32), q in 0..63)
          -> int4-dot8's 6-bit blocks as they are
    other types (Q5_0, Q8_0, Q4_1, F16, ...; Q6_K outside int4-dot8)
          -> the `gguf` package's reference dequantisation, then the format's own rounding (`linear.Linear`).
             Finer types than Q4_K are kept finer unless asked otherwise (a draft's cheaper choice): int4 holds them
             as int8 (per-row scales) unless fused with Q4_K matrices, int4-dot8 in 6 bits per 16 weights;
             requantised to 16 levels they moved the 1.5B's top-1 agreement with llama.cpp from ~99% to 91%

Names follow llama.cpp's (`blk.N.attn_q.weight`, ...). llama.cpp's converter permutes the rows of a Llama model's q and
k projections for its interleaved rotary embedding; they are permuted back here so the one shared `LlamaLayer`
(rotate-half) runs them. Qwen2 files are stored rotate-half already.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader, dequantize
from gguf.quants import Q4_K
from tqdm import tqdm

from . import dot8
from .dot8 import Blocks
from .linear import Linear, activation_dtype
from .llama import LlamaLayer, LlamaShape, UnsupportedModel

__all__ = ["GGUFWeights", "Stored", "read_gguf"]

ARCHITECTURES = ("qwen2", "llama")
Q4_K_BYTES = 144  # one block: 256 weights
Q6_K_BYTES = 210  # one block: ql [128], qh [64], scales [16] (int8), d (float16)


class GGUFWeights:
    """The tensors of one GGUF file, by llama.cpp's names, turned into `Linear`s and dense tensors on request."""

    def __init__(self, path: str | Path, keep_finer: bool = True):
        """keep_finer: hold matrices of finer types than Q4_K finer than 4 bits (a target's reading) rather than in 4
        (the cheaper one: a draft's)."""
        self.keep_finer = keep_finer
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
        return self.stored(name, dtype)()

    def stored(self, name: str, dtype: torch.dtype = torch.float32) -> Stored:
        """A tensor as the file stores it, de-quantized when called."""
        t = self.tensors[name]
        return Stored(t.data, t.tensor_type, tuple(int(n) for n in reversed(t.shape)), dtype)

    def q4_k(self, name: str) -> Blocks:
        """A Q4_K matrix as it is: codes [N, K] (0..15), sc and m [N, K / 32] (0..63), d and -dmin [N, K / 256]."""
        t = self.tensors[name]
        n, k = int(t.shape[1]), int(t.shape[0])
        blocks = np.array(t.data).reshape(-1, Q4_K_BYTES)  # [N K / 256, 144], a writable copy
        d = blocks[:, 0:2].view(np.float16).astype(np.float32)  # [B, 1]
        dmin = blocks[:, 2:4].view(np.float16).astype(np.float32)
        sc, m = Q4_K.get_scale_min(blocks[:, 4:16])  # [B, 8] each: 6-bit sub-block scales and minima
        qs = blocks[:, 16:].reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
        codes = (qs & 0x0F).reshape(n, k)  # sub-block 2j: the low nibbles of bytes 32j..; 2j + 1: the high ones
        per_group = lambda a: torch.from_numpy(a.astype(np.int16).reshape(n, k // 32))  # noqa: E731
        per_super = lambda a: torch.from_numpy(a.reshape(n, k // 256))  # noqa: E731
        return Blocks(torch.from_numpy(codes), per_group(sc), per_super(d), 4, per_group(m), per_super(-dmin))

    def q6_k(self, name: str) -> Blocks:
        """A Q6_K matrix as it is: codes [N, K] (0..63), sc [N, K / 16] (int8), d [N, K / 256]. The codes come from
        the reference dequantisation divided by each sub-block's scale, which recovers them exactly
        (|q - 32| <= 32)."""
        t = self.tensors[name]
        n, k = int(t.shape[1]), int(t.shape[0])
        blocks = np.array(t.data).reshape(-1, Q6_K_BYTES)
        d = torch.from_numpy(blocks[:, 208:210].view(np.float16).astype(np.float32).reshape(n, k // 256))
        sc = torch.from_numpy(blocks[:, 192:208].view(np.int8).astype(np.int16).reshape(n, k // 16))
        step = (d.repeat_interleave(16, 1) * sc)[..., None]  # [N, K / 16, 1]
        dense = self.dense(name).view(n, k // 16, 16)
        codes = torch.where(step != 0, torch.round(dense / step), 0) + 32
        return Blocks(codes.clamp(0, 63).to(torch.uint8).view(n, k), sc, d, 6)

    def blocks(self, name: str, heads: int | None) -> Blocks:
        """One matrix for int4-dot8, Q4_K and Q6_K as they are, other types rounded to 6 bits (4 without
        keep_finer); rows un-permuted for `heads` heads."""
        kind = self.tensors[name].tensor_type
        if kind == GGMLQuantizationType.Q4_K:
            blocks = self.q4_k(name)
        elif kind == GGMLQuantizationType.Q6_K and self.keep_finer:
            blocks = self.q6_k(name)
        else:
            blocks = dot8.quantize(self.dense(name), 6 if self.keep_finer else 4)
        return _unpermute(blocks, heads)

    def linear(self, names: list[str], fmt: str, bias: bool = False, permute: list[int | None] | None = None
               ) -> Linear:
        """The matrices `names` stacked along N (fused projections) as one Linear in fmt; Q4_K goes to int4 as it
        is. permute[i]: undo llama.cpp's q/k row permutation for that many heads."""
        permute = permute or [None] * len(names)
        biases = torch.cat([self.dense(n.replace(".weight", ".bias")) for n in names]) if bias else None
        if fmt == "int4-dot8":  # neighbours with the same bits stacked into one part
            parts = [self.blocks(n, h) for n, h in zip(names, permute, strict=True)]
            runs = [Blocks.cat(list(run)) for _, run in itertools.groupby(parts, key=lambda part: part.bits)]
            return Linear.from_blocks(runs, bias=biases)
        q4_k = [self.tensors[n].tensor_type == GGMLQuantizationType.Q4_K for n in names]
        if fmt == "int4" and all(q4_k):
            blocks = Blocks.cat([_unpermute(self.q4_k(n), h) for n, h in zip(names, permute, strict=True)])
            scale = blocks.scale()
            return Linear.from_int4(blocks.codes, scale, blocks.offset() + 8 * scale, bias=biases)
        weight = torch.cat([_unpermute(self.dense(n), h) for n, h in zip(names, permute, strict=True)])
        if fmt == "int4" and not any(q4_k) and self.keep_finer:
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


@dataclass(frozen=True)
class Stored:
    """One tensor as a GGUF file stores it (its blocks' bytes, their type, its shape [N, K] or [N]); called: the
    tensor de-quantized by the `gguf` package, in dtype (a writable copy)."""

    data: np.ndarray
    kind: GGMLQuantizationType
    shape: tuple[int, ...]
    dtype: torch.dtype

    def __call__(self) -> torch.Tensor:
        values = dequantize(self.data, self.kind).reshape(self.shape)  # (the file's own array, for F32)
        if values.dtype != np.float32 or not values.flags.writeable or np.may_share_memory(values, self.data):
            values = np.array(values, dtype=np.float32)
        return torch.from_numpy(values).to(self.dtype)


def _unpermute(x: torch.Tensor | Blocks, heads: int | None) -> torch.Tensor | Blocks:
    """Rows [heads * hd, ...] from llama.cpp's interleaved order back to rotate-half (None: unchanged)."""
    if heads is None:
        return x
    if isinstance(x, Blocks):
        return x.rows(_unpermute(torch.arange(x.codes.shape[0]), heads))
    rest = x.shape[1:]
    return x.reshape(heads, -1, 2, *rest).transpose(1, 2).reshape(x.shape)


def read_gguf(path: str | Path, fmt: str, progress: str | None = None, keep_finer: bool = True) -> dict:
    """NativeLlama's parts (shape, embed [V, D], norm [D], layers, head) from a GGUF file, the matrices in weight
    format fmt; head_weight() gives the head as a dense [V, D] matrix on demand (`NativeLlama.restrict_output`): a
    `Stored` tensor.
    progress: a progress bar's label (None: no bar)."""
    weights = GGUFWeights(path, keep_finer)
    shape, dtype = weights.shape(), activation_dtype(fmt)
    layers = [weights.layer(i, shape, fmt) for i in tqdm(range(shape.layers), desc=progress, unit="layer",
                                                         file=sys.stderr, leave=False, disable=progress is None)]
    head = "token_embd.weight" if shape.tied_embeddings else "output.weight"
    return {"shape": shape, "embed": weights.dense("token_embd.weight", dtype), "layers": layers,
            "norm": weights.dense("output_norm.weight", dtype), "head": weights.linear([head], fmt),
            "head_weight": weights.stored(head, dtype)}
