"""The Llama-family layer (Llama, SmolLM2, Qwen2, Mistral without sliding window), once, for every caller.

    h   = x + attention(rmsnorm(x))       q, k, v = split(x Wqkv^T); rotate q, k; write k, v into the cache
    out = h + mlp(rmsnorm(h))             mlp(x) = (silu(x Wgate^T) * x Wup^T) Wdown^T

x is [B, T, D] (B sequences of T new tokens, or one row of several sequences' tokens one after another, as
`Segment`s say). The native engine runs it with B = 1; the EAGLE trainer with a batch. Weights are `Linear`s in
whichever format the engine chose (see linear.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch
import torch.nn.functional as F

from .kernels import ISAS
from .linear import Linear, Twin

SUPPORTED = ("llama", "qwen2", "mistral")


class UnsupportedModel(ValueError):
    """The checkpoint's architecture is outside what the native engine implements."""


@dataclass(frozen=True)
class LlamaShape:
    vocab_size: int
    hidden: int  # D
    intermediate: int  # I
    layers: int
    heads: int  # H
    kv_heads: int  # KV
    head_dim: int  # hd
    rope_theta: float
    rms_eps: float
    max_positions: int
    tied_embeddings: bool
    qkv_bias: bool
    rope_scaling: dict | None

    @classmethod
    def from_config(cls, config: dict) -> LlamaShape:
        kind = config.get("model_type")
        if kind not in SUPPORTED:
            raise UnsupportedModel(f"the native engine runs {', '.join(SUPPORTED)} models, not {kind!r}")
        if kind == "mistral" and config.get("sliding_window") not in (None, 0) \
                and config["sliding_window"] < config.get("max_position_embeddings", 0):
            raise UnsupportedModel("the native engine has no sliding-window attention")
        if config.get("hidden_act", "silu") != "silu":
            raise UnsupportedModel(f"the native engine supports SiLU MLPs, not {config['hidden_act']!r}")
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in ("default", "llama3", "linear"):
            raise UnsupportedModel(f"the native engine has no {rope_type!r} rotary scaling")
        heads = config["num_attention_heads"]
        return cls(
            vocab_size=config["vocab_size"], hidden=config["hidden_size"], intermediate=config["intermediate_size"],
            layers=config["num_hidden_layers"], heads=heads, kv_heads=config.get("num_key_value_heads") or heads,
            head_dim=config.get("head_dim") or config["hidden_size"] // heads,
            rope_theta=rope.get("rope_theta", config.get("rope_theta", 10000.0)),
            rms_eps=config.get("rms_norm_eps", 1e-6), max_positions=config.get("max_position_embeddings", 4096),
            tied_embeddings=config.get("tie_word_embeddings", False), qkv_bias=kind == "qwen2"
            or config.get("attention_bias", False), rope_scaling=rope if rope_type != "default" else None,
        )


@dataclass(frozen=True)
class KeyPositions:
    """Attention by our C++ kernel (attention.cpp) instead of an additive mask: query row t attends cache slots
    0..positions[t], each row computed from its own keys alone, so bitwise the same whatever the pass (no rows or
    keys padded). The engine's choice for the int4-dot8 format, whose kernels are built anyway."""

    positions: torch.Tensor  # [T] int64


@dataclass(frozen=True)
class Segment:
    """One sequence's rows of a pass. A pass (x [B, T, D]) may carry several sequences one after another along T
    (the native engine's batched pass, with B = 1): rows first .. first + count - 1 are this one's. The first
    `written` of them are its new tokens, whose keys and values go to its cache slots start..; the rest repeat its
    last token (see `LlamaLayer.attend`). Its rows attend cache slots :span under mask [B or 1, 1, R, span]
    (additive, R >= count; None: all of them), or as `KeyPositions` say (span = S)."""

    first: int
    count: int
    k_cache: torch.Tensor  # [B, KV, S, hd]
    v_cache: torch.Tensor  # [B, KV, S, hd]
    start: int
    written: int
    span: int
    mask: torch.Tensor | KeyPositions | None


