"""A native Llama-family decoder (Llama, SmolLM2, Qwen2, Mistral without sliding window) in plain PyTorch.

gpt-fast's recipe for a CPU: bf16 weights, fused QKV and gate/up projections, a static KV cache (rolling back is
moving `length`), rotary tables and a causal mask made once. One forward pass of k tokens:

    x [k, D] = embed[tokens]
    per layer:  q, k, v = split(rmsnorm(x) @ Wqkv^T)        [k, H*hd], [k, KV*hd], [k, KV*hd]
                rotate q, k at positions length .. length+k-1; write k, v into the cache
                x += attention(q, cache[: length+k], mask) @ Wo^T
                g, u = split(rmsnorm(x) @ Wgu^T);  x += (silu(g) * u) @ Wdown^T
    logits [k, V] = rmsnorm(x) @ Wlm^T   (float32)

Batch invariance: a 1-token pass runs as 2 rows (the token twice). CPU bf16 matmuls take a different kernel for one
row than for two or more, and that kernel rounds differently; with the padding every pass size computes each row
bitwise identically, so greedy speculative output equals plain greedy output exactly, in bf16 too.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open

SUPPORTED = ("llama", "qwen2", "mistral")
KEY_BLOCK = 512  # keys per block of torch's CPU flash attention (kvSplitSize) once there are >= 512 keys


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


class UnsupportedModel(ValueError):
    """The checkpoint's architecture is outside what the native engine implements."""


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


