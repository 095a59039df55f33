"""y = x W^T (+ b) in each weight format the native engine offers, and the rule that picks one for this CPU.

    format        weights                     activations   kernel                                  needs
    bf16-onednn   bf16, prepacked once        bf16          oneDNN (`mkldnn._linear_pointwise`)     native bf16
    bf16          bf16                        bf16          F.linear (emulated without native bf16) -
    fp32          fp32                        fp32          F.linear (MKL / oneDNN sgemm)           -
    int8          int8 per output row + scale bf16          `aten._weight_int8pack_mm`              -
    int4          4-bit codes, scale + zero      bf16          `aten._weight_int4pack_mm_for_cpu`      -
                  per group of 32 inputs (bf16)
    int4-dot8     4-bit codes per 32 inputs or   int8 per 32   our C++ kernel (dot8.py, dot8.cpp):     AVX2
                  6-bit per 16, 8-bit scales     inputs        integer dot products, AVX-512 VNNI / AVX2
                  per group x float16 per 256

Numerics: bf16 and fp32 hold the checkpoint's weights rounded to that dtype; int8 rounds each weight row to 255
levels of its largest magnitude (a slightly different model: its logits differ from the fp32 ones by about 1e-1,
so its greedy text may differ from the other formats'; it is exact with respect to itself like any target).
int4 holds w = (code - 8) scale + zero per group of GROUP inputs: a GGUF file's Q4_K sub-blocks map onto it as they
are (`Linear.from_int4`, models/gguf_weights.py), other weights are rounded to 16 levels between each group's
minimum and maximum. int4-dot8 holds a GGUF file's Q4_K and Q6_K blocks as they are, scales included
(`Linear.from_blocks`, `dot8.Blocks`), other weights rounded to them, and rounds each pass's inputs to int8 per 32,
as llama.cpp does for its own products.
Batch invariance (row i of a k-row pass bitwise equal to the same row computed alone): the linears of int8 are
invariant at any row count on the CPUs measured, bf16-onednn's up to 32 rows (an AMX Xeon's oneDNN changes kernels
past that, so its products run in slices of at most 32 rows), but torch's CPU flash attention switches kernels at 4
query rows on an AVX-512 BF16 EPYC (a 2-row pass sufficed on a Xeon), so the engine runs every pass of these
formats as at least 4 rows; 4-row passes cost no more than 1-row passes there (23 vs 26 ms). fp32 and plain bf16
are not invariant. `tests/test_native.py` checks each claim on the running CPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..cpu import Capability, capability
from .dot8 import Blocks, Packed, quantize
from .kernels import KernelUnavailable, kernel_isa, load_kernels

FORMATS = ("bf16-onednn", "bf16", "fp32", "int8", "int4", "int4-dot8")
# Fewest rows from which a pass is bitwise stable (attention's, for the formats in INVARIANT_PRODUCTS; int4-dot8's
# attention is our kernel's, stable at any row count).
BATCH_INVARIANT_ROWS = {"bf16-onednn": 4, "int8": 4, "int4": 4, "int4-dot8": 1}
# oneDNN's bf16 product on an AMX Xeon (2026-12-01) switches kernels past 32 rows (rows of a 33-row product differ
# from the same rows alone; at 1..32 rows and on the AVX-512 EPYC at any count they do not): a bf16-onednn product
# runs in slices of at most this many rows.
ONEDNN_ROWS = 32
INVARIANT_PRODUCTS = ("int4", "int4-dot8")  # formats whose products are bitwise row-stable at any row count
GROUP = 32  # int4: inputs sharing one scale and zero (Q4_K's sub-block)
FLOAT32_FORMATS = ("int4", "int4-dot8")  # GGUF formats: biases, residual stream, keys and values in float32


class UnavailableFormat(ValueError):
    """The weight format needs a CPU feature this machine lacks."""


def activation_dtype(fmt: str) -> torch.dtype:
    # int8's kernel is vectorised for bf16 inputs only; int4-dot8's rounds float32 inputs to int8 itself.
    return torch.float32 if fmt in ("fp32", "int4-dot8") else torch.bfloat16


def _bias_dtype(fmt: str) -> torch.dtype:
    """int4 adds its bias in float32 (the product comes out in bf16): Qwen2's large key biases keep their bits."""
    return torch.float32 if fmt in FLOAT32_FORMATS else activation_dtype(fmt)


def check_format(fmt: str, cpu: Capability) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown weight format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt == "bf16-onednn" and not cpu.bf16_matmul:
        raise UnavailableFormat(f"the bf16-onednn weight format needs native bf16 matmuls, which this CPU lacks "
                                f"({cpu.isa} kernels)")
    if fmt == "int4-dot8":
        if kernel_isa(cpu) is None:
            raise UnavailableFormat("the int4-dot8 weight format needs AVX2 (with FMA and F16C), which this CPU lacks")
        try:
            load_kernels()
        except KernelUnavailable as error:
            raise UnavailableFormat(str(error)) from None


