"""Which thread computes in a server: the models on one engine thread, requests' rounds each on its own thread alone.

torch computes in parallel through OpenMP, and libgomp (torch's on Linux) keeps a pool of helper threads for every
thread that has started a parallel region. Once the pools hold more threads than the machine has cores, every pool's
helpers sleep between regions instead of spinning, so each of a pass's ~200 parallel regions waits for them to wake.
Measured on a 2-core Xeon (the 1.5B target, one pass of 4 sequences' rows): 57 ms run by the only thread that ever
computed in parallel, 69-72 ms once any other thread had (even a `torch.cat` of the pass's logits elsewhere).

A server runs rounds in worker threads, so: its models load and run every pass on one engine thread
(`on_engine`), and the threads that run rounds compute on their own thread only (`serial`): what they compute (the
rule on a round's logits) is small beside a pass. Where requests run one at a time (models with one cache each:
llama.cpp, transformers), their rounds run on the engine thread whole (`Service._computed`).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import TypeVar

import torch

R = TypeVar("R")
OPENMP_RUNTIMES = ("libgomp", "libiomp5", "libomp")  # GNU's (torch's on Linux), Intel's, LLVM's

_local = threading.local()
_engine = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specdecode-engine",
                             initializer=lambda: setattr(_local, "engine", True))


def on_engine(fn: Callable[..., R], *args) -> R:
    """fn(*args), run on the process's engine thread (directly when called there); its exceptions raise here."""
    if getattr(_local, "engine", False):
        return fn(*args)
    return _engine.submit(fn, *args).result()


def serial() -> None:
    """From now on this thread's torch work runs in this thread alone (OpenMP's thread count for it set to 1; once
    per thread; not on the engine thread). Without an OpenMP runtime in the process, nothing changes."""
    if getattr(_local, "serial", False) or getattr(_local, "engine", False):
        return
    torch.get_num_threads()  # (torch sets a thread's OpenMP count at its first parallel call there: now, not after)
    if (runtime := openmp_runtime()) is not None:
        runtime.omp_set_num_threads(1)
    _local.serial = True


@cache
def openmp_runtime() -> ctypes.CDLL | None:
    """The OpenMP runtime this process has loaded (torch's), or None."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split()[-1]
        if Path(path).name.startswith(OPENMP_RUNTIMES):
            try:
                return ctypes.CDLL(path)
            except OSError:
                return None
    return None