class NativeLlama:
    """A Llama-family checkpoint behind the `CausalLM` protocol, with a static KV cache."""

    _WEIGHTS = ("attn_norm", "wqkv", "bqkv", "wo", "mlp_norm", "wgu", "wdown")

    def __init__(self, shape: LlamaShape, weights: dict[str, torch.Tensor], dtype: torch.dtype = torch.bfloat16,
                 max_length: int | None = None, name: str = "llama", batch_invariant: bool = True,
                 packed: bool | None = None):
        self.shape, self.dtype, self.name = shape, dtype, name
        # oneDNN's prepacked bf16 weights: ~1.45x faster matmuls than F.linear here (it repacks them every call).
        self.packed = (dtype == torch.bfloat16 and torch.backends.mkldnn.is_available()) if packed is None else packed
        self.vocab_size = shape.vocab_size
        self.max_length = min(max_length or shape.max_positions, shape.max_positions)
        self.batch_invariant = batch_invariant
        cast = lambda t: t.to(dtype).contiguous()  # noqa: E731
        self.embed = cast(weights["model.embed_tokens.weight"])  # [V, D]
        self.lm_head = self.embed if shape.tied_embeddings or "lm_head.weight" not in weights \
            else cast(weights["lm_head.weight"])  # [V, D]
        self.norm = cast(weights["model.norm.weight"])
        self.blocks = []
        for i in range(shape.layers):
            w = lambda n: weights[f"model.layers.{i}.{n}"]  # noqa: B023, E731
            block = {
                "attn_norm": cast(w("input_layernorm.weight")),
                "wqkv": cast(torch.cat([w("self_attn.q_proj.weight"), w("self_attn.k_proj.weight"),
                                        w("self_attn.v_proj.weight")])),  # [(H + 2 KV) hd, D]
                "wo": cast(w("self_attn.o_proj.weight")),  # [D, H hd]
                "mlp_norm": cast(w("post_attention_layernorm.weight")),
                "wgu": cast(torch.cat([w("mlp.gate_proj.weight"), w("mlp.up_proj.weight")])),  # [2 I, D]
                "wdown": cast(w("mlp.down_proj.weight")),  # [D, I]
                "bqkv": cast(torch.cat([w("self_attn.q_proj.bias"), w("self_attn.k_proj.bias"),
                                        w("self_attn.v_proj.bias")])) if shape.qkv_bias else None,
            }
            if self.packed:
                for key in ("wqkv", "wo", "wgu", "wdown"):
                    block[key] = torch.ops.mkldnn._reorder_linear_weight(block[key])
            self.blocks.append(block)
        self.head = torch.ops.mkldnn._reorder_linear_weight(self.lm_head) if self.packed else self.lm_head
        self.output_ids: torch.Tensor | None = None  # see restrict_output
        kv = (shape.layers, 1, shape.kv_heads, self.max_length, shape.head_dim)
        self.k_cache = torch.zeros(kv, dtype=dtype)  # [layers, 1, KV, max_length, hd]
        self.v_cache = torch.zeros(kv, dtype=dtype)
        for i, block in enumerate(self.blocks):  # per-layer views, so the hot loop indexes once
            block["k"], block["v"] = self.k_cache[i], self.v_cache[i]  # [1, KV, max_length, hd]
        cos, sin = rotary_tables(shape, self.max_length)
        self.cos, self.sin = cos.to(dtype), sin.to(dtype)  # [max_length, hd]
        self.key_positions = torch.arange(self.max_length)
        self._length = 0

    @property
    def length(self) -> int:
        return self._length

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights one forward pass reads (the tied embedding is read once, by the output head)."""
        tensors = [self.lm_head, self.norm]
        tensors += [b[key] for b in self.blocks for key in self._WEIGHTS if b[key] is not None]
        return sum(t.numel() * t.element_size() for t in tensors)

    def _linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        return F.linear(x, weight, bias)

    def restrict_output(self, token_ids: torch.Tensor) -> None:
        """Compute logits for these tokens only (-inf for the rest): a draft's q may leave tokens out, and a draft
        whose output head reads a fifth of the rows is that much cheaper. Never for a target."""
        self.output_ids = token_ids.to(torch.int64)
        rows = self.lm_head[self.output_ids].contiguous()
        self.head = torch.ops.mkldnn._reorder_linear_weight(rows) if self.packed else rows

    def rollback(self, length: int) -> None:
        if not 0 <= length <= self._length:
            raise ValueError(f"cannot roll back to {length}: the cache holds {self._length} tokens")
        self._length = length  # the static cache keeps the stale tail; the mask never lets anyone see it

    def _rmsnorm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """Normalised in float32, rounded, then scaled: the order transformers uses, so logits agree bitwise."""
        return weight * F.rms_norm(x, (x.shape[-1],), eps=self.shape.rms_eps)  # (computes in float32 inside)

    @torch.inference_mode()
    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        k = tokens.numel()
        start, end = self._length, self._length + k
        if end > self.max_length:
            raise ValueError(f"the context window ({self.max_length} tokens) is full")
        rows = k
        if k == 1 and self.batch_invariant:  # see the module docstring
            tokens, rows = tokens.view(1).expand(2), 2
        positions = torch.arange(start, end).expand(2) if rows != k else torch.arange(start, end)
        s = self.shape
        hd, H, KV = s.head_dim, s.heads, s.kv_heads
        x = self.embed[tokens.view(-1)]  # [rows, D]
        cos, sin = self.cos[positions], self.sin[positions]  # [rows, hd]
        # Attention spans whole blocks of KEY_BLOCK cache slots (the CPU flash kernel's block): a row then sees the
        # same reduction whatever the pass size, and all-masked blocks change nothing (batch invariance).
        span = min(-(-end // KEY_BLOCK) * KEY_BLOCK, self.max_length) if self.batch_invariant else end
        # One additive causal mask per pass, shared by every layer: [rows, span], 0 = may attend, -inf = may not.
        mask = torch.zeros(rows, span, dtype=self.dtype).masked_fill_(
            self.key_positions[:span] > positions[:, None], -torch.inf)
        for b in self.blocks:
            qkv = self._linear(self._rmsnorm(x, b["attn_norm"]), b["wqkv"], b["bqkv"])  # [rows, (H + 2 KV) hd]
            qk = _rotate(qkv[:, : (H + KV) * hd].view(rows, H + KV, hd), cos, sin)  # q and k rotated together
            q, kk = qk.transpose(0, 1).split([H, KV])  # [H, rows, hd], [KV, rows, hd]
            v = qkv[:, (H + KV) * hd:]
            b["k"][0, :, start:end] = kk[:, :k]
            b["v"][0, :, start:end] = v.view(rows, KV, hd).transpose(0, 1)[:, :k]
            attn = F.scaled_dot_product_attention(q.unsqueeze(0), b["k"][:, :, :span], b["v"][:, :, :span],
                                                  attn_mask=mask, enable_gqa=True)  # [1, H, rows, hd]
            x = x + self._linear(attn[0].transpose(0, 1).reshape(rows, H * hd), b["wo"])
            gate, up = self._linear(self._rmsnorm(x, b["mlp_norm"]), b["wgu"]).chunk(2, dim=-1)  # [rows, I] each
            x = x + self._linear(F.silu(gate) * up, b["wdown"])
        self._length = end
        out = min(keep or k, k)
        x = x[k - out: k]  # the rows whose logits are wanted
        if out == 1 and self.batch_invariant:
            x = x.expand(2, -1)
        logits = self._linear(self._rmsnorm(x, self.norm), self.head).float()
        if self.output_ids is not None:
            full = logits.new_full((logits.shape[0], self.vocab_size), -torch.inf)
            logits = full.index_copy_(1, self.output_ids, logits)
        return logits[:out]  # [out, V]


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half rotary embedding: x [rows, heads, hd], cos / sin [rows, hd]."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]


def load_native(directory: str | Path, dtype: torch.dtype = torch.bfloat16, max_length: int | None = None,
                name: str | None = None, packed: bool | None = None) -> NativeLlama:
    """A NativeLlama from a transformers checkpoint directory (config.json + *.safetensors)."""
    directory = Path(directory)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{str(directory)!r} has no config.json: not a transformers checkpoint")
    shape = LlamaShape.from_config(json.loads(config_path.read_text()))
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise UnsupportedModel(f"{str(directory)!r} has no .safetensors weights (the native engine reads only those)")
    weights = {}
    for file in files:
        with safe_open(str(file), "pt") as f:
            for key in f.keys():  # noqa: SIM118 (safe_open is not a dict)
                weights[key] = f.get_tensor(key)
    return NativeLlama(shape, weights, dtype, max_length, name or directory.name, packed=packed)
