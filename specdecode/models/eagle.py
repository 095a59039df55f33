"""The feature-level draft head (EAGLE-3: Li et al. 2025), in the checkpoint layout that vLLM and SGLang read.

One decoder layer at the target's width drafts from the target's own features instead of from tokens alone:

    h    = fc(concat(f_a, f_b, f_c))                  [T, 3D] -> [T, D]  f_*: the target's residual stream entering
                                                                         three of its layers (`feature_layers`)
    x    = concat(rmsnorm_e(embed[token]), rmsnorm_h(h))                 [T, 2D]  token: the one that follows f
    r    = h + attention(x)                           q, k, v project 2D; rotary at the feature's position
    out  = r + mlp(rmsnorm(r))                        [T, D]  the next step's h: after the first step the head drafts
                                                              on its own output (no target features exist for drafts)
    q    = softmax(lm_head(rmsnorm(out)))             [T, Vd] over Vd frequent target tokens; d2t maps them back

The layer is `models.llama.LlamaLayer` (its qkv projection reads 2D); the token embedding is the target's, not stored.

Checkpoint (model.safetensors + config.json with architectures ["LlamaForCausalLMEagle3"]):
    fc.weight [D, 3D]   midlayer.{input_layernorm,hidden_norm,post_attention_layernorm}.weight [D]
    midlayer.self_attn.{q,k,v}_proj.weight [H hd | KV hd, 2D]   midlayer.self_attn.o_proj.weight [D, H hd]
    midlayer.mlp.{gate,up}_proj.weight [I, D]   midlayer.mlp.down_proj.weight [D, I]   norm.weight [D]
    lm_head.weight [Vd, D]   d2t [Vd] int64 (target id = draft id + d2t[draft id])   t2d [V] bool
Feature layers are vLLM's and SGLang's default for a target of L layers, (2, L // 2, L - 3): neither reads them
from the config the same way, so a checkpoint that serves in both keeps the default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .linear import Linear, activation_dtype
from .llama import LlamaLayer, LlamaShape, Segment, rmsnorm

ARCHITECTURE = "LlamaForCausalLMEagle3"
LAYER = "midlayer."
# Every tensor of the layout, with its shape in terms of the config (see the module docstring).
TENSORS = ("fc.weight", "midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
           "midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight", "midlayer.self_attn.v_proj.weight",
           "midlayer.self_attn.o_proj.weight", "midlayer.post_attention_layernorm.weight",
           "midlayer.mlp.gate_proj.weight", "midlayer.mlp.up_proj.weight", "midlayer.mlp.down_proj.weight",
           "norm.weight", "lm_head.weight", "d2t", "t2d")


def default_feature_layers(target_layers: int) -> tuple[int, int, int]:
    """The layers whose input (residual stream) the head reads: vLLM's and SGLang's EAGLE-3 default."""
    return 2, target_layers // 2, target_layers - 3


def eagle_config(target_config: dict, draft_vocab_size: int, target_name: str) -> dict:
    """The head's config.json: a one-layer Llama at the target's width, as the EAGLE-3 loaders expect it."""
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
            "max_position_embeddings", "vocab_size", "bos_token_id", "eos_token_id", "hidden_act")
    config = {k: target_config[k] for k in keys if target_config.get(k) is not None}
    shape = LlamaShape.from_config(target_config)
    return config | {
        "rope_theta": shape.rope_theta, "head_dim": shape.head_dim, "rope_scaling": shape.rope_scaling,
        "architectures": [ARCHITECTURE], "model_type": "llama", "num_hidden_layers": 1, "tie_word_embeddings": False,
        "draft_vocab_size": draft_vocab_size, "target_hidden_size": target_config["hidden_size"],
        "torch_dtype": "bfloat16", "attention_bias": False, "mlp_bias": False,
        "specdecode": {"target": target_name, "feature_layers": list(default_feature_layers(
            target_config["num_hidden_layers"])), "target_layers": target_config["num_hidden_layers"]},
    }


def is_eagle(directory: Path) -> bool:
    config = directory / "config.json"
    return config.is_file() and ARCHITECTURE in json.loads(config.read_text()).get("architectures", [])


@dataclass
class EagleHead:
    shape: LlamaShape  # of the head: one layer at the target's width; vocab_size is the target's V
    feature_layers: tuple[int, ...]
    fc: Linear  # [D, 3D]
    embed_norm: torch.Tensor  # [D] (input_layernorm: applied to the token's embedding)
    hidden_norm: torch.Tensor  # [D]
    layer: LlamaLayer  # qkv reads [2D]; its attn_norm is embed_norm
    norm: torch.Tensor  # [D]
    head: Linear  # [Vd, D]
    draft_ids: torch.Tensor  # [Vd] int64: the target id of each draft-vocabulary row

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], config: dict, fmt: str) -> EagleHead:
        """The head from layout-named tensors (a checkpoint's, or a trainer's parameters: with fmt "fp32" the
        weights are used as given, so gradients flow to them)."""
        shape = LlamaShape.from_config(config | {"num_hidden_layers": 1})
        dtype = activation_dtype(fmt)
        t = lambda name: tensors[LAYER + name]  # noqa: E731
        norm = lambda w: w.to(dtype)  # noqa: E731
        layer = LlamaLayer(
            attn_norm=norm(t("input_layernorm.weight")),
            qkv=Linear(torch.cat([t(f"self_attn.{p}_proj.weight") for p in "qkv"]), None, fmt),
            o=Linear(t("self_attn.o_proj.weight"), None, fmt),
            mlp_norm=norm(t("post_attention_layernorm.weight")),
            gate_up=Linear(torch.cat([t("mlp.gate_proj.weight"), t("mlp.up_proj.weight")]), None, fmt),
            down=Linear(t("mlp.down_proj.weight"), None, fmt),
        )
        d2t = tensors["d2t"].to(torch.int64)
        layers = config.get("specdecode", {}).get("feature_layers") or \
            default_feature_layers(config.get("specdecode", {}).get("target_layers", 0))
        return cls(shape, tuple(layers), Linear(tensors["fc.weight"], None, fmt), layer.attn_norm,
                   norm(t("hidden_norm.weight")), layer, norm(tensors["norm.weight"]),
                   Linear(tensors["lm_head.weight"], None, fmt), torch.arange(len(d2t)) + d2t)

    @property
    def dtype(self) -> torch.dtype:
        return self.norm.dtype

    @property
    def nbytes(self) -> int:
        """Bytes of weights one drafting step reads (fc only on the first step of a round)."""
        return self.layer.nbytes + self.head.nbytes + 3 * self.norm.numel() * self.norm.element_size()

    def fuse(self, features: torch.Tensor) -> torch.Tensor:
        """features [..., 3D] (the target's) -> h [..., D]."""
        return self.fc(features.reshape(-1, features.shape[-1])).view(*features.shape[:-1], -1)

    def inputs(self, h: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """h, embeds [B, T, D] -> the attention's input [B, T, 2D] (embedding first, as the layout has it)."""
        eps = self.shape.rms_eps
        return torch.cat([rmsnorm(embeds, self.embed_norm, eps), rmsnorm(h, self.hidden_norm, eps)], dim=-1)

    def finish(self, h: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The residual around attention, then the MLP block -> out [B, T, D] (the next step's h)."""
        r = h + attended
        return r + self.layer.mlp(rmsnorm(r, self.layer.mlp_norm, self.shape.rms_eps))

    def step(self, h: torch.Tensor, embeds: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
             k_cache: torch.Tensor, v_cache: torch.Tensor, start: int, span: int,
             mask: torch.Tensor | None) -> torch.Tensor:
        """One pass over T positions of B sequences (h, embeds [B, T, D]) with a KV cache (k_cache, v_cache
        [B, KV, S, hd], slots start..start+T written, :span read under mask [T, span] or None = all) -> out [B, T, D].
        Drafting runs it with B = 1; training (distill/eagle/loss.py) over a batch, once per rollout step."""
        T = h.shape[1]
        attended = self.layer.attention(self.inputs(h, embeds), self.shape, cos, sin,
                                        [Segment(0, T, k_cache, v_cache, start, T, span, mask)])
        return self.finish(h, attended)

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """out [..., D] -> logits [..., Vd] over the draft vocabulary (float32)."""
        x = rmsnorm(out, self.norm, self.shape.rms_eps)
        return self.head(x.reshape(-1, x.shape[-1])).view(*x.shape[:-1], -1).float()


def save_eagle(directory: Path, tensors: dict[str, torch.Tensor], config: dict) -> None:
    """Write the head: model.safetensors (matrices and norms in bfloat16, d2t int64, t2d bool) and config.json."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in TENSORS:
        value = tensors[name].detach()
        out[name] = value.contiguous() if name in ("d2t", "t2d") else value.to(torch.bfloat16).contiguous()
    save_file(out, str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(config, indent=1) + "\n")


def load_tensors(directory: Path) -> tuple[dict[str, torch.Tensor], dict]:
    """A saved head's layout-named tensors (floating ones as float32) and its config."""
    config = json.loads((directory / "config.json").read_text())
    tensors = load_file(str(directory / "model.safetensors"))
    missing = [name for name in TENSORS if name not in tensors]
    if missing:
        raise ValueError(f"{str(directory)!r} is not a complete EAGLE-3 head: it lacks {', '.join(missing)}")
    return {k: v.float() if v.is_floating_point() else v for k, v in tensors.items()}, config


def load_eagle(directory: Path, fmt: str) -> EagleHead:
    return EagleHead.from_tensors(*load_tensors(directory), fmt)