def rotary_tables(shape: LlamaShape, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [length, hd] (float32) for rotate-half rotary embeddings, with llama3 / linear scaling."""
    hd = shape.head_dim
    inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))  # as transformers
    scaling = shape.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "linear":
        inv_freq = inv_freq / scaling["factor"]
    elif kind == "llama3":
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        smooth = ((old / wavelen) - low) / (high - low)
        scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
        mid = (wavelen <= old / low) & (wavelen >= old / high)
        inv_freq = torch.where(mid, (1 - smooth) * inv_freq / factor + smooth * inv_freq, scaled)
    angles = torch.arange(length, dtype=torch.float32)[:, None] * inv_freq.float()[None]  # float32, as transformers
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half rotary embedding: x [B, T, heads, hd], cos / sin [B, T, hd]."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[..., None, :] + rotated * sin[..., None, :]


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Normalised in float32, rounded, then scaled: the order transformers uses, so logits agree bitwise."""
    return weight * F.rms_norm(x, (x.shape[-1],), eps=eps)  # (computes in float32 inside)


def apply(linear: Linear, x: torch.Tensor) -> torch.Tensor:
    """A Linear over the last dimension of x [..., K] -> [..., N]."""
    return linear(x.reshape(-1, x.shape[-1])).view(*x.shape[:-1], linear.out_features)


@dataclass
class LlamaLayer:
    attn_norm: torch.Tensor  # [D]
    qkv: Linear  # [(H + 2 KV) hd, D]: q, k and v projections fused
    o: Linear  # [D, H hd]
    mlp_norm: torch.Tensor  # [D]
    gate_up: Linear  # [2 I, D]: gate and up projections fused
    down: Linear  # [D, I]

    @classmethod
    def from_checkpoint(cls, weights: dict[str, torch.Tensor], i: int, shape: LlamaShape, fmt: str,
                        dtype: torch.dtype) -> LlamaLayer:
        """Layer i of a transformers state dict, its matrices in weight format fmt, its norms in dtype."""
        w = lambda name: weights[f"model.layers.{i}.{name}"]  # noqa: E731
        qkv = [w(f"self_attn.{p}_proj.weight") for p in "qkv"]
        bias = torch.cat([w(f"self_attn.{p}_proj.bias") for p in "qkv"]) if shape.qkv_bias else None
        return cls(
            attn_norm=w("input_layernorm.weight").to(dtype).contiguous(),
            qkv=Linear(torch.cat(qkv), bias, fmt),
            o=Linear(w("self_attn.o_proj.weight"), None, fmt),
            mlp_norm=w("post_attention_layernorm.weight").to(dtype).contiguous(),
            gate_up=Linear(torch.cat([w("mlp.gate_proj.weight"), w("mlp.up_proj.weight")]), None, fmt),
            down=Linear(w("mlp.down_proj.weight"), None, fmt),
        )

    def twin(self, fmt: str) -> LlamaLayer:
        """This layer over its matrices' `Twin`s in weight format fmt (a prompt path's layer): the steps below in
        float32, the twins' products in fmt."""
        return LlamaLayer(self.attn_norm, Twin(self.qkv, fmt), Twin(self.o, fmt), self.mlp_norm,
                          Twin(self.gate_up, fmt), Twin(self.down, fmt))

    @property
    def nbytes(self) -> int:
        norms = (self.attn_norm.numel() + self.mlp_norm.numel()) * self.attn_norm.element_size()
        return norms + sum(lin.nbytes for lin in (self.qkv, self.o, self.gate_up, self.down))

    def __call__(self, x: torch.Tensor, shape: LlamaShape, cos: torch.Tensor, sin: torch.Tensor,
                 segments: list[Segment]) -> torch.Tensor:
        """x [B, T, D]; cos, sin [B, T, hd]; segments: whose rows of x are whose (one per sequence, in order along
        T) -> [B, T, D]. An int4-dot8 layer attending by `KeyPositions` runs in one call of our kernel (layer.cpp),
        the same steps in C++."""
        if self._stack is not None and x.shape[0] == 1 and all(isinstance(s.mask, KeyPositions) for s in segments):
            if any(s.written != s.count for s in segments):
                raise ValueError("the layer kernel takes segments whose rows are all new tokens")
            rows = [(s.first, s.count, s.start) for s in segments]
            return self._stack(x[0], shape, cos[0], sin[0], rows, [[(s.k_cache[0], s.v_cache[0]) for s in segments]]
                               )[None]
        h = x + self.attention(rmsnorm(x, self.attn_norm, shape.rms_eps), shape, cos, sin, segments)
        return h + self.mlp(rmsnorm(h, self.mlp_norm, shape.rms_eps))

    @cached_property
    def _kernel(self) -> tuple | None:
        """This layer's weights as layer.cpp takes them (weights, parts per linear, bits, unscales, isa), or None
        where it cannot run them (not int4-dot8, a bias outside the q, k, v projection, a matrix not in whole
        tiles)."""
        linears = (self.qkv, self.o, self.gate_up, self.down)
        parts = [linear.dot8_parts() for linear in linears]
        if any(p is None for p in parts) or any(linear.bias is not None for linear in linears[1:]):
            return None
        return ([t for p in parts for t in p[0]], [len(p[1]) for p in parts], [b for p in parts for b in p[1]],
                [u for p in parts for u in p[2]], ISAS[self.qkv.isa])

    @cached_property
    def _stack(self) -> KernelStack | None:
        """This layer alone in layer.cpp (a pass that captures features between layers calls them one by one)."""
        return KernelStack.of([self])

    def project(self, x: torch.Tensor, shape: LlamaShape, cos: torch.Tensor, sin: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [B, T, K] (K = D, or what the qkv projection reads) -> q [B, H, T, hd] and k, v [B, KV, T, hd], q and k
        rotated to their positions."""
        B, T, _ = x.shape
        H, KV, hd = shape.heads, shape.kv_heads, shape.head_dim
        qkv = apply(self.qkv, x)  # [B, T, (H + 2 KV) hd]
        qk = rotate(qkv[..., : (H + KV) * hd].view(B, T, H + KV, hd), cos, sin)  # q and k rotated together
        q, k = qk.transpose(1, 2).split([H, KV], dim=1)  # [B, H, T, hd], [B, KV, T, hd]
        v = qkv[..., (H + KV) * hd:].view(B, T, KV, hd).transpose(1, 2)  # [B, KV, T, hd]
        return q, k, v

    @staticmethod
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, segment: Segment) -> torch.Tensor:
        """One segment's attention: q [B, H, T, hd], k, v [B, KV, T, hd] of the whole pass; the segment's new keys
        and values go into its cache, its rows attend it -> [B, count, H hd].

        With an additive mask of R > count rows, the last query is repeated to R rows and the first count kept: the
        CPU attention kernel rounds differently below some row count, and a batch-invariant pass must not. With
        `KeyPositions` (B = 1, float32, the whole cache as keys and values) our kernel computes it instead."""
        s = segment
        rows = slice(s.first, s.first + s.count)
        q = q[:, :, rows]
        s.k_cache[:, :, s.start:s.start + s.written] = k[:, :, s.first:s.first + s.written]
        s.v_cache[:, :, s.start:s.start + s.written] = v[:, :, s.first:s.first + s.written]
        keys, values = s.k_cache[:, :, :s.span], s.v_cache[:, :, :s.span]  # [B, KV, span, hd]
        B, H, T, hd = q.shape
        if isinstance(s.mask, KeyPositions):
            out = torch.ops.specdecode.attend(q[0].contiguous(), keys[0], values[0], s.mask.positions)[None]
        else:
            if s.mask is not None and s.mask.shape[-2] > T:
                q = torch.cat([q, q[:, :, -1:].expand(B, H, s.mask.shape[-2] - T, hd)], dim=2)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=s.mask, enable_gqa=True)[:, :, :T]
        return out.transpose(1, 2).reshape(B, T, H * hd)

    def attention(self, x: torch.Tensor, shape: LlamaShape, cos: torch.Tensor, sin: torch.Tensor,
                  segments: list[Segment]) -> torch.Tensor:
        """Attention of every segment's rows over its own cache, then the output projection over all rows at
        once -> [B, T, D]."""
        q, k, v = self.project(x, shape, cos, sin)
        outs = [self.attend(q, k, v, s) for s in segments]
        return apply(self.o, outs[0] if len(outs) == 1 else torch.cat(outs, dim=1))

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = apply(self.gate_up, x).chunk(2, dim=-1)  # [B, T, I] each
        return apply(self.down, F.silu(gate) * up)


@dataclass(frozen=True)
class KernelStack:
    """A stack of int4-dot8 layers run by layer.cpp in one call per pass (`dot8_layers`): each layer's steps in C++,
    in turn, without Python between layers (~40 us a layer on a 2-core EPYC: 7% of a draft token of the 0.5B, 3% of
    a pass of the 1.5B). x's rows are segments (`Segment`), all their rows new tokens."""

    attn_norms: list[torch.Tensor]
    mlp_norms: list[torch.Tensor]
    weights: list[torch.Tensor]
    parts: list[int]
    bits: list[int]
    unscales: list[float]
    qkv_biases: list[torch.Tensor | None]
    isa: int

    @classmethod
    def of(cls, layers: list[LlamaLayer]) -> KernelStack | None:
        """The stack of these layers, or None where one of them cannot run in layer.cpp."""
        kernels = [layer._kernel for layer in layers]
        if not layers or any(k is None for k in kernels) or len({k[4] for k in kernels}) > 1:
            return None
        return cls([layer.attn_norm for layer in layers], [layer.mlp_norm for layer in layers],
                   *([v for k in kernels for v in k[i]] for i in range(4)), [layer.qkv.bias for layer in layers],
                   kernels[0][4])

    def __call__(self, x: torch.Tensor, shape: LlamaShape, cos: torch.Tensor, sin: torch.Tensor,
                 rows: list[tuple[int, int, int]], caches: list[list[tuple[torch.Tensor, torch.Tensor]]]
                 ) -> torch.Tensor:
        """x [T, D]; cos, sin [T, hd]; rows: per segment (first, count, start), all its rows new tokens; caches: per
        layer, per segment its (k, v) [KV, S, hd] -> [T, D]."""
        return torch.ops.specdecode.dot8_layers(
            x.contiguous(), self.attn_norms, self.mlp_norms, shape.rms_eps, self.weights, self.parts, self.bits,
            self.unscales, self.qkv_biases, shape.heads, shape.kv_heads, shape.head_dim, cos.contiguous(),
            sin.contiguous(), [k for layer in caches for k, _ in layer], [v for layer in caches for _, v in layer],
            [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], self.isa)


def run_layers(layers: list[LlamaLayer], x: torch.Tensor, step, capture: tuple[int, ...] = ()):
    """x through every layer as step(i, layer, x) -> (x out, features): with `capture`, the residual stream
    entering each of those layers (len(layers) = the last layer's output) concatenated [..., len(capture) D], in
    capture's order; else None. What feature drafts read (drafts/feature.py), in the engine and the teacher alike."""
    streams = {}
    for i, layer in enumerate(layers):
        if i in capture:
            streams[i] = x
        x = step(i, layer, x)
    streams[len(layers)] = x
    return x, torch.cat([streams[i] for i in capture], dim=-1) if capture else None

