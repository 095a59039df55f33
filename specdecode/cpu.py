"""What this CPU offers the engines, and the one switch that forces a slower machine's path on a faster one.

    SPECDECODE_CPU=avx2     torch's kernels run their AVX2 versions (ATEN_CPU_CAPABILITY) and oneDNN is capped at
                            AVX2 (ONEDNN_MAX_CPU_ISA): on an AVX-512 machine this is, kernel for kernel, what an
                            AVX2-only EPYC runs, including the missing native bf16 matmul
    SPECDECODE_CPU=avx512   the same, capped at AVX-512 without AMX
    (unset)                 whatever the CPU has

The variables must be in place before torch first runs a kernel: `specdecode/__init__.py` calls `force_path()`
before it imports anything that imports torch. `capability()` then reports what torch actually dispatches to, so a
forced path and a real AVX2 machine read the same.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

VARIABLE = "SPECDECODE_CPU"
FORCED_PATHS = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
}
INTERESTING_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
                     "avx512_bf16", "avx_ne_convert", "amx_tile", "amx_bf16", "amx_int8")


class UnknownPath(ValueError):
    """SPECDECODE_CPU names no path."""


def forced_path(environ: dict | None = None) -> str | None:
    """The path SPECDECODE_CPU forces, or None; UnknownPath for a value that names none."""
    forced = (os.environ if environ is None else environ).get(VARIABLE, "").strip().lower()
    if forced and forced not in FORCED_PATHS:
        raise UnknownPath(f"{VARIABLE}={forced!r} names no CPU path: choose one of {', '.join(FORCED_PATHS)}")
    return forced or None


def force_path(environ: dict | None = None) -> str | None:
    """Apply SPECDECODE_CPU (if set) to torch's and oneDNN's own variables; returns the forced path or None. An
    unknown value is left for `capability()` (and so the command line) to report."""
    env = os.environ if environ is None else environ
    try:
        forced = forced_path(env)
    except UnknownPath:
        return None
    if forced:
        env.update(FORCED_PATHS[forced])
    return forced


@dataclass(frozen=True)
class Capability:
    cpu: str  # the model name /proc/cpuinfo gives
    flags: tuple[str, ...]  # the INTERESTING_FLAGS the CPU has
    isa: str  # what torch's own kernels dispatch to: "AVX512", "AVX2", "DEFAULT", ...
    bf16_matmul: bool  # oneDNN runs bf16 matmuls natively (AVX-512 BF16, AMX or AVX-NE-CONVERT): prepacked bf16
    forced: str | None  # SPECDECODE_CPU, when set
    amx_int8: bool = False  # AMX-INT8 tiles, with Linux's leave to use them, and not forced off by SPECDECODE_CPU
    amx_bf16: bool = False  # AMX-BF16 tiles (oneDNN's bf16 products use them), on the same terms

    @property
    def summary(self) -> str:
        native_bf16 = "native bf16 matmuls" if self.bf16_matmul else "no native bf16 matmuls (emulated, slow)"
        forced = f", forced by {VARIABLE}={self.forced}" if self.forced else ""
        return f"{self.cpu}: torch kernels {self.isa}, {native_bf16}{forced}"


@cache
def capability() -> Capability:
    import torch

    forced = forced_path()
    cpu, flags = "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and cpu == "unknown CPU":
                cpu = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    bf16 = bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    tiles = "amx_tile" in flags and forced is None and _tile_state_granted()
    return Capability(cpu, tuple(f for f in INTERESTING_FLAGS if f in flags), torch.backends.cpu.get_cpu_capability(),
                      bf16, forced, tiles and "amx_int8" in flags, tiles and bf16 and "amx_bf16" in flags)


def _tile_state_granted() -> bool:
    """Ask Linux for AMX's tile data (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA): a process that has not asked dies
    of SIGILL at its first tile instruction. Granted once for the whole process, threads included."""
    import ctypes

    arch_prctl, req_xcomp_perm, xtiledata = 158, 0x1023, 18  # x86-64 syscall number, request, feature
    try:
        return ctypes.CDLL(None, use_errno=True).syscall(arch_prctl, req_xcomp_perm, xtiledata) == 0
    except (OSError, AttributeError):
        return False


@contextmanager
def torch_threads(n: int | None):
    """torch on n threads for the duration, then as before (None: unchanged). An engine with threads of its own
    (llama.cpp) runs faster with torch's idle threads out of its way."""
    import torch

    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
