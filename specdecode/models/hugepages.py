"""Weights on huge pages: the packed matrices a pass streams live in 2 MB pages where Linux gives them.

A pass of one token reads every weight once, and on the KVM guests we run on, a 4 KB page's translation costs part
of that stream: a one-row int4-dot8 product of a 58 MB matrix read its weights 5-22% faster from huge pages than from
ordinary ones, and one-token passes of the 1.5B and 0.5B ran 3-5% faster (paired passes, the two placements
alternating in one process; passes of 4 tokens, compute-bound, unchanged: docs/real-pair.md, the tenth session). Linux
here backs memory with huge pages only where asked (transparent_hugepage "madvise"), and torch asks only when
THP_MEM_ALLOC_ENABLE is set before its first allocation, which a library cannot arrange. So the weights are copied
into mappings of our own, advised MADV_HUGEPAGE: chunks of `CHUNK` bytes shared by consecutive tensors (a bump
allocator; a chunk lives while any tensor in it does), a mapping of its own for a larger tensor, each aligned to 2 MB.
Where the advice is not available (another OS, THP off) the copy is ordinary memory and nothing else changes.

SPECDECODE_HUGEPAGES=0 keeps tensors where torch put them (to measure what huge pages give).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import threading

import torch

HUGE = 2 << 20  # bytes in a huge page (x86-64)
CHUNK = 64 << 20  # bytes per shared mapping
ALIGN = 64  # each tensor's start, in bytes: a cache line


def enabled() -> bool:
    return os.environ.get("SPECDECODE_HUGEPAGES", "1") != "0"


def _mapping(nbytes: int) -> tuple[mmap.mmap, int]:
    """An anonymous mapping with nbytes from a 2 MB boundary on, advised to use huge pages -> (mapping, offset of
    that boundary)."""
    buffer = mmap.mmap(-1, nbytes + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # (shared: shmem's THP rules)
    address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    if hasattr(mmap, "MADV_HUGEPAGE"):
        with contextlib.suppress(OSError):  # THP compiled out: ordinary pages
            buffer.madvise(mmap.MADV_HUGEPAGE)
    return buffer, -address % HUGE


class _Arena:
    def __init__(self):
        self._lock = threading.Lock()
        self._chunk: tuple[mmap.mmap, int] | None = None
        self._used = CHUNK  # bytes of the current chunk handed out (none yet)

    def place(self, tensor: torch.Tensor) -> torch.Tensor:
        nbytes = tensor.numel() * tensor.element_size()
        with self._lock:
            if nbytes > CHUNK // 4:
                buffer, offset = _mapping(nbytes)
            else:
                if self._used + nbytes > CHUNK:
                    self._chunk, self._used = _mapping(CHUNK), 0
                buffer, start = self._chunk
                offset = start + self._used
                self._used += -(-nbytes // ALIGN) * ALIGN
        raw = torch.frombuffer(buffer, dtype=torch.uint8, count=nbytes, offset=offset)  # keeps the mapping alive
        return raw.view(tensor.dtype).view(tensor.shape).copy_(tensor)


_ARENA = _Arena()


def on_huge_pages(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of tensor in huge-page-advised memory (tensor itself when SPECDECODE_HUGEPAGES=0 or empty)."""
    if not enabled() or tensor.numel() == 0:
        return tensor
    return _ARENA.place(tensor.contiguous())
