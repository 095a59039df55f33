"""int4-dot8: 4-bit and 6-bit weights against activations rounded to int8 per 32 inputs, in a C++ kernel of ours
(dot8.cpp: AVX-512 VNNI, with AMX-INT8 tiles for 4-bit codes from 16 rows on, or AVX2; built by kernels.py).

    w = code scale + offset per group of inputs, the scales in GGUF's K-quant layout (`Blocks`): an 8-bit integer
        per group times a float16 per superblock of 256 inputs. 4-bit codes in groups of 32 (a GGUF file's Q4_K
        sub-blocks as they are), 6-bit codes in groups of 16 (Q6_K's as they are, offset -32 scale); other types
        are rounded to these
    y = x W^T with x read in int8 per 32 inputs (as llama.cpp's Q8_0; llama.cpp's K-quant products read it per 256),
        every matrix alike. (A target's down projections once read x in 16 bits, as two int8 halves; int8 there
        made plain decoding 2-8% and speculative decoding 9-13% faster on an AVX2 EPYC, for a mean KL from the
        file's float32 reading of 0.00062 instead of 0.00033, llama.cpp's being 0.00243: docs/bench/one-half.)

Why: torch's int4 kernel computes in floats and re-reads the weights every 4 rows; integer dot products (VNNI's
dpbusd, 64 per instruction) read each weight once for any number of rows, so a verify pass of a few tokens costs
little more than one token's, and a prompt's rows share one read of the weights. One pass of a 1.5B model reads
its weights once: the K-quant scales cost 0.6 bits a weight (4 bits) and 0.56 (6 bits), where a float16 scale and
offset per group cost 1 and 2. Batch invariant at any row count, and bitwise the same on every path (see dot8.cpp).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .hugepages import on_huge_pages
from .kernels import ISAS

TILE = 16  # output rows per tile
GROUPS = {4: 32, 6: 16}  # inputs per weight scale, by code bits
SUPER = 256  # inputs per superblock (one float16 d, and dmin, per output row): GGUF's K-quants'


@dataclass
class Blocks:
    """A weight matrix [N, K] in GGUF's K-quant layout, as int4-dot8 holds it:

        4 bits (groups of 32): w = code d sc + dmin m      code 0..15, sc 0..255, m -128..127
        6 bits (groups of 16): w = (code - 32) d sc         code 0..63, sc -128..127

    sc and m per group, d and dmin per superblock of 256 inputs (the last one shorter when K is not a multiple of
    256), each a float16 up to a power of two shared by the matrix; every scale d sc and offset dmin m is then exact
    in float32. A Q4_K block is this with dmin negated, a Q6_K block exactly this."""

    codes: torch.Tensor  # [N, K] uint8
    sc: torch.Tensor  # [N, K / group] int16
    d: torch.Tensor  # [N, superblocks] float32
    bits: int
    m: torch.Tensor | None = None  # [N, K / group] int16 (4 bits)
    dmin: torch.Tensor | None = None  # [N, superblocks] float32 (4 bits)

    @property
    def group(self) -> int:
        return GROUPS[self.bits]

    def _wide(self, per_super: torch.Tensor) -> torch.Tensor:
        """[N, superblocks] -> [N, K / group]: each superblock's value for each of its groups."""
        return per_super.repeat_interleave(SUPER // self.group, 1)[:, : self.sc.shape[1]]

    def scale(self) -> torch.Tensor:
        """[N, K / group] float32: d sc (exact)."""
        return self._wide(self.d) * self.sc.float()

    def offset(self) -> torch.Tensor:
        """[N, K / group] float32: dmin m (4 bits) or -32 d sc (6 bits), exact."""
        return self._wide(self.dmin) * self.m.float() if self.bits == 4 else -32 * self.scale()

    def dense(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """[N, K]: code scale + offset, in dtype (float64: exact)."""
        n, k = self.codes.shape
        codes = self.codes.to(dtype).view(n, k // self.group, self.group)
        return (codes * self.scale().to(dtype)[..., None] + self.offset().to(dtype)[..., None]).view(n, k)

    def rows(self, index: torch.Tensor | slice) -> Blocks:
        """These output rows (a permutation, a selection or a slice)."""
        pick = lambda t: None if t is None else t[index]  # noqa: E731
        return Blocks(self.codes[index], self.sc[index], self.d[index], self.bits, pick(self.m), pick(self.dmin))

    @staticmethod
    def cat(blocks: list[Blocks]) -> Blocks:
        """Matrices with the same bits and K stacked along N (a fused projection's part)."""
        if len(blocks) == 1:
            return blocks[0]
        join = lambda name: None if getattr(blocks[0], name) is None else torch.cat(  # noqa: E731
            [getattr(b, name) for b in blocks])
        return Blocks(join("codes"), join("sc"), join("d"), blocks[0].bits, join("m"), join("dmin"))


def _exponent(*tensors: torch.Tensor) -> int:
    """The power of two that puts the largest magnitude among these at 2^15 or just under: float16's range."""
    largest = max(float(t.abs().max()) for t in tensors if t.numel())
    return math.floor(math.log2(32768 / largest)) if largest > 0 else 0


def _half(t: torch.Tensor, exponent: int) -> torch.Tensor:
    """t rounded up to a float16 times 2^-exponent (up: a largest scale over d must not exceed the integers' range)."""
    scaled = t * 2.0**exponent
    h = scaled.half()
    h = torch.where(h.float() < scaled, torch.nextafter(h, torch.full_like(h, torch.inf)), h)
    return h.float() * 2.0**-exponent


def _per_super(per_group: torch.Tensor, bits: int) -> torch.Tensor:
    """[N, G] -> [N, superblocks, groups per superblock], the last superblock padded with zeros."""
    n, g = per_group.shape
    per = SUPER // GROUPS[bits]
    return torch.nn.functional.pad(per_group, (0, -g % per)).view(n, -1, per)


def quantize(weight: torch.Tensor, bits: int) -> Blocks:
    """weight [N, K] -> `Blocks`, every weight within half a step of itself: 4 bits: each group of 32 in 16 levels
    from an offset at or below its minimum (dmin m, m rounded down) up to its maximum; 6 bits: each group of 16 in 63
    levels symmetric about 0 (code 32). d (and dmin) is each superblock's largest scale (and minimum) over the
    integers' range, float16 under one power of two for the matrix (as `Packed` stores them); each group's sc is its
    scale over d rounded up, so the levels as rounded still span the group."""
    group = GROUPS[bits]
    n, k = weight.shape
    if k % 32:
        raise ValueError(f"the int4-dot8 format needs a multiple of 32 inputs, not {k}")
    w = weight.float().reshape(n, -1, group)
    groups, per = w.shape[1], SUPER // group
    wide = lambda d: d.repeat_interleave(per, 1)[:, :groups]  # noqa: E731
    largest = lambda values, limit: _per_super(values.abs(), bits).amax(dim=-1) / limit  # noqa: E731

    def integers(values: torch.Tensor, d: torch.Tensor, limit: int, rounding) -> torch.Tensor:
        return torch.where(wide(d) > 0, rounding(values / wide(d).clamp(min=1e-30)), 0).clamp(-limit, limit)

    if bits == 4:
        low = w.amin(dim=-1)
        dmin = largest(low, 127)
        dmin = _half(dmin, _exponent(dmin) - 1)  # (an exponent of its own first: the offsets set the scales)
        m = integers(low, dmin, 127, torch.floor)
        scale = (w.amax(dim=-1) - wide(dmin) * m) / 15
        d = largest(scale, 255)
        exponent = _exponent(d, dmin) - 1
        d, dmin = _half(d, exponent), _half(dmin, exponent)
        blocks = Blocks(w.new_zeros(n, k, dtype=torch.uint8), integers(scale, d, 255, torch.ceil).to(torch.int16),
                        d, 4, m.to(torch.int16), dmin)
    else:
        scale = w.abs().amax(dim=-1) / 31
        d = largest(scale, 127)
        d = _half(d, _exponent(d) - 1)
        blocks = Blocks(w.new_zeros(n, k, dtype=torch.uint8), integers(scale, d, 127, torch.ceil).to(torch.int16),
                        d, 6)
    step = blocks.scale()[..., None]  # [N, G, 1] as rounded
    codes = torch.round((w - blocks.offset()[..., None]) / step.clamp(min=1e-30)).clamp(0, (1 << bits) - 1)
    blocks.codes = torch.where(step > 0, codes, 0 if bits == 4 else 32).to(torch.uint8).view(n, k)
    return blocks


class Packed:
    """One weight matrix [N, K] in the kernel's layout (dot8.cpp): w [N / 16, K / group, 256 (4 bits) or 192 (6 bits:
    low 4 bits, then high 2)] uint8; sub [N / 16, K / group, 32 (4 bits: the 16 rows' sc, then their m) or 16 (6
    bits: sc)] uint8 (m and 6-bit sc as int8); sup [N / 16, superblocks, 32 (d, then dmin) or 16 (d)] float16, scaled
    by a power of two that `unscale` undoes."""

    def __init__(self, blocks: Blocks):
        self.bits = blocks.bits
        n, k = blocks.codes.shape
        if k % 32:
            raise ValueError(f"the int4-dot8 format needs a multiple of 32 inputs, not {k}")
        self.out_features, self.in_features = n, k
        pad = -n % TILE  # outputs up to whole tiles: zero rows, cut from the result
        if pad:
            blocks = Blocks(*(torch.cat([t, t.new_zeros(pad, t.shape[1])]) if isinstance(t, torch.Tensor) else t
                              for t in (blocks.codes, blocks.sc, blocks.d, blocks.bits, blocks.m, blocks.dmin)))
        bits, tiles, groups = blocks.bits, (n + pad) // TILE, blocks.sc.shape[1]
        c = blocks.codes.to(torch.uint8).view(tiles, TILE, groups, -1, 2, 4)  # [T, lane, G, block, first / second, j]
        nibbles = c & 0x0F
        packed = nibbles[..., 0, :] | (nibbles[..., 1, :] << 4)  # [T, lane, G, 4 (bits 4) or 2 (bits 6), j]
        if bits == 6:
            high = (c >> 4).view(tiles, TILE, groups, 4, 4)  # [T, lane, G, c, j]: bits 4-5 of code 4c + j
            high = high[..., 0, :] | high[..., 1, :] << 2 | high[..., 2, :] << 4 | high[..., 3, :] << 6
            packed = torch.cat([packed, high[..., None, :]], dim=3)
        self.w = packed.permute(0, 2, 3, 1, 4).reshape(tiles, groups, -1).contiguous()
        per_lane = lambda t: t.view(tiles, TILE, -1).transpose(1, 2)  # [N, X] -> [T, X, lane]  # noqa: E731
        sub = [blocks.sc] if bits == 6 else [blocks.sc, blocks.m]
        self.sub = (torch.cat([per_lane(t.to(torch.int16)) for t in sub], dim=2) & 0xFF).to(torch.uint8).contiguous()
        sup = [blocks.d] if bits == 6 else [blocks.d, blocks.dmin]
        exponent = _exponent(*sup)
        self.unscale = 2.0**-exponent
        self.sup = torch.cat([per_lane(t * 2.0**exponent) for t in sup], dim=2).to(torch.float16).contiguous()
        self.w, self.sub, self.sup = (on_huge_pages(t) for t in (self.w, self.sub, self.sup))  # streamed every pass

    @classmethod
    def from_layout(cls, w: torch.Tensor, sub: torch.Tensor, sup: torch.Tensor, bits: int, out_features: int,
                    in_features: int, unscale: float) -> Packed:
        """A matrix already in the kernel's layout (w, sub, sup as the constructor makes them, e.g. saved by
        models/converted.py), copied to huge pages as the constructor does."""
        packed = cls.__new__(cls)
        packed.bits, packed.unscale = bits, unscale
        packed.out_features, packed.in_features = out_features, in_features
        packed.w, packed.sub, packed.sup = (on_huge_pages(t) for t in (w, sub, sup))
        return packed

    @property
    def nbytes(self) -> int:
        return self.w.numel() + self.sub.numel() + self.sup.numel() * 2

    def blocks(self) -> Blocks:
        """The weights this holds, unpacked from the kernel's layout."""
        tiles, groups, size = self.w.shape
        c = self.w.view(tiles, groups, size // 64, TILE, 4).permute(0, 3, 1, 2, 4)  # [T, lane, G, block, j]
        nibbles = c[:, :, :, : 4 if self.bits == 4 else 2]
        codes = torch.stack([nibbles & 0x0F, nibbles >> 4], dim=-2)  # [T, lane, G, block, first / second, j]
        if self.bits == 6:  # bits 4-5 of code 4i + j: [T, lane, G, i, j]
            high = torch.stack([(c[:, :, :, 2] >> 2 * i) & 3 for i in range(4)], dim=-2)
            codes = codes.reshape(high.shape) | high << 4
        n = self.out_features
        codes = codes.reshape(tiles * TILE, self.in_features)[:n]
        rows = lambda t: t.transpose(1, 2).reshape(tiles * TILE, -1)[:n]  # [T, X, lane] -> [N, X]  # noqa: E731
        sub = self.sub.view(torch.int8) if self.bits == 6 else self.sub
        sc = rows(sub[..., :TILE]).to(torch.int16)
        sup = self.sup.float() * self.unscale
        if self.bits == 6:
            return Blocks(codes, sc, rows(sup), 6)
        m = rows(self.sub[..., TILE:].view(torch.int8)).to(torch.int16)
        return Blocks(codes, sc, rows(sup[..., :TILE]), 4, m, rows(sup[..., TILE:]))

    def dense(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """The weights this holds, [N, K] in dtype (float64: exact)."""
        return self.blocks().dense(dtype)

    def rows(self, index: torch.Tensor) -> Packed:
        """Output rows index [n] (any order, repeats allowed) as a matrix [n, K] of their own, not rounded again: each
        row's products are bitwise this matrix's (its integers and float16s are the same; only the power of two
        they are stored under may grow). Only the tiles holding a chosen row are unpacked. A draft's cut head
        (`NativeLlama.restrict_output`)."""
        index = torch.as_tensor(index, dtype=torch.int64).view(-1)
        if index.numel() == 0 or int(index.min()) < 0 or int(index.max()) >= self.out_features:
            raise ValueError(f"rows must be 1 or more of 0 .. {self.out_features - 1}")
        tiles = torch.unique(index // TILE)  # [t] sorted
        chosen = Packed.from_layout(self.w[tiles], self.sub[tiles], self.sup[tiles], self.bits, len(tiles) * TILE,
                                    self.in_features, self.unscale)
        within = torch.searchsorted(tiles, index // TILE) * TILE + index % TILE  # each row's place in chosen
        return Packed(chosen.blocks().rows(within))

    def __call__(self, x: torch.Tensor, isa: str) -> torch.Tensor:
        """x [M, K] -> [M, N] float32."""
        y = torch.ops.specdecode.dot8_mm(x.float().contiguous(), self.w, self.sub, self.sup, self.bits, self.unscale,
                                         ISAS[isa])
        return y if y.shape[1] == self.out_features else y[:, : self.out_features]


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """What the kernel computes, in float64 (for tests): x [M, K] rounded to int8 per 32 inputs (dot8.cpp's
    quantize, the same float32 steps), times weight [N, K] (`Packed.dense`) -> [M, N]."""
    m, k = x.shape
    groups = x.float().view(m, k // 32, 32)
    amax = groups.abs().amax(dim=-1, keepdim=True)
    inv = torch.where(amax > 0, torch.full_like(amax, 127) / amax, 0)  # (127 / amax would round as 127 * (1 / amax))
    v = groups * inv
    q = torch.round(v).clamp(-127, 127)
    step = (amax / 127 / 256).double()
    return ((256 * q.double()) * step).view(m, k) @ weight.double().T
