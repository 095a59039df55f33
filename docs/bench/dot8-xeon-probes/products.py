# One 4-bit product (N outputs x 1536 inputs, random codes: in cache), ms per call, for variants of dot8.cpp built
# side by side: the committed source patched with amx_variants.patch, each variant a set of -D switches (base: none;
# NOSCALE: no float steps on the tiles' path; NOTILE: no tile work; NOUNPACK, NOSTORE, NOLOADB: without that step;
# CHUNKED=G: G groups unpacked, then multiplied, then scaled; PIPE3=D: unpacking D groups ahead of the tiles, the
# tiles D ahead of the floats; R16 (with CHUNKED): the floats compiled for 16 rows). Each result is compared with
# base's VNNI path: "=" bitwise equal, "!" not (the switches that drop work). From the repository root:
#   patch -o /tmp/dot8_probe.cpp specdecode/models/dot8.cpp docs/bench/dot8-xeon-probes/amx_variants.patch
#   MS=16,32 .venv/bin/python docs/bench/dot8-xeon-probes/products.py base,NOSCALE,CHUNKED=8 1   (1 thread)
import os, shutil, sys, time
from pathlib import Path

import torch
from torch.utils.cpp_extension import load

SOURCE, HEADER = Path("/tmp/dot8_probe.cpp"), Path("specdecode/models/kernels.h")
variants, threads = sys.argv[1].split(","), int(sys.argv[2]) if len(sys.argv) > 2 else 1


def name(v: str) -> str:
    return "dot8_" + v.replace("+", "_").replace("=", "_")


for v in variants:
    build = Path(f"/tmp/dot8_builds/{name(v)}")
    build.mkdir(parents=True, exist_ok=True)
    text = SOURCE.read_text().replace("namespace specdecode {", "namespace probe {").replace("specdecode::", "probe::")
    (build / "p.cpp").write_text(text.replace("TORCH_LIBRARY_FRAGMENT(specdecode", f"TORCH_LIBRARY_FRAGMENT({name(v)}"))
    (build / "kernels.h").write_text(HEADER.read_text().replace("namespace specdecode {", "namespace probe {"))
    load(name=name(v), sources=[str(build / "p.cpp")], extra_cflags=["-O3", "-fopenmp"] + [
        f"-D{f}" for f in v.split("+") if f != "base"], extra_ldflags=["-fopenmp"], build_directory=str(build),
        is_python_module=False)
torch.set_num_threads(threads)
torch.manual_seed(0)
N, K = int(os.environ.get("N", 512)), 1536
w = torch.randint(0, 256, (N // 16, K // 32, 256), dtype=torch.uint8)
sub = torch.randint(0, 64, (N // 16, K // 32, 32), dtype=torch.uint8)
sup = (torch.rand(N // 16, K // 256, 32) * 0.01).half()
halves = int(os.environ.get("HALVES", 1))


def median_us(f, n=41):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return sorted(times)[n // 2] * 1e6


for M in [int(m) for m in os.environ.get("MS", "1,4,8,16,32").split(",")]:
    x, cells = torch.randn(M, K), []
    reference = getattr(torch.ops, name(variants[0])).dot8_mm(x, w, sub, sup, 4, halves, 1.0, 2)
    for v in variants:
        op = getattr(torch.ops, name(v)).dot8_mm
        for isa in (2, 3):
            same = "=" if torch.equal(op(x, w, sub, sup, 4, halves, 1.0, isa), reference) else "!"
            us = median_us(lambda: [op(x, w, sub, sup, 4, halves, 1.0, isa) for _ in range(10)]) / 10
            cells.append(f"{v}/{'vnni' if isa == 2 else 'amx'}{same} {us:6.1f} us")
    print(f"M={M:3d}  " + "  ".join(cells), flush=True)
