"""The int4-dot8 kernel (models/dot8.cpp) against its float64 reference, and the claims its format makes: each row
bitwise the same whatever the pass size and thread count, the AVX2 path bitwise equal to the AVX-512 VNNI one, the
packed layout holding exactly the weights it was given (to float16 scales), and the 16-bit reading of the
activations far closer to float than int8 alone."""

import pytest
import torch

from specdecode.cpu import capability
from specdecode.models import dot8
from specdecode.models.kernels import kernel_isa, load_kernels

ISA = kernel_isa(capability())
pytestmark = pytest.mark.skipif(ISA is None, reason="the int4-dot8 kernel needs AVX2 (this CPU has neither path)")
HAS_VNNI = {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= set(capability().flags)
HAS_AMX = capability().amx_int8


@pytest.fixture(scope="module", autouse=True)
def kernel():
    load_kernels()


def packed(n: int, k: int, bits: int, seed: int = 0, halves: int = 1) -> tuple[dot8.Packed, torch.Tensor]:
    torch.manual_seed(seed)
    codes, scale, offset = dot8.quantize(torch.randn(n, k) * 0.02, bits)
    return (dot8.Packed(codes, scale, offset, bits, halves),
            codes.double() * _wide(scale, bits) + _wide(offset, bits))


def _wide(t: torch.Tensor, bits: int) -> torch.Tensor:
    return t.double().repeat_interleave(dot8.GROUPS[bits], 1)


@pytest.mark.parametrize("bits", [4, 6])
def test_the_layout_holds_the_weights_it_was_given(bits):
    """Unpacked again, the codes come back exactly and the scales to float16's rounding (2^-11 relative), for a
    number of outputs that is not a whole number of tiles."""
    p, weight = packed(40, 96, bits)
    assert p.dense().shape == weight.shape == (40, 96)
    assert (p.dense() - weight).abs().max() <= 2 ** -11 * weight.abs().max() * 2


BOUND = 1e-5  # of the largest output: float32 rounding of the kernel's per-group float steps


@pytest.mark.parametrize("halves", [1, 2])
@pytest.mark.parametrize("bits", [4, 6])
@pytest.mark.parametrize("rows", [1, 3, 16, 17, 40])
def test_the_kernel_computes_its_reference(bits, halves, rows):
    """Against dot8.reference (the same reading of the activations, in float64): float32 rounding only. The
    reference itself is checked against plain float products below."""
    p, _ = packed(48, 160, bits, seed=rows, halves=halves)
    x = torch.randn(rows, 160) * torch.rand(1, 160) ** 2  # uneven magnitudes, as in a residual stream
    expected = dot8.reference(x, p.dense(), halves)
    got = p(x, ISA).double()
    assert got.shape == (rows, 48)
    assert (got - expected).abs().max() <= BOUND * expected.abs().max()


@pytest.mark.parametrize("halves", [1, 2])
def test_the_other_reading_of_the_activations_fails_the_reference_bound(halves):
    """Negative control: against the reference with the other number of halves the kernel misses the bound by
    orders of magnitude, so the bound would catch a kernel that dropped (or added) the second half."""
    p, _ = packed(48, 160, 4, halves=halves)
    x = torch.randn(5, 160)
    other = dot8.reference(x, p.dense(), 3 - halves)
    assert (p(x, ISA).double() - other).abs().max() > 100 * BOUND * other.abs().max()


def test_the_16_bit_reading_of_the_activations_is_close_to_float():
    """Two int8 halves per 32 inputs: relative error ~1e-5 of the product, where int8 alone gives ~1e-2."""
    p, _ = packed(64, 512, 4)
    x = torch.randn(4, 512) * torch.rand(1, 512) ** 3
    exact = x.double() @ p.dense().T
    error = lambda halves: ((dot8.reference(x, p.dense(), halves) - exact).norm() / exact.norm()).item()  # noqa: E731
    assert error(2) < 1e-4 < 1e-3 < error(1)


@pytest.mark.parametrize("halves", [1, 2])
@pytest.mark.parametrize("bits", [4, 6])
def test_each_row_is_bitwise_the_same_in_any_pass(bits, halves):
    """Batch invariance: a row computed alone, among 3, or in a pass of 21 (two chunks of rows), and on 1 or 2
    threads, is bitwise the same."""
    p, _ = packed(64, 256, bits, halves=halves)
    x = torch.randn(21, 256)
    full = p(x, ISA)
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for i in (0, 7, 16, 20):
                assert torch.equal(p(x[i: i + 1], ISA)[0], full[i])
            assert torch.equal(p(x[5:8], ISA), full[5:8])
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(not HAS_VNNI, reason="this CPU has no AVX-512 VNNI path to compare with AVX2")
@pytest.mark.parametrize("halves", [1, 2])
@pytest.mark.parametrize("bits", [4, 6])
def test_the_avx2_path_equals_the_avx512_path_bitwise(bits, halves):
    p, _ = packed(80, 320, bits, halves=halves)
    x = torch.randn(19, 320)
    assert torch.equal(p(x, "avx2"), p(x, "avx512-vnni"))


@pytest.mark.skipif(not HAS_AMX, reason="this CPU has no AMX-INT8 tiles (or Linux refused them) to compare with VNNI")
@pytest.mark.parametrize("halves", [1, 2])
@pytest.mark.parametrize("bits", [4, 6])
def test_the_amx_path_equals_the_vnni_path_bitwise(bits, halves):
    """40 rows: two chunks of 16 and one of 8 on the tiles; 7 and 3 rows: below AMX_ROWS, on VNNI in both."""
    p, _ = packed(80, 320, bits, halves=halves)
    for rows in (40, 17, 7, 3):
        x = torch.randn(rows, 320) * torch.rand(1, 320) ** 2
        assert torch.equal(p(x, "amx"), p(x, "avx512-vnni")), rows


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="multiple of 32 inputs"):
        dot8.Packed(torch.zeros(16, 48, dtype=torch.uint8), torch.ones(16, 3), torch.zeros(16, 3), 6)
    p, _ = packed(16, 64, 4)
    with pytest.raises(RuntimeError, match="K does not match"):
        p(torch.randn(2, 96), ISA)