def best_format(cpu: Capability) -> str:
    """bf16-onednn where the CPU has native bf16 matmuls (AVX-512 BF16, AMX, AVX-NE-CONVERT): measured fastest and
    batch invariant there. Elsewhere int8: the fastest batch-invariant format measured on AVX2 (twice fp32's speed;
    emulated bf16 is faster for one row but grows linearly with the rows and is not invariant), so greedy speculation
    still equals plain decoding and a verify pass of 4 tokens costs what one does (docs/engines.md)."""
    return "bf16-onednn" if cpu.bf16_matmul else "int8"


def prompt_format(fmt: str, cpu: Capability) -> str | None:
    """The weight format of a prompt path (`NativeLlama.add_prompt_path`) for a model in fmt, or None for none:
    bf16-onednn for int4-dot8 where the CPU has AMX-BF16, whose tiles take a bf16 product's inputs whole where
    int4-dot8 scales each group of 32 apart (on a 2-core AMX Xeon, 3.1 ms a prompt row of the 1.5B from 128 rows
    against 8.5, about even at 32: docs/bench/prompt-path). Elsewhere none: int4-dot8 computes a prompt's rows as
    it does the others."""
    return "bf16-onednn" if fmt == "int4-dot8" and cpu.amx_bf16 else None


def format_for(dtype: str, cpu: Capability) -> str:
    """The weight format a user's dtype asks for: auto -> `best_format`; bfloat16 -> bf16-onednn where the CPU has
    native bf16 matmuls, else bf16; float32 -> fp32; int8 -> int8."""
    formats = {"auto": best_format(cpu), "bfloat16": "bf16-onednn" if cpu.bf16_matmul else "bf16",
               "float32": "fp32", "int8": "int8", "int4": "int4", "int4-dot8": "int4-dot8"}
    if dtype not in formats:
        raise ValueError(f"unknown dtype {dtype!r}: choose one of {', '.join(formats)}")
    return formats[dtype]


class Linear:
    """One weight matrix [N, K] (and bias [N]) held in a format; call it on x [rows, K] -> [rows, N]."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, fmt: str):
        self.format, self.out_features = fmt, weight.shape[0]
        dtype = self.weight_dtype = activation_dtype(fmt)
        self.bias = bias.to(_bias_dtype(fmt)).contiguous() if bias is not None else None
        if fmt == "int8":
            w = weight.float()
            scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-12).to(dtype)  # [N]
            self.weight = torch.round(w / scale.float()[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
            self.scale = scale
        elif fmt == "int4":
            self._pack_int4(*quantize_int4(weight))
        elif fmt == "int4-dot8":
            self._pack_dot8([quantize(weight, 4)])
        elif fmt == "bf16-onednn":
            self.weight = torch.ops.mkldnn._reorder_linear_weight(weight.to(dtype).contiguous())
        else:
            self.weight = weight.to(dtype).contiguous()

    @classmethod
    def from_int4(cls, codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor,
                  bias: torch.Tensor | None = None) -> Linear:
        """An int4 Linear from codes [N, K] (0..15), scale and zero [N, K / GROUP]: w = (code - 8) scale + zero."""
        linear = cls.__new__(cls)
        linear.format, linear.out_features, linear.weight_dtype = "int4", codes.shape[0], torch.bfloat16
        linear.bias = bias.to(_bias_dtype("int4")).contiguous() if bias is not None else None
        linear._pack_int4(codes, scale, zero)
        return linear

    @classmethod
    def from_blocks(cls, parts: list[Blocks], bias: torch.Tensor | None = None) -> Linear:
        """An int4-dot8 Linear from parts stacked along N (`dot8.Blocks`, packed as they are); fused projections
        whose matrices differ in bits keep one part each."""
        return cls.from_packed([Packed(part) for part in parts], bias)

    @classmethod
    def from_packed(cls, parts: list[Packed], bias: torch.Tensor | None = None) -> Linear:
        """An int4-dot8 Linear from parts already packed (`dot8.Packed`), stacked along N."""
        linear = cls.__new__(cls)
        linear.format, linear.weight_dtype = "int4-dot8", torch.float32
        linear.out_features = sum(part.out_features for part in parts)
        linear.bias = bias.to(_bias_dtype("int4-dot8")).contiguous() if bias is not None else None
        linear.parts, linear.isa = parts, kernel_isa(capability())
        return linear

    def _pack_dot8(self, parts: list[Blocks]) -> None:
        self.parts = [Packed(part) for part in parts]
        self.isa = kernel_isa(capability())

    def dot8_parts(self) -> tuple[list[torch.Tensor], list[int], list[float]] | None:
        """An int4-dot8 Linear as layer.cpp takes it: each part's w, sub and sup one after another, each part's
        bits and unscale; None for other formats or a part not in whole tiles of 16 outputs."""
        if self.format != "int4-dot8" or any(part.out_features % 16 for part in self.parts):
            return None
        return ([t for part in self.parts for t in (part.w, part.sub, part.sup)], [part.bits for part in self.parts],
                [part.unscale for part in self.parts])

    def _pack_int4(self, codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> None:
        if codes.shape[1] % GROUP:
            raise ValueError(f"int4 needs inputs in groups of {GROUP}, not {codes.shape[1]}")
        self.weight = torch._convert_weight_to_int4pack_for_cpu(codes.to(torch.int32).contiguous(), 1)
        self.scale = torch.stack([scale.T, zero.T], dim=-1).to(torch.bfloat16).contiguous()  # [K / GROUP, N, 2]

    @property
    def nbytes(self) -> int:
        """Bytes one product reads."""
        bias = self.bias.numel() * self.bias.element_size() if self.bias is not None else 0
        if self.format == "int4-dot8":
            return sum(part.nbytes for part in self.parts) + bias
        extra = self.scale.numel() * self.scale.element_size() if self.format in ("int8", "int4") else 0
        return self.weight.numel() * self.weight.element_size() + extra + bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x [M, K] -> [M, N]."""
        if x.dtype != self.weight_dtype:  # a float32 residual stream (int4 models) enters in the kernel's dtype
            x = x.to(self.weight_dtype)
        if self.format == "bf16-onednn":  # in passes of at most ONEDNN_ROWS rows: bitwise the same at any count
            flat = x.reshape(-1, x.shape[-1])
            slices = [torch.ops.mkldnn._linear_pointwise(flat[i:i + ONEDNN_ROWS], self.weight, self.bias, "none",
                                                         [], "") for i in range(0, flat.shape[0], ONEDNN_ROWS)]
            y = slices[0] if len(slices) == 1 else torch.cat(slices)
            return y.reshape(*x.shape[:-1], y.shape[-1])
        if self.format == "int8":
            y = torch.ops.aten._weight_int8pack_mm(x, self.weight, self.scale)
            return y + self.bias if self.bias is not None else y
        if self.format == "int4-dot8":
            return self._dot8(x)
        if self.format == "int4":
            y = torch._weight_int4pack_mm_for_cpu(x, self.weight, GROUP, self.scale)
            return y + self.bias if self.bias is not None else y
        return F.linear(x, self.weight, self.bias)

    def _dot8(self, x: torch.Tensor) -> torch.Tensor:
        parts = [part(x, self.isa) for part in self.parts]
        y = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return y + self.bias if self.bias is not None else y


