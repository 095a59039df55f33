"""The native engine: a Llama-family checkpoint (see llama.py) behind `CausalLM`, in plain PyTorch.

gpt-fast's recipe for a CPU: fused QKV and gate/up projections, a static KV cache (rolling back is moving
`length`), rotary tables and a causal mask made once. One forward pass of k tokens:

    x [k, D] = embed[tokens];  x = layer(x) for each layer;  logits [k, V] = rmsnorm(x) @ Wlm^T   (float32)

The weights are held in the format that suits the CPU (linear.py: bf16 prepacked for oneDNN where the CPU has
native bf16 matmuls, else int8), chosen by `linear.best_format` unless asked for.

Batch invariance: a pass computes each row bitwise as it would alone, whatever k, so greedy speculative output equals
plain greedy output exactly. Kernels round differently below some row count (torch's CPU attention below 4 query rows
on an AVX-512 EPYC, oneDNN's bf16 products at 3), so a pass of fewer tokens runs as `linear.BATCH_INVARIANT_ROWS`
rows (the last token repeated at its own position); for the formats whose products are invariant at any row count
(`linear.INVARIANT_PRODUCTS`: int4) only attention computes the extra query rows, and the products, where the time
goes, compute k. Attention always spans whole blocks of KEY_BLOCK keys.

A prompt path (`add_prompt_path`: load.py gives the server's and the benches' GGUF models one where the CPU has
AMX-BF16): the rows of a prompt that no logits are wanted for (`prefill`) go through twins of the layers in bf16
(`LlamaLayer.twin`), every other row through the int4-dot8 layers; on a 2-core AMX Xeon a 128-row prefill of the
1.5B costs 0.40 s against 1.1 (docs/bench/prompt-path). A row's path is its role's (prompt or not), whatever else
shares its pass. oneDNN's bf16 rows are not invariant to the row count past 32, and cut into 32-row products they
cost twice as much (the weights are read again for each), so the prompt rows run in pieces fixed by their positions
(cells PROMPT_CHUNK j .. PROMPT_CHUNK (j + 1) - 1, and the prompt's own ends): each piece one product per matrix,
one pass of the twins per piece. A prompt is then computed alike whole, in the server's chunks (cut at the same
cells: `prompt_chunk`) or beside others; a cache cell remembers which path wrote it, and is reused only for a row
of the same role, and prompt cells only in whole pieces. Where the CPU has no AMX-BF16 there is no prompt path: a
prompt's rows go through the int4-dot8 layers as the others do.

Several sequences at once (the server's batches): `sequence(i)` is a view with a KV cache of its own, and
`extend_batch` runs several sequences' new tokens in one pass, their rows one after another (`llama.Segment`): the
products read each weight once for all of them, attention reads each sequence's own cache. Each row is bitwise what
its sequence's own pass gives it, on the same terms as above.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from safetensors import safe_open
from tqdm import tqdm

from ..cpu import capability
from .base import CausalLM
from .linear import (
    BATCH_INVARIANT_ROWS,
    FLOAT32_FORMATS,
    FORMATS,
    INVARIANT_PRODUCTS,
    Linear,
    activation_dtype,
    best_format,
    check_format,
)
from .llama import (
    KernelStack,
    KeyPositions,
    LlamaLayer,
    LlamaShape,
    Segment,
    UnsupportedModel,
    rmsnorm,
    rotary_tables,
    run_layers,
)

__all__ = ["KEY_BLOCK", "LlamaShape", "NativeLlama", "NativeSequence", "UnsupportedModel", "load_native"]

KEY_BLOCK = 512  # keys per block of torch's CPU flash attention (kvSplitSize) once there are >= 512 keys
PROMPT_CHUNK = 128  # prompt rows run by the prompt path in pieces of cells PROMPT_CHUNK j .. (see the docstring)
# Fewest prompt rows a prefill puts on the prompt path (fewer stay on int4-dot8): the bf16 copy of the weights is read
# whatever the rows, and on the AMX Xeon 16 rows cost it ~185 ms against int4-dot8's ~135, 32 rows 209 against 227.
PROMPT_LEAST = 32


def query_block(rows: int) -> int:
    """Query rows per block of torch's CPU flash attention (its qSplitSize) in a pass of `rows` query rows."""
    return 32 if rows < 192 else 64 if rows < 768 else 256


