"""Our C++ kernels, built once per machine on first use with torch's extension builder and registered as
`torch.ops.specdecode.*`: dot8.cpp (the int4-dot8 products: dot8.py), attention.cpp (the engine's attention for
that format: llama.py `KeyPositions`) and layer.cpp (a whole layer of that format in one call: llama.py
`LlamaLayer`), sharing kernels.h. They need AVX2 with FMA and F16C; the products use AVX-512 VNNI where the CPU has
it, and AMX-INT8 tiles as well for passes of 16 rows or more where it has those (Linux granting them: cpu.py), and give
the same bits on every path."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import threading
from pathlib import Path

import torch

from ..cpu import Capability

SOURCES = [Path(__file__).with_name(name) for name in ("dot8.cpp", "attention.cpp", "layer.cpp")]
HEADERS = [Path(__file__).with_name("kernels.h")]  # included by the sources
NAME = "specdecode_kernels"
ISAS = {"amx": 3, "avx512-vnni": 2, "avx2": 1}  # the product kernel's paths, as dot8_mm numbers them


class KernelUnavailable(RuntimeError):
    """The kernels cannot run here: the CPU lacks AVX2, or it could not be compiled."""


def kernel_isa(cpu: Capability) -> str | None:
    """The kernel path this CPU runs: AMX-INT8 tiles beside AVX-512 VNNI (unless SPECDECODE_CPU forces a path), else
    AVX-512 VNNI, else AVX2 (also when SPECDECODE_CPU=avx2 forces it), else None."""
    flags = set(cpu.flags)
    if {"avx512f", "avx512bw", "avx512vl", "avx512_vnni", "f16c", "fma"} <= flags and cpu.forced != "avx2":
        return "amx" if cpu.amx_int8 else "avx512-vnni"
    if {"avx2", "fma", "f16c"} <= flags:
        return "avx2"
    return None


_LOCK = threading.Lock()  # one build or load at a time; the others wait for it
_DONE: list[KernelUnavailable | None] = []  # [None] once loaded, [error] once it failed: neither is tried again


def load_kernels() -> None:
    """Register `torch.ops.specdecode.dot8_mm` and `.attend`, compiling the sources first if this machine has no
    build of their text for this torch (cached under the cache directory; built in a folder of its own and renamed
    into place whole, so an interrupted build is never used or waited on); KernelUnavailable with the compiler's
    first error line. Once per process: a call while another thread builds waits for that build."""
    with _LOCK:
        if not _DONE:
            try:
                _load()
                _DONE.append(None)
            except KernelUnavailable as error:
                _DONE.append(error)
        if _DONE[0] is not None:
            raise _DONE[0]


def build_in_background(cpu: Capability) -> None:
    """Start `load_kernels` in a thread where this CPU runs them, so that a first run compiles (~20-60 s on 2 cores)
    while it downloads a model and reads its tokenizer, which leave a core idle; whoever needs the kernels then
    calls load_kernels, which waits for the build and raises its error, if any."""
    if kernel_isa(cpu) is not None and not _DONE:
        threading.Thread(target=_quietly, name="specdecode-kernels", daemon=True).start()


def _quietly() -> None:
    with contextlib.suppress(KernelUnavailable):  # kept in _DONE for the next caller
        load_kernels()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # no signal: only whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    return True


def _build_dir() -> Path:
    """Where the build of the sources' text for this torch lives, under the cache directory."""
    from .default import cache_dir

    key = hashlib.sha256(b"".join(f.read_bytes() for f in SOURCES + HEADERS) + torch.__version__.encode())
    return cache_dir() / "kernels" / f"{NAME}-{key.hexdigest()[:12]}"


def _load() -> None:
    build = _build_dir()
    library = build / f"{NAME}.so"
    if library.is_file():
        torch.ops.load_library(str(library))
        return
    from torch.utils.cpp_extension import load

    if shutil.which("ninja") is None:  # torch's builder runs ninja from PATH; the pinned package ships one
        import ninja

        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
    for stale in build.parent.glob(f"{build.name}.partial-*"):  # a build whose process ended before it did
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    partial = build.with_name(f"{build.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    print("compiling our C++ kernels (once per machine, ~20-60 s)", file=sys.stderr, flush=True)
    try:
        load(name=NAME, sources=[str(source) for source in SOURCES], extra_cflags=["-O3", "-fopenmp"],
             extra_ldflags=["-fopenmp"], build_directory=str(partial), is_python_module=False, verbose=False)
    except (RuntimeError, OSError, ImportError) as error:
        shutil.rmtree(partial, ignore_errors=True)
        lines = [line for line in str(error).splitlines() if "error" in line.lower()] or [str(error)]
        raise KernelUnavailable(f"our C++ kernels could not be compiled: {lines[0].strip()}") from None
    try:
        partial.rename(build)
    except OSError:  # another process put its build in place first
        shutil.rmtree(partial, ignore_errors=True)