class Twin:
    """A second copy of an int4-dot8 matrix for a prompt path (`NativeLlama.add_prompt_path`): the same weights
    (`Packed.dense` in float32, rounded to the twin's format) in a format whose products cost less a row over many
    rows, such as bf16-onednn on AMX-BF16, where int4-dot8 scales every group of 32 inputs apart. Float32 in and
    out, the bias added in float32 after the product (Qwen2's key biases keep their bits), as the int4-dot8 path
    does. One product over all the rows it is given, however many: oneDNN's kernels, and so a row's bits, change
    with the row count (at 33 rows, and beyond in ways that differ by shape), so the caller fixes which rows go
    together (`NativeLlama`: pieces of a prompt fixed by their positions)."""

    def __init__(self, linear: Linear, fmt: str):
        if linear.format != "int4-dot8":
            raise ValueError(f"a prompt path twins int4-dot8 matrices, not {linear.format}")
        self.linear = Linear(torch.cat([part.dense(torch.float32) for part in linear.parts]), None, fmt)
        self.format, self.out_features, self.bias = fmt, linear.out_features, linear.bias

    @property
    def nbytes(self) -> int:
        return self.linear.nbytes

    def dot8_parts(self) -> None:
        return None  # (a layer of twins runs llama.py's steps, not layer.cpp)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x [M, K] -> [M, N] float32."""
        if self.format == "bf16-onednn":  # (Linear's own call cuts the rows into slices of ONEDNN_ROWS)
            y = torch.ops.mkldnn._linear_pointwise(x.to(torch.bfloat16), self.linear.weight, None, "none", [], "")
        else:
            y = self.linear(x)
        y = y.float()
        return y + self.bias if self.bias is not None else y


def quantize_int4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """weight [N, K] -> codes [N, K] (0..15), scale, zero [N, K / GROUP]: each group rounded to 16 levels from its
    minimum to its maximum (w ~ (code - 8) scale + zero)."""
    w = weight.float().reshape(weight.shape[0], -1, GROUP)  # [N, K / GROUP, GROUP]
    low, high = w.amin(dim=-1), w.amax(dim=-1)
    scale = ((high - low) / 15).clamp(min=1e-12)
    codes = torch.round((w - low[..., None]) / scale[..., None]).clamp(0, 15).to(torch.uint8)
    return codes.reshape(weight.shape), scale, low + 8 * scale