class NativeLlama(CausalLM):
    """A Llama-family checkpoint behind the `CausalLM` protocol, with a static KV cache (and one more per extra
    sequence: `sequence`, `extend_batch`). Its verify slope is the protocol's default (`VERIFY_SLOPE`, measured on
    this engine)."""

    sequences = True

    def __init__(self, shape: LlamaShape, weights: dict[str, torch.Tensor], weight_format: str | None = None,
                 max_length: int | None = None, name: str = "llama", batch_invariant: bool = True):
        """From a transformers state dict; weight_format: one of linear.FORMATS, or None for the best this CPU runs
        (`linear.best_format`)."""
        fmt = self._check(weight_format)
        dtype = activation_dtype(fmt)
        tied = shape.tied_embeddings or "lm_head.weight" not in weights
        head = weights["model.embed_tokens.weight" if tied else "lm_head.weight"]  # [V, D], as in the checkpoint
        embed = weights["model.embed_tokens.weight"].to(dtype).contiguous()
        # Kept for restrict_output in the activation dtype (the checkpoint's fp32 copy is not held on to).
        head_weight = embed if tied else head.to(dtype).contiguous()
        self._build(shape, embed, weights["model.norm.weight"].to(dtype).contiguous(),
                    [LlamaLayer.from_checkpoint(weights, i, shape, fmt, dtype) for i in range(shape.layers)],
                    Linear(head, None, fmt), lambda: head_weight, fmt, max_length, name, batch_invariant)

    @classmethod
    def from_parts(cls, shape: LlamaShape, embed: torch.Tensor, norm: torch.Tensor, layers: list[LlamaLayer],
                   head: Linear, head_weight: Callable[[], torch.Tensor], weight_format: str,
                   max_length: int | None = None, name: str = "llama", batch_invariant: bool = True) -> NativeLlama:
        """From weights already in weight_format (a GGUF file's: models/gguf_weights.py). embed [V, D] and norm [D]
        in the activation dtype; head_weight() -> [V, D], the head's dense values (for restrict_output)."""
        model = cls.__new__(cls)
        model._build(shape, embed, norm, layers, head, head_weight, cls._check(weight_format), max_length, name,
                     batch_invariant)
        return model

    @staticmethod
    def _check(weight_format: str | None) -> str:
        cpu = capability()
        fmt = weight_format or best_format(cpu)
        check_format(fmt, cpu)
        return fmt

    def _build(self, shape, embed, norm, layers, head, head_weight, fmt, max_length, name, batch_invariant):
        self.format, self.shape, self.name = fmt, shape, name
        self.dtype = activation_dtype(fmt)  # of activations, norms and the KV cache
        self.vocab_size = shape.vocab_size
        self.max_length = min(max_length or shape.max_positions, shape.max_positions)
        self.batch_invariant = batch_invariant
        # The residual stream, keys, values and attention: float32 for int4 models (GGUF files), as in llama.cpp:
        # Qwen2's key biases make keys too large for bf16's 8 bits (the 1.5B's top-1 agreement with llama.cpp was
        # 95-97% with them in bf16: docs/real-pair.md). The int4 products still take bf16 inputs.
        self.residual_dtype = torch.float32 if fmt in FLOAT32_FORMATS else self.dtype
        self.kernel_attention = fmt == "int4-dot8"  # our attention kernel (llama.KeyPositions), built with its products
        self.embed = embed.to(self.residual_dtype)
        self.norm, self.layers, self.head = norm, layers, head  # [D], ..., [V, D]
        self.head_weight = head_weight  # () -> [V, D]: the head's dense values (restrict_output, the eagle trainer)
        self.output_ids: torch.Tensor | None = None  # see restrict_output
        # Feature drafts (drafts/feature.py): the residual stream entering each of these layers (the number of
        # layers = the last layer's output) is kept from every pass as `features` [k, len(feature_layers) D].
        self.feature_layers: tuple[int, ...] = ()
        self.features: torch.Tensor | None = None
        cos, sin = rotary_tables(shape, self.max_length)
        self.cos, self.sin = cos.to(self.residual_dtype), sin.to(self.residual_dtype)  # [max_length, hd]
        self.key_positions = torch.arange(self.max_length)
        self._caches = [self._new_cache()]  # one per sequence; sequence 0 is this object's own
        self.reused_tokens = 0  # prompt tokens not computed again: their cells held them already (`_reusable`)
        self.prompt_layers: list[LlamaLayer] | None = None  # the prompt path's (`add_prompt_path`)
        self._sequences: dict[int, NativeSequence] = {}

    def add_prompt_path(self, fmt: str = "bf16-onednn", progress: str | None = None) -> None:
        """Compute prompt rows (`prefill`'s context rows) through twins of the layers in weight format fmt
        (`LlamaLayer.twin`: the same weights, dequantised and rounded to fmt; float32 between the products, keys and
        values in this cache). For int4-dot8 models; fmt must be batch invariant (bf16-onednn, int8). Costs fmt's
        copy of the layers' weights in memory (2.6 GB for a 1.5B in bf16). progress: a progress bar's label."""
        if self.format != "int4-dot8":
            raise ValueError(f"a prompt path twins int4-dot8 layers, not {self.format}")
        if fmt == self.format:
            raise ValueError(f"a prompt path twins the layers in another format than their own ({fmt})")
        if fmt not in FORMATS or fmt not in BATCH_INVARIANT_ROWS:
            raise ValueError(f"a prompt path needs a batch-invariant weight format, not {fmt!r}")
        check_format(fmt, capability())
        self.prompt_layers = [layer.twin(fmt) for layer in tqdm(
            self.layers, desc=progress, unit="layer", file=sys.stderr, leave=False, disable=progress is None)]

    @property
    def prompt_format(self) -> str | None:
        """The prompt path's weight format, or None without one."""
        return self.prompt_layers[0].qkv.format if self.prompt_layers is not None else None

    @property
    def prompt_chunk(self) -> int | None:
        return PROMPT_CHUNK if self.prompt_layers is not None else None

    def _new_cache(self) -> Cache:
        s = self.shape
        kv = (s.layers, 1, s.kv_heads, self.max_length, s.head_dim)
        return Cache(torch.zeros(kv, dtype=self.residual_dtype), torch.zeros(kv, dtype=self.residual_dtype))

    @property
    def length(self) -> int:
        return self._caches[0].length

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights one forward pass reads (the tied embedding is read once, by the output head)."""
        return self.head.nbytes + self.norm.numel() * self.norm.element_size() + sum(x.nbytes for x in self.layers)

    def restrict_output(self, token_ids: torch.Tensor) -> None:
        """Compute logits for these tokens only (-inf for the rest): a draft's q may leave tokens out, and a draft
        whose output head reads a fifth of the rows is that much cheaper. Never for a target. int4-dot8 keeps the
        head's own packed rows (`Packed.rows`: 0.7 s for the 0.5B's 98k of 152k); other formats round the rows of
        head_weight() again."""
        self.output_ids = token_ids.to(torch.int64)
        if self.format == "int4-dot8" and len(self.head.parts) == 1 and self.head.bias is None:
            self.head = Linear.from_packed([self.head.parts[0].rows(self.output_ids)])
        else:
            self.head = Linear(self.head_weight()[self.output_ids], None, self.format)

    def rollback(self, length: int) -> None:
        self._caches[0].rollback(length)

    def clear(self) -> None:
        self._caches[0].clear()

    def sequence(self, index: int) -> CausalLM:
        """Sequence `index` (0: this object): a view with a KV cache of its own, on the same weights. Passes of
        several sequences run together through `extend_batch`."""
        if index == 0:
            return self
        if index not in self._sequences:
            while len(self._caches) <= index:
                self._caches.append(self._new_cache())
            self._sequences[index] = NativeSequence(self, index)
        return self._sequences[index]

    def _rows(self, k: int) -> int:
        """Query rows attention computes in a pass of k tokens: k, or the fewest from which it is batch invariant.
        torch's flash attention rounds a block of fewer query rows than that differently, the last block included
        (35 rows: blocks of 32 and 3), so those passes take a row or more besides."""
        least = BATCH_INVARIANT_ROWS.get(self.format, 1)
        if not self.batch_invariant or least == 1:
            return k
        rows = max(k, least)
        while 0 < rows % query_block(rows) < least:
            rows += 1
        return rows

    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        return self.extend_batch([(self, tokens, keep)])[0]

    def prefill(self, tokens: torch.Tensor, keep: int | None = 1) -> torch.Tensor:
        return self.extend_batch([(self, tokens, keep)], [self.prompt_rows(tokens, keep)])[0]

    def prompt_rows(self, tokens: torch.Tensor, keep: int | None) -> int:
        k = tokens.numel()
        rows = k - min(keep or k, k)  # (keep 0 / None: every row's logits are wanted)
        return rows if self.prompt_layers is not None and rows >= PROMPT_LEAST else 0

    @torch.inference_mode()
    def extend_batch(self, parts: list[tuple[CausalLM, torch.Tensor, int | None]],
                     prompt_rows: Sequence[int] | None = None) -> list[torch.Tensor]:
        """One forward pass over several sequences' new tokens: parts [(sequence, tokens [k], keep)], each sequence
        this model or one of its `sequence` views, at most once -> logits [min(keep or k, k), V] per part.
        prompt_rows: per part, how many of its leading rows are prompt rows (`CausalLM.extend_batch`).

        The products run over every part's rows at once and attention over each sequence's own cache, so each row
        is bitwise what the sequence's own pass gives it (on a batch-invariant format): whoever else is served
        beside a request never changes its output. With a prompt path, every part's prompt rows go through it
        first, then the other rows: a sequence's prompt rows come before its others, so every row finds the keys
        and values it attends written."""
        plans = []
        for (sequence, tokens, keep), prompt in zip(parts, prompt_rows or [0] * len(parts), strict=True):
            plan = self._plan(sequence, tokens.view(-1), keep, prompt)
            if any(p.cache is plan.cache for p in plans):
                raise ValueError("a sequence appears twice in one batched pass")
            plans.append(plan)
        early = [[self._forward(self.prompt_layers, [(p, lo, hi)]) for lo, hi in self._pieces(p)]
                 for p in plans]  # (prompt rows: only with a prompt path)
        rest, rest_features = self._forward(self.layers, [(p, p.prompt, p.count) for p in plans])
        x, features = [], []  # each plan's rows [count, D] and features [count, F] (or None)
        for pieces, tail, tail_features in zip(early, rest, rest_features, strict=True):
            x.append(torch.cat([*(xs[0] for xs, _ in pieces), tail]))
            parts = [fs[0] for _, fs in pieces if fs[0] is not None] + [f for f in [tail_features] if f is not None]
            features.append(torch.cat(parts) if parts else None)
        rows = []  # each part's rows whose logits are wanted (padded where the products are not row-stable)
        for p, hidden, feature in zip(plans, x, features, strict=True):
            self.reused_tokens += p.start - p.cache.length
            p.cache.length = p.start + p.k
            del p.cache.ids[p.start:], p.cache.paths[p.start:]
            p.cache.ids += p.tokens[: p.k].tolist()
            p.cache.paths += [True] * p.prompt + [False] * (p.k - p.prompt)
            if feature is not None:
                p.sequence.features = feature[: p.k]  # [k, F]
            wanted = hidden[p.k - p.out: p.k]  # [out, D]
            if self.format not in INVARIANT_PRODUCTS and self._rows(p.out) > p.out:
                wanted = _pad(wanted, self._rows(p.out))
            rows.append(wanted)
        logits = self.head(rmsnorm(torch.cat(rows), self.norm, self.shape.rms_eps)).float()
        if self.output_ids is not None:
            full = logits.new_full((logits.shape[0], self.vocab_size), -torch.inf)
            logits = full.index_copy_(1, self.output_ids, logits)
        out, first = [], 0
        for p, wanted in zip(plans, rows, strict=True):
            out.append(logits[first: first + p.out])  # [out, V]
            first += wanted.shape[0]
        return out

    def _forward(self, layers: list[LlamaLayer], pieces: list[tuple[Plan, int, int]]
                 ) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        """One pass through `layers` of rows lo..hi of each plan's (its tokens[lo:hi], one plan after another) -> per
        piece x [hi - lo, D] and, with `feature_layers`, features [hi - lo, F] (else None)."""
        if not any(hi > lo for _, lo, hi in pieces):
            return [self.embed[:0]] * len(pieces), [None] * len(pieces)
        tokens = torch.cat([p.tokens[lo:hi] for p, lo, hi in pieces])  # [T]
        positions = torch.cat([p.positions[lo:hi] for p, lo, hi in pieces])
        firsts = [0]
        for _, lo, hi in pieces:
            firsts.append(firsts[-1] + hi - lo)
        x = self.embed[tokens][None]  # [1, T, D]
        cos, sin = self.cos[positions][None], self.sin[positions][None]  # [1, T, hd]
        masks = [p.mask if (lo, hi) == (0, p.count) else KeyPositions(p.positions[lo:hi]) for p, lo, hi in pieces]
        if layers is self.layers and self._stack is not None and not self.feature_layers and all(
                isinstance(mask, KeyPositions) and hi <= p.k for (p, _, hi), mask in zip(pieces, masks, strict=True)):
            live = [(p, lo, hi, first) for (p, lo, hi), first in zip(pieces, firsts, strict=False) if hi > lo]
            rows = [(first, hi - lo, p.start + lo) for p, lo, hi, first in live]
            caches = [[p.cache.per_layer[i] for p, *_ in live] for i in range(len(layers))]
            x = self._stack(x[0], self.shape, cos[0], sin[0], rows, caches)[None]
            features = None
        else:
            x, features = run_layers(layers, x, lambda i, layer, x: layer(x, self.shape, cos, sin, [
                Segment(first, hi - lo, p.cache.k[i], p.cache.v[i], p.start + lo, min(hi, p.k) - lo, p.span, mask)
                for (p, lo, hi), first, mask in zip(pieces, firsts, masks, strict=False) if hi > lo]),
                self.feature_layers)
        rows = [slice(a, b) for a, b in itertools.pairwise(firsts)]
        return [x[0, r] for r in rows], [None if features is None else features[0, r] for r in rows]

    @cached_property
    def _stack(self) -> KernelStack | None:
        """The layers in one call of layer.cpp per pass, where each can run there (int4-dot8)."""
        return KernelStack.of(self.layers)

    @staticmethod
    def _pieces(plan: Plan) -> list[tuple[int, int]]:
        """A plan's prompt rows (0 .. prompt) as the prompt path runs them: cut where a cell is a multiple of
        PROMPT_CHUNK -> [(lo, hi)] rows."""
        cuts = [0, *range(-plan.start % PROMPT_CHUNK or PROMPT_CHUNK, plan.prompt, PROMPT_CHUNK), plan.prompt]
        return [(lo, hi) for lo, hi in itertools.pairwise(cuts) if hi > lo]

    def _plan(self, sequence: CausalLM, tokens: torch.Tensor, keep: int | None, prompt: int) -> Plan:
        """Where one sequence's tokens go in a batched pass, and what its rows attend."""
        if sequence is self:
            cache = self._caches[0]
        elif isinstance(sequence, NativeSequence) and sequence.model is self:
            cache = self._caches[sequence.index]
        else:
            raise ValueError("extend_batch takes this model's own sequences (NativeLlama.sequence)")
        k = tokens.numel()
        if k < 1:
            raise ValueError("a batched pass needs at least one token per sequence")
        out = min(keep or k, k)
        prompt = min(prompt, k) if self.prompt_layers is not None else 0
        skip = self._reusable(cache, tokens[: k - out].tolist(), cache.length, prompt)
        tokens, k, prompt = tokens[skip:], k - skip, max(0, prompt - skip)
        start, end = cache.length + skip, cache.length + skip + k
        if end > self.max_length:
            raise ValueError(f"the context window ({self.max_length} tokens) is full")
        rows = self._rows(k)  # query rows attention computes (the last one repeated: see the module docstring)
        positions = torch.arange(start, end)
        count = rows if self.format not in INVARIANT_PRODUCTS else k  # rows the products compute
        if count > k:
            tokens, positions = _pad(tokens, count), _pad(positions, count)
        if self.kernel_attention:  # each row over its own keys, the whole cache handed over as it is
            span, mask = self.max_length, KeyPositions(positions[:k])
        else:
            # Attention spans whole blocks of KEY_BLOCK cache slots (the CPU flash kernel's block): a row then sees
            # the same reduction whatever the pass size, and all-masked blocks change nothing (batch invariance).
            span = min(-(-end // KEY_BLOCK) * KEY_BLOCK, self.max_length) if self.batch_invariant else end
            # One additive causal mask per sequence, shared by every layer: [rows, span], 0 = may attend, -inf not.
            mask = torch.zeros(rows, span, dtype=self.residual_dtype).masked_fill_(
                self.key_positions[:span] > _pad(positions[:k], rows)[:, None], -torch.inf)
        return Plan(sequence, cache, tokens, positions, start, count, k, out, span, mask, prompt)

    def _reusable(self, cache: Cache, tokens: list[int], start: int, prompt: int) -> int:
        """How many of these leading tokens (whose logits are not wanted; the first `prompt` of them prompt rows),
        fed from cell `start`, the cells there already hold (`Cache.ids`: the stale tail too, as a prompt sharing
        its start with the last one finds it), written by the same path (`Cache.paths`): where a row never depends
        on the pass it is in (int4-dot8 always, the padded formats when batch invariant), their cells are bitwise
        what a pass would write. Not with features wanted, which the skipped rows would lack."""
        stable = self.kernel_attention or self.batch_invariant and self.format in BATCH_INVARIANT_ROWS
        if not stable or self.feature_layers:
            return 0
        skip = 0
        for new, held, path in zip(tokens, cache.ids[start:], cache.paths[start:], strict=False):
            if new != held or path != (skip < prompt):
                break
            skip += 1
        if skip < prompt and self.prompt_layers is not None:  # twins' cells in whole pieces only: the rest of a
            # piece is computed with its start
            skip = max(0, (start + skip) // PROMPT_CHUNK * PROMPT_CHUNK - start)
        return skip

    def _prefilled(self, cache: Cache, prompt: Sequence[int]) -> int:
        """`CausalLM.cached` for one of this model's caches."""
        context = list(prompt[:-1])
        return self._reusable(cache, context, 0, len(context) if self.prompt_layers is not None else 0)

    def cached(self, prompt: Sequence[int]) -> int:
        return self._prefilled(self._caches[0], prompt)


@dataclass
class Cache:
    """One sequence's keys and values, [layers, 1, KV, max_length, hd] each, and how many tokens it holds. Rolling
    back is moving `length`: the stale tail stays, and no mask ever lets a row see it. `ids`: the tokens whose keys
    and values the cells hold, from cell 0, the stale tail included, and `paths`: whether the prompt path wrote each
    (what `NativeLlama._reusable` reads)."""

    k: torch.Tensor
    v: torch.Tensor
    length: int = 0
    ids: list[int] = field(default_factory=list)
    paths: list[bool] = field(default_factory=list)

    @cached_property
    def per_layer(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each layer's (k, v) [KV, max_length, hd]: views into k and v, made once (`KernelStack`'s caches)."""
        return [(k[0], v[0]) for k, v in zip(self.k, self.v, strict=True)]

    def rollback(self, length: int) -> None:
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot roll back to {length}: the cache holds {self.length} tokens")
        self.length = length

    def clear(self) -> None:
        """Empty, the stale tail forgotten: nothing is reused after this."""
        self.length = 0
        self.ids.clear()
        self.paths.clear()


@dataclass
class Plan:
    """One sequence's part of a batched pass: `count` rows (its k tokens, then its last one repeated where the
    products need more rows), `out` of which return logits, the first `prompt` on the prompt path."""

    sequence: CausalLM
    cache: Cache
    tokens: torch.Tensor  # [count]
    positions: torch.Tensor  # [count]
    start: int  # the cache cell of its first token
    count: int
    k: int
    out: int
    span: int
    mask: torch.Tensor | KeyPositions
    prompt: int = 0


class NativeSequence(CausalLM):
    """Sequence `index` of a NativeLlama: its own KV cache, the model's weights (`NativeLlama.sequence`)."""

    def __init__(self, model: NativeLlama, index: int):
        self.model, self.index = model, index
        self.name, self.vocab_size, self.max_length = model.name, model.vocab_size, model.max_length
        self.batch_invariant, self.verify_slope = model.batch_invariant, model.verify_slope
        self.features: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return self.model._caches[self.index].length

    @property
    def weight_bytes(self) -> int:
        return self.model.weight_bytes

    def rollback(self, length: int) -> None:
        self.model._caches[self.index].rollback(length)

    def clear(self) -> None:
        self.model._caches[self.index].clear()

    def cached(self, prompt: Sequence[int]) -> int:
        return self.model._prefilled(self.model._caches[self.index], prompt)

    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        return self.model.extend_batch([(self, tokens, keep)])[0]

    def prefill(self, tokens: torch.Tensor, keep: int | None = 1) -> torch.Tensor:
        return self.model.extend_batch([(self, tokens, keep)], [self.model.prompt_rows(tokens, keep)])[0]

    def sequence(self, index: int) -> CausalLM:
        return self.model.sequence(index)

    def extend_batch(self, parts: list[tuple[CausalLM, torch.Tensor, int | None]],
                     prompt_rows: Sequence[int] | None = None) -> list[torch.Tensor]:
        return self.model.extend_batch(parts, prompt_rows)


def _pad(x: torch.Tensor, rows: int) -> torch.Tensor:
    """x [k, ...] with its last row repeated to `rows` rows."""
    return torch.cat([x, x[-1:].expand(rows - x.shape[0], *x.shape[1:])])


def load_native(directory: str | Path, weight_format: str | None = None, max_length: int | None = None,
                name: str | None = None) -> NativeLlama:
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
    return NativeLlama(shape, weights, weight_format, max_length, name or directory.name)
