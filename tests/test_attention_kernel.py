"""Our attention kernel (models/attention.cpp) against torch's attention in float64, each row bitwise the same
whatever the pass around it, and the engine's int4-dot8 passes using it stay batch invariant."""

import math

import pytest
import torch
import torch.nn.functional as F

from specdecode.cpu import capability
from specdecode.models.kernels import kernel_isa, load_kernels

pytestmark = pytest.mark.skipif(kernel_isa(capability()) is None, reason="our kernels need AVX2 (this CPU lacks it)")


@pytest.fixture(scope="module", autouse=True)
def kernels():
    load_kernels()


def cache(kv: int, slots: int, hd: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    return torch.randn(kv, slots, hd) * 2, torch.randn(kv, slots, hd)


@pytest.mark.parametrize(("heads", "kv", "hd"), [(12, 2, 128), (4, 4, 8), (14, 2, 64)])
def test_attention_equals_torchs_within_float32_rounding(heads, kv, hd):
    """Grouped-query heads, rows at scattered positions (each over slots 0..position), against the same attention in
    float64 by torch: within 1e-5 (float32 and the polynomial e^x, ~1e-7 relative each)."""
    keys, values = cache(kv, 300, hd)
    positions = torch.tensor([0, 5, 63, 64, 199, 299])
    q = torch.randn(heads, len(positions), hd) * 2
    got = torch.ops.specdecode.attend(q, keys, values, positions)
    mask = torch.where(torch.arange(300)[None] <= positions[:, None], 0.0, -math.inf).double()
    expected = F.scaled_dot_product_attention(q.double()[None], keys.double()[None], values.double()[None],
                                              attn_mask=mask, enable_gqa=True)[0]
    assert (got.double() - expected).abs().max() < 1e-5


def test_a_row_is_bitwise_the_same_alone_in_a_pass_and_beside_a_longer_cache():
    keys, values = cache(2, 600, 128)
    q = torch.randn(12, 5, 128)
    positions = torch.tensor([100, 101, 102, 103, 104])
    together = torch.ops.specdecode.attend(q, keys, values, positions)
    for r in range(5):
        alone = torch.ops.specdecode.attend(q[:, r: r + 1].contiguous(), keys[:, :300].contiguous(),
                                            values[:, :300].contiguous(), positions[r: r + 1])
        assert torch.equal(alone[:, 0], together[:, r])
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(torch.ops.specdecode.attend(q, keys, values, positions), together)
    finally:
        torch.set_num_threads(before)


def test_the_keys_past_a_rows_position_are_never_read():
    """Negative control of the mask: changing a slot after every row's position changes nothing, changing one at or
    before it changes the output."""
    keys, values = cache(2, 64, 16)
    q = torch.randn(4, 2, 16)
    positions = torch.tensor([10, 20])
    before = torch.ops.specdecode.attend(q, keys, values, positions)
    keys[:, 21:] = 1e6
    assert torch.equal(torch.ops.specdecode.attend(q, keys, values, positions), before)
    keys[:, 20] = 3.0
    after = torch.ops.specdecode.attend(q, keys, values, positions)
    assert torch.equal(after[:, 0], before[:, 0]) and not torch.equal(after[:, 1], before[:, 1])


def test_bad_input_is_a_clear_error():
    keys, values = cache(2, 8, 16)
    with pytest.raises(RuntimeError, match="outside the cache"):
        torch.ops.specdecode.attend(torch.randn(4, 1, 16), keys, values, torch.tensor([8]))
    with pytest.raises(RuntimeError, match="head sizes"):
        torch.ops.specdecode.attend(torch.randn(3, 1, 16), keys, values, torch.tensor([1]))
