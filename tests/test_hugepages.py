"""Weights copied onto huge-page-advised memory (models/hugepages.py): the same values, apart from their source,
aligned, never overlapping, alive as long as their tensors; on Linux with transparent huge pages, in huge pages."""

import gc
import re
import sys
from pathlib import Path

import pytest
import torch

from specdecode.models import hugepages
from specdecode.models.hugepages import on_huge_pages


def test_a_copy_holds_the_same_values_apart_from_its_source():
    source = torch.randn(3, 1000)
    copy = on_huge_pages(source)
    assert copy.dtype == source.dtype and copy.shape == source.shape and copy.is_contiguous()
    assert torch.equal(copy, source)
    source.zero_()
    assert copy.abs().sum() > 0
    assert copy.data_ptr() % hugepages.ALIGN == 0


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float16, torch.int16, torch.float32])
def test_many_tensors_in_one_chunk_and_larger_ones_alone_keep_their_values(dtype):
    sizes = [1, 63, 64, 65, 4096, 100_000, hugepages.CHUNK // 4 // 2 + 1, hugepages.CHUNK // 8]  # in elements
    sources = [torch.arange(n).to(dtype) if dtype != torch.uint8 else (torch.arange(n) % 251).to(dtype)
               for n in sizes]
    copies = [on_huge_pages(s) for s in sources]
    for s, c in zip(sources, copies, strict=True):
        assert torch.equal(s, c)
    spans = sorted((c.data_ptr(), c.data_ptr() + c.numel() * c.element_size()) for c in copies)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))  # no overlap


def test_a_tensor_outlives_the_arena_moving_on_to_new_chunks():
    kept = on_huge_pages(torch.arange(1000, dtype=torch.int64))
    for _ in range(3):  # fill whole chunks, dropping them: kept's chunk must stay mapped
        on_huge_pages(torch.zeros(hugepages.CHUNK // 4 // 4, dtype=torch.float32))
        on_huge_pages(torch.zeros(hugepages.CHUNK // 4 // 4, dtype=torch.float32))
    gc.collect()
    assert torch.equal(kept, torch.arange(1000, dtype=torch.int64))


def test_switched_off_it_returns_the_tensor_itself(monkeypatch):
    monkeypatch.setenv("SPECDECODE_HUGEPAGES", "0")
    source = torch.randn(100)
    assert on_huge_pages(source) is source


def _thp_mode() -> str | None:
    path = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not sys.platform.startswith("linux") or not path.exists():
        return None
    found = re.search(r"\[(\w+)\]", path.read_text())
    return found.group(1) if found else None


@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"),
                    reason="this system gives no transparent huge pages (Linux with THP 'always' or 'madvise')")
def test_a_large_copy_lies_in_huge_pages():
    copy = on_huge_pages(torch.ones(16 << 20, dtype=torch.uint8))  # 16 MB: a mapping of its own
    start = copy.data_ptr()
    huge = None
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            span = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
            if span:
                inside = int(span.group(1), 16) <= start < int(span.group(2), 16)
            elif inside and line.startswith("AnonHugePages:"):
                huge = int(line.split()[1]) * 1024
                break
    assert huge is not None and huge >= 8 << 20, f"{huge} bytes of the 16 MB copy in huge pages"
