"""Any transformers `AutoModelForCausalLM` behind the `CausalLM` protocol, with its KV cache.

extend(k tokens) is one forward pass with the cache kept; rollback crops the cache (transformers 5.x: `cache=`
argument, `DynamicCache.crop(-n)` removes the last n tokens).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from ..cpu import capability
from ..errors import first_line
from .base import CausalLM

DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float32": torch.float32, "fp32": torch.float32}


def parse_dtype(name: str) -> torch.dtype:
    """A transformers model's dtype; auto = bfloat16 where the CPU has native bf16 matmuls, else float32."""
    if name == "auto":
        return torch.bfloat16 if capability().bf16_matmul else torch.float32
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"the transformers engine runs bfloat16 or float32 weights, not {name!r}") from None


class HFCausalLM(CausalLM):
    """A transformers causal LM with a `DynamicCache`. Batch size 1; logits are returned as float32."""

    def __init__(self, model, name: str | None = None):
        from transformers import DynamicCache

        self._cache_class = DynamicCache
        self.model = model.eval()
        self.config = model.config
        self.name = name or getattr(self.config, "_name_or_path", None) or type(model).__name__
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.max_length = getattr(self.config, "max_position_embeddings", None)
        self.cache = DynamicCache(config=self.config)
        self._length = 0

    @property
    def length(self) -> int:
        return self._length

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights one pass reads: each parameter once (tied ones once), less an untied input embedding (a
        lookup reads one row, not all)."""
        seen, total = set(), 0
        for p in self.model.parameters():
            if p.data_ptr() not in seen:
                seen.add(p.data_ptr())
                total += p.numel() * p.element_size()
        embed = self.model.get_input_embeddings().weight
        tied = self.model.get_output_embeddings().weight.data_ptr() == embed.data_ptr()
        return total if tied else total - embed.numel() * embed.element_size()

    @torch.inference_mode()
    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        out = self.model(input_ids=tokens.view(1, -1), cache=self.cache, use_cache=True, logits_to_keep=keep or 0)
        self._length += tokens.numel()
        return out.logits[0].float()  # [k, V]

    def rollback(self, length: int) -> None:
        if not 0 <= length <= self._length:
            raise ValueError(f"cannot roll back to {length}: the cache holds {self._length} tokens")
        if length == 0:
            self.cache = self._cache_class(config=self.config)
        elif length < self._length:
            self.cache.crop(length - self._length)  # a negative count: remove that many from the end
        self._length = length


def load_hf_gguf(path: Path, dtype: torch.dtype = torch.bfloat16):
    """A transformers model from a GGUF file, its blocks dequantised by transformers (with the gguf package): the
    weights as llama.cpp holds them, in `dtype`. Never reaches for the network."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    print(f"loading {path.name} into transformers ({str(dtype).removeprefix('torch.')}, dequantised, ~1 min)",
          file=sys.stderr, flush=True)
    try:
        return AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype,
                                                    local_files_only=True)
    except (OSError, ValueError, KeyError, ImportError) as error:
        raise ValueError(f"cannot load {str(path)!r} into transformers: {first_line(error)}") from None


def load_hf_model(directory: str | os.PathLike, dtype: torch.dtype = torch.bfloat16):
    """(transformers model, tokenizer) from a local checkpoint directory; never reaches for the network."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # loading safetensors takes ~2 s: no bar needed
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype, local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"cannot load model {str(directory)!r}: {first_line(error)}") from None
    return model, tokenizer
