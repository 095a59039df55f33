"""The int4-dot8 kernel (models/dot8.cpp) against its float64 reference, and the claims its format makes: each row
bitwise the same whatever the pass size and thread count, the AVX2 path bitwise equal to the AVX-512 VNNI one, the
packed layout holding exactly the blocks it was given, and the rounding of other weights to them."""

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


def packed(n: int, k: int, bits: int, seed: int = 0) -> tuple[dot8.Packed, torch.Tensor]:
    torch.manual_seed(seed)
    weight = torch.randn(n, k) * 0.02
    return dot8.Packed(dot8.quantize(weight, bits)), weight


def random_blocks(n: int, k: int, bits: int, seed: int = 0) -> dot8.Blocks:
    """Blocks as a GGUF file could hold them: every integer in its range, float16 d (and dmin) of a few magnitudes."""
    g = torch.Generator().manual_seed(seed)
    groups, supers = k // dot8.GROUPS[bits], -(-k // dot8.SUPER)
    ints = lambda low, high, cols: torch.randint(low, high + 1, (n, cols), generator=g, dtype=torch.int16)  # noqa: E731
    half = lambda: (torch.rand(n, supers, generator=g) * 10.0 ** torch.randint(-6, -2, (n, supers), generator=g)  # noqa: E731
                    ).half().float()
    codes = ints(0, (1 << bits) - 1, k).to(torch.uint8)
    if bits == 4:
        return dot8.Blocks(codes, ints(0, 255, groups), half(), 4, ints(-128, 127, groups), -half())
    return dot8.Blocks(codes, ints(-128, 127, groups), half(), 6)


@pytest.mark.parametrize("k", [96, 256, 896])
@pytest.mark.parametrize("bits", [4, 6])
def test_the_layout_holds_exactly_the_blocks_it_was_given(bits, k):
    """Unpacked again, codes, integers and float16s come back exactly (K with a shorter last superblock, 40 outputs:
    not a whole number of tiles), and so do the weights they make."""
    blocks = random_blocks(40, k, bits)
    back = dot8.Packed(blocks).blocks()
    for name in ("codes", "sc", "d", "m", "dmin"):
        mine, theirs = getattr(back, name), getattr(blocks, name)
        assert (mine is None and theirs is None) or torch.equal(mine, theirs), name
    assert torch.equal(dot8.Packed(blocks).dense(), blocks.dense())


@pytest.mark.parametrize("bits", [4, 6])
def test_other_weights_round_to_blocks_within_half_a_step(bits):
    """Each weight within half of its group's step (as rounded) of itself, the step above the exact one by less
    than the superblock's d (sc is rounded up, so the levels still span the group), with uneven magnitudes along K
    and a shorter last superblock (896 inputs)."""
    torch.manual_seed(1)
    weight = torch.randn(40, 896) * 0.02 * torch.rand(1, 896) ** 2
    blocks = dot8.quantize(weight, bits)
    group = dot8.GROUPS[bits]
    step = blocks.scale().double()
    error = (blocks.dense() - weight.double()).abs().view(40, -1, group).amax(-1)
    assert (error <= step / 2 * (1 + 1e-6)).all()
    w = weight.double().view(40, -1, group)
    needed = (w.amax(-1) - blocks.offset().double()) / 15 if bits == 4 else w.abs().amax(-1) / 31
    assert (step >= needed * (1 - 1e-6)).all() and (step - needed <= blocks._wide(blocks.d).double()).all()
    if bits == 4:
        assert (blocks.offset() <= w.amin(-1)).all()


BOUND = 1e-6  # of the largest output: float32 rounding of the kernel's per-group float steps


@pytest.mark.parametrize("bits", [4, 6])
@pytest.mark.parametrize("rows", [1, 2, 3, 16, 17, 18, 40])  # (1 and 2 rows: tiles of their own)
def test_the_kernel_computes_its_reference(bits, rows):
    """Against dot8.reference (the same reading of the activations, in float64): float32 rounding only. The
    reference itself is checked against plain float products below."""
    p, _ = packed(48, 160, bits, seed=rows)
    x = torch.randn(rows, 160) * torch.rand(1, 160) ** 2  # uneven magnitudes, as in a residual stream
    expected = dot8.reference(x, p.dense())
    got = p(x, ISA).double()
    assert got.shape == (rows, 48)
    assert (got - expected).abs().max() <= BOUND * expected.abs().max()


