"""int4-dot8: 4-bit and 6-bit weights against activations rounded to int8 per 32 inputs, in a C++ kernel of ours
(dot8.cpp: AVX-512 VNNI, with AMX-INT8 tiles for 4-bit codes from 8 rows on, or AVX2; built by kernels.py).

    w = code scale + offset per group of inputs: 4-bit codes in groups of 32 (a GGUF file's Q4_K sub-blocks as they
        are), 6-bit codes in groups of 16 (Q6_K's as they are; other types rounded to 64 levels per 16 weights)
    y = x W^T with x read in int8 per 32 inputs (as llama.cpp's Q8_0), or as two int8 halves (a 16-bit reading) for
        the matrices where int8 costs accuracy: the MLP's down projection, whose inputs have the widest range
        (rounded to int8 they moved 43 of 1678 argmaxes of the 1.5B against llama.cpp's, in two halves 13 do:
        docs/real-pair.md); each half's integer dot products summed exactly

Why: torch's int4 kernel computes in floats and re-reads the weights every 4 rows; integer dot products (VNNI's
dpbusd, 64 per instruction) read each weight once for any number of rows, so a verify pass of a few tokens costs
little more than one token's, and a prompt's rows share one read of the weights. Batch invariant at any row count,
and bitwise the same on both paths (see dot8.cpp).
"""

from __future__ import annotations

import math

import torch

from .kernels import ISAS

TILE = 16  # output rows per tile
GROUPS = {4: 32, 6: 16}  # inputs per weight scale, by code bits


class Packed:
    """One weight matrix [N, K] in the kernel's layout (dot8.cpp): w [N / 16, K / group, 256 (4 bits) or 192 (6 bits:
    low 4 bits, then high 2)] uint8, scales [N / 16, K / group, 32] float16 (scaled by a power of two, undone by
    `unscale`)."""

    def __init__(self, codes: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor, bits: int, halves: int = 1):
        """codes [N, K] (0..15 for 4 bits, 0..127 for 6), scale and offset [N, K / group]: w = code scale + offset.
        halves: how many int8 halves of each input the products read (2: a 16-bit reading)."""
        if halves not in (1, 2):
            raise ValueError(f"halves must be 1 or 2, not {halves!r}")
        self.halves = halves
        n, k = codes.shape
        group = GROUPS[bits]
        if k % 32:
            raise ValueError(f"the int4-dot8 format needs a multiple of 32 inputs, not {k}")
        self.bits, self.out_features, self.in_features = bits, n, k
        pad = -n % TILE  # outputs up to whole tiles: zero rows, cut from the result
        if pad:
            codes, scale, offset = (torch.cat([t, t.new_zeros(pad, t.shape[1])]) for t in (codes, scale, offset))
        tiles, groups = (n + pad) // TILE, k // group
        c = codes.to(torch.uint8).view(tiles, TILE, groups, -1, 2, 4)  # [T, lane, G, block, first / second, j]
        nibbles = c & 0x0F
        blocks = nibbles[..., 0, :] | (nibbles[..., 1, :] << 4)  # [T, lane, G, 4 (bits 4) or 2 (bits 6), j]
        if bits == 6:
            high = (c >> 4).view(tiles, TILE, groups, 4, 4)  # [T, lane, G, c, j]: bits 4-5 of code 4c + j
            high = high[..., 0, :] | high[..., 1, :] << 2 | high[..., 2, :] << 4 | high[..., 3, :] << 6
            blocks = torch.cat([blocks, high[..., None, :]], dim=3)
        self.w = blocks.permute(0, 2, 3, 1, 4).reshape(tiles, groups, -1).contiguous()
        both = torch.stack([scale.float(), offset.float()])  # [2, N, G]
        largest = float(both.abs().max())
        exponent = math.floor(math.log2(32768 / largest)) if largest > 0 else 0
        self.unscale = 2.0 ** -exponent
        both = (both * 2.0 ** exponent).view(2, tiles, TILE, groups).permute(1, 3, 0, 2)  # [T, G, 2, 16]
        self.scales = both.reshape(tiles, groups, 32).to(torch.float16).contiguous()

    @property
    def nbytes(self) -> int:
        return self.w.numel() + self.scales.numel() * 2

    def dense(self) -> torch.Tensor:
        """The weights this holds, [N, K] float64, unpacked from the kernel's layout (scales as rounded)."""
        tiles, groups, size = self.w.shape
        c = self.w.view(tiles, groups, size // 64, TILE, 4).permute(0, 3, 1, 2, 4)  # [T, lane, G, block, j]
        nibbles = c[:, :, :, : 4 if self.bits == 4 else 2]
        codes = torch.stack([nibbles & 0x0F, nibbles >> 4], dim=-2)  # [T, lane, G, block, first / second, j]
        if self.bits == 6:  # bits 4-5 of code 4i + j: [T, lane, G, i, j]
            high = torch.stack([(c[:, :, :, 2] >> 2 * i) & 3 for i in range(4)], dim=-2)
            codes = codes.reshape(high.shape) | high << 4
        codes = codes.reshape(tiles * TILE, self.in_features).double()
        both = self.scales.double().view(tiles, groups, 2, TILE).permute(2, 0, 3, 1) * self.unscale  # [2, T, 16, G]
        scale, offset = (t.reshape(tiles * TILE, groups).repeat_interleave(GROUPS[self.bits], 1) for t in both)
        return (codes * scale + offset)[: self.out_features]

    def __call__(self, x: torch.Tensor, isa: str) -> torch.Tensor:
        """x [M, K] -> [M, N] float32."""
        y = torch.ops.specdecode.dot8_mm(x.float().contiguous(), self.w, self.scales, self.bits, self.halves,
                                         self.unscale, ISAS[isa])
        return y if y.shape[1] == self.out_features else y[:, : self.out_features]


def quantize(weight: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """weight [N, K] -> codes [N, K], scale and offset [N, K / group]: each group rounded to 2^bits levels from its
    minimum to its maximum (6 bits use 64 levels)."""
    group, levels = GROUPS[bits], 2 ** bits - 1
    w = weight.float().reshape(weight.shape[0], -1, group)
    low, high = w.amin(dim=-1), w.amax(dim=-1)
    scale = ((high - low) / levels).clamp(min=1e-12)
    codes = torch.round((w - low[..., None]) / scale[..., None]).clamp(0, levels).to(torch.uint8)
    return codes.reshape(weight.shape), scale, low


def reference(x: torch.Tensor, weight: torch.Tensor, halves: int = 1) -> torch.Tensor:
    """What the kernel computes, in float64 (for tests): x [M, K] read as one or two int8 halves per 32 inputs
    (dot8.cpp's quantize, the same float32 steps), times weight [N, K] (`Packed.dense`) -> [M, N]."""
    m, k = x.shape
    groups = x.float().view(m, k // 32, 32)
    amax = groups.abs().amax(dim=-1, keepdim=True)
    inv = torch.where(amax > 0, 127 / amax, torch.zeros_like(amax))
    v = groups * inv
    hi = torch.round(v)
    lo = torch.round((v - hi) * 256).clamp(-127, 127) if halves == 2 else torch.zeros_like(v)
    step = (amax / 127 / 256).double()
    return ((256 * hi.clamp(-127, 127).double() + lo.double()) * step).view(m, k) @ weight.double().T
