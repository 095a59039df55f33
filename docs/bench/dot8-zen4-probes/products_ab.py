# Variants of dot8.cpp side by side in one process, on the 1.5B's own packed matrices (all 197 products of a pass:
# 28 layers' qkv, o, gate_up, down parts and the head), the weights streamed from memory as in a pass: ms for all of
# them at M rows, median over rounds, variants alternating (the order swapped every round), and whether each
# variant's outputs are bitwise those of the first. Each variant is a dot8.cpp file (e.g. `git show
# HEAD:specdecode/models/dot8.cpp > /tmp/old.cpp`), built under its own op namespace. From the repository root:
#   .venv/bin/python docs/bench/dot8-zen4-probes/products_ab.py /tmp/old.cpp,specdecode/models/dot8.cpp [ROUNDS] [ISA]
# A variant from before the kernel lost its 16-bit reading of the activations (its op still takes `halves`) is called
# with halves = 1, the int8 reading every matrix takes; a FILE.h beside a FILE.cpp is its kernels.h (`git show
# HEAD:specdecode/models/kernels.h > /tmp/old.h`), else the repository's is.
import statistics, sys, time
from pathlib import Path

import torch
from torch.utils.cpp_extension import load

from specdecode.load import load_target

files = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 9
isa = int(sys.argv[3]) if len(sys.argv) > 3 else 2  # 2: AVX-512 VNNI, 1: AVX2
torch.set_num_threads(2)
ops = []
for i, f in enumerate(files):
    name = f"dot8_ab{i}"
    build = Path(f"/tmp/dot8_ab/{name}")
    build.mkdir(parents=True, exist_ok=True)
    text = Path(f).read_text().replace("namespace specdecode {", "namespace probe {").replace("specdecode::", "probe::")
    (build / "p.cpp").write_text(text.replace("TORCH_LIBRARY_FRAGMENT(specdecode", f"TORCH_LIBRARY_FRAGMENT({name}"))
    header = Path(f).with_suffix(".h") if Path(f).with_suffix(".h").exists() else Path("specdecode/models/kernels.h")
    (build / "kernels.h").write_text(header.read_text().replace("namespace specdecode {", "namespace probe {"))
    load(name=name, sources=[str(build / "p.cpp")], extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"],
         build_directory=str(build), is_python_module=False, verbose=False)
    op = getattr(torch.ops, name).dot8_mm
    ops.append((op, "halves" in str(op.default._schema)))

m = load_target("qwen2.5-coder-1.5b").model
parts = [p for layer in m.layers for lin in (layer.qkv, layer.o, layer.gate_up, layer.down) for p in lin.parts]
parts += list(m.head.parts)
print(len(parts), "products,", sum(p.nbytes for p in parts) / 1e9, "GB", flush=True)
torch.manual_seed(0)
for M in (1, 2, 3, 4, 8, 16):
    xs = {p.in_features: torch.randn(M, p.in_features) for p in parts}
    same = []
    call = lambda i, p: ops[i][0](xs[p.in_features], p.w, p.sub, p.sup, p.bits, *([1] if ops[i][1] else []),
                                  p.unscale, isa)
    for i in range(len(ops)):
        same.append(all(torch.equal(call(i, p), call(0, p)) for p in parts[:8] + parts[-1:]))
    times = [[] for _ in ops]
    for r in range(rounds):
        order = range(len(ops)) if r % 2 == 0 else reversed(range(len(ops)))
        for i in order:
            start = time.perf_counter()
            for p in parts:
                call(i, p)
            times[i].append((time.perf_counter() - start) * 1e3)
    print(f"M={M:2d} " + "  ".join(f"{Path(f).stem}{'=' if s else '!'} {statistics.median(t):6.1f} ms"
                                    for f, s, t in zip(files, same, times)), flush=True)