@pytest.mark.parametrize("bits", [4, 6])
def test_several_superblocks_and_a_shorter_last_one(bits):
    """K = 896: three superblocks of 256 inputs and one of 128, each with its own d (and dmin), against inputs whose
    magnitudes differ by orders from one group of 32 to the next."""
    p = dot8.Packed(random_blocks(48, 896, bits, seed=3))
    x = torch.randn(5, 896) * 10.0 ** torch.randint(-3, 2, (1, 896 // 32)).repeat_interleave(32, 1)
    expected = dot8.reference(x, p.dense())
    assert (p(x, ISA).double() - expected).abs().max() <= BOUND * expected.abs().max()


@pytest.mark.parametrize("bits", [4, 6])
def test_the_largest_integers_do_not_overflow(bits):
    """Every code, sub-scale and offset at the end of its range, and activations at the largest int8: the kernel's
    int16 pair sums and int32 dots hold them exactly (summing one more pair in int16 fails this test)."""
    n, k = 32, 512
    codes = torch.full((n, k), (1 << bits) - 1, dtype=torch.uint8)
    full = lambda value, cols: torch.full((n, cols), value, dtype=torch.int16)  # noqa: E731
    ones = torch.ones(n, k // dot8.SUPER)
    for sign in (1, -1):  # the offsets (4 bits) and 6-bit sub-scales at either end
        if bits == 4:
            blocks = dot8.Blocks(codes, full(255, k // 32), ones, 4, full(127 if sign > 0 else -128, k // 32), ones)
        else:
            blocks = dot8.Blocks(codes, full(127 if sign > 0 else -128, k // 16), ones, 6)
        p = dot8.Packed(blocks)
        x = torch.full((2, k), 126 + 127 / 256) * sign
        x[:, ::64] = 127 * sign  # where a group's largest is 127, the others round to 127 too
        expected = dot8.reference(x, p.dense())
        assert (p(x, ISA).double() - expected).abs().max() <= BOUND * expected.abs().max()


def test_another_reading_of_the_activations_fails_the_reference_bound():
    """Negative control: against the product of x unrounded the kernel misses the bound by orders of magnitude (its
    int8 reading is off by ~1e-2 of the product), so the bound would catch a kernel that read x otherwise."""
    p, _ = packed(64, 512, 4)
    x = torch.randn(4, 512) * torch.rand(1, 512) ** 3
    exact = x.double() @ p.dense().T
    error = ((dot8.reference(x, p.dense()) - exact).norm() / exact.norm()).item()
    assert 1e-3 < error < 5e-2
    assert (p(x, ISA).double() - exact).abs().max() > 100 * BOUND * exact.abs().max()


@pytest.mark.parametrize("bits", [4, 6])
def test_each_row_is_bitwise_the_same_in_any_pass(bits):
    """Batch invariance: a row computed alone, among 2 or 3, or in a pass of 21 (two chunks of rows), and on 1 or 2
    threads, is bitwise the same (1 and 2 rows run tiles compiled for their count)."""
    p, _ = packed(64, 256, bits)
    x = torch.randn(21, 256)
    full = p(x, ISA)
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for i in (0, 7, 16, 20):
                assert torch.equal(p(x[i: i + 1], ISA)[0], full[i])
            assert torch.equal(p(x[5:8], ISA), full[5:8])
            assert torch.equal(p(x[9:11], ISA), full[9:11])
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("bits", [4, 6])
def test_chosen_rows_keep_their_blocks_and_products_bitwise(bits):
    """A cut head (`Packed.rows`): rows in any order, with repeats and from a last partial tile, hold the same
    integers and float16s, and their products are bitwise the whole matrix's, although the chosen rows' largest
    scale is smaller (so the power of two they are stored under grows)."""
    blocks = random_blocks(72, 320, bits)  # 4 whole tiles and half of one
    blocks.d[:16] *= 64  # the largest scales sit in the first tile, which the chosen rows leave out
    whole = dot8.Packed(blocks)
    index = torch.tensor([70, 17, 16, 33, 33, 71, 40, 20])
    chosen = whole.rows(index)
    assert chosen.unscale < whole.unscale and chosen.out_features == len(index)
    back, picked = chosen.blocks(), blocks.rows(index)
    for name in ("codes", "sc", "d", "m", "dmin"):
        mine, theirs = getattr(back, name), getattr(picked, name)
        assert (mine is None and theirs is None) or torch.equal(mine, theirs), name
    x = torch.randn(5, 320)
    assert torch.equal(chosen(x, ISA), whole(x, ISA)[:, index])
    for bad in (torch.tensor([72]), torch.tensor([-1]), torch.tensor([], dtype=torch.int64)):
        with pytest.raises(ValueError, match="rows must be"):
            whole.rows(bad)


@pytest.mark.skipif(not HAS_VNNI, reason="this CPU has no AVX-512 VNNI path to compare with AVX2")
@pytest.mark.parametrize("bits", [4, 6])
def test_the_avx2_path_equals_the_avx512_path_bitwise(bits):
    """19 rows on the general loops; 2 and 1 on the tiles compiled for their count, on both paths."""
    p, _ = packed(80, 320, bits)
    for rows in (19, 2, 1):
        x = torch.randn(rows, 320) * torch.rand(1, 320) ** 2
        assert torch.equal(p(x, "avx2"), p(x, "avx512-vnni")), rows


@pytest.mark.skipif(not HAS_AMX, reason="this CPU has no AMX-INT8 tiles (or Linux refused them) to compare with VNNI")
@pytest.mark.parametrize("bits", [4, 6])
def test_the_amx_path_equals_the_vnni_path_bitwise(bits):
    """40 rows: two chunks of 16 on the tiles and one of 8 on VNNI; 17 rows: 16 and 1; 7 and 3 rows: below AMX_ROWS,
    on VNNI in both."""
    p, _ = packed(80, 320, bits)
    for rows in (40, 17, 7, 3):
        x = torch.randn(rows, 320) * torch.rand(1, 320) ** 2
        assert torch.equal(p(x, "amx"), p(x, "avx512-vnni")), rows


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="multiple of 32 inputs"):
        dot8.quantize(torch.zeros(16, 48), 6)
    p, _ = packed(16, 64, 4)
    with pytest.raises(RuntimeError, match="K does not match"):
        p(torch.randn(2, 96), ISA)


@pytest.mark.same_on_every_cpu
def test_a_background_build_is_waited_for_once_and_its_error_kept(monkeypatch):
    """`build_in_background` compiles in a thread while a first run downloads; `load_kernels` called meanwhile waits
    for that build rather than starting a second, and a failed build's error reaches every later caller without
    compiling again."""
    import threading
    import time

    from specdecode.models import kernels

    calls, started = [], threading.Event()

    def slow_load(outcome):
        def load():
            started.set()
            time.sleep(0.3)
            calls.append(threading.current_thread().name)
            if outcome is not None:
                raise outcome
        return load

    for outcome in (None, kernels.KernelUnavailable("our C++ kernels could not be compiled: no compiler")):
        calls.clear()
        started.clear()
        monkeypatch.setattr(kernels, "_DONE", [])
        monkeypatch.setattr(kernels, "_load", slow_load(outcome))
        kernels.build_in_background(capability())
        assert started.wait(5)
        for _ in range(2):
            if outcome is None:
                kernels.load_kernels()
            else:
                with pytest.raises(kernels.KernelUnavailable, match="no compiler"):
                    kernels.load_kernels()
        assert calls == ["specdecode-kernels"]  # built once, by the background thread; the caller waited for it



@pytest.mark.same_on_every_cpu
def test_a_build_removes_what_dead_builds_left_and_a_failed_one_leaves_nothing(monkeypatch, tmp_path):
    """A process that ended mid-build (a first run stopped while its kernels compiled in the background) leaves its
    partial folder; the next build removes it and keeps one whose process still runs, and a build that fails (here:
    no compiler) removes its own and says why in one line."""
    import os
    import subprocess

    import torch.utils.cpp_extension

    from specdecode.models import kernels

    def no_compiler(**_):
        raise RuntimeError("Error building extension\nc++: error: no such compiler")

    monkeypatch.setenv("SPECDECODE_CACHE", str(tmp_path))
    monkeypatch.setattr(torch.utils.cpp_extension, "load", no_compiler)
    ended = subprocess.Popen(["true"])
    ended.wait()
    build = kernels._build_dir()
    stale, running = (build.with_name(f"{build.name}.partial-{pid}") for pid in (ended.pid, os.getppid()))
    for folder in (stale, running):
        folder.mkdir(parents=True)
    with pytest.raises(kernels.KernelUnavailable, match="^our C\\+\\+ kernels could not be compiled: "):
        kernels._load()
    assert sorted(build.parent.iterdir()) == [running]
