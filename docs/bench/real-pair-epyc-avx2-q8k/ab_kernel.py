"""Two builds of our kernels in one process, on the same packed weights (both read the same layout): int4-dot8 with
a float step per group of 32 inputs (activations in int8 per 32: the build of commit b05ac24, its sources renamed
into a second torch library, "old") against the working tree's. For the Q8_K-style attempt (README.md here), apply
its patch first, and take it back after:

    git apply docs/bench/real-pair-epyc-avx2-q8k/q8k.patch
    .venv/bin/python docs/bench/real-pair-epyc-avx2-q8k/ab_kernel.py passes [--repeats 30]
    .venv/bin/python docs/bench/real-pair-epyc-avx2-q8k/ab_kernel.py products
    .venv/bin/python docs/bench/real-pair-epyc-avx2-q8k/ab_kernel.py fidelity [--prompts 8]
    git apply -R docs/bench/real-pair-epyc-avx2-q8k/q8k.patch

passes:   whole passes of k new tokens of the 1.5B target and one-token passes of the 0.5B draft, the builds
          alternating pass by pass; medians.
products: one product with 12 distinct random 8960 x 1536 4-bit matrices (83 MB: out of the caches), rows 1-16,
          the builds alternating; medians per matrix.
fidelity: teacher-forced over held-out prompts, each build's and llama.cpp's next-token distributions against the
          file's float32 reading (its weights exact, float activations): top-1 agreement and mean KL (bench/accuracy).
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import torch
from torch.utils.cpp_extension import load

root = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(root))
from specdecode.bench.accuracy import agreements  # noqa: E402
from specdecode.load import load_draft, load_target  # noqa: E402
from specdecode.models import dot8, llama  # noqa: E402
from specdecode.models.kernels import load_kernels  # noqa: E402
from specdecode.prompts import load_prompts  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("what", choices=("passes", "products", "fidelity"))
parser.add_argument("--old-commit", default="b05ac24")
parser.add_argument("--repeats", type=int, default=15)
parser.add_argument("--prompts", type=int, default=8)
args = parser.parse_args()

# the old build: its sources with the torch library and the C++ namespace renamed, so both load side by side
folder = Path(tempfile.mkdtemp())
for name in ("dot8.cpp", "attention.cpp", "layer.cpp", "kernels.h"):
    text = subprocess.run(["git", "-C", str(root), "show", f"{args.old_commit}:specdecode/models/{name}"],
                          capture_output=True, text=True, check=True).stdout
    for mine, theirs in (("TORCH_LIBRARY_FRAGMENT(specdecode,", "TORCH_LIBRARY_FRAGMENT(specdecode_old,"),
                         ("namespace specdecode {", "namespace specdecode_old {"),
                         ("specdecode::", "specdecode_old::")):
        text = text.replace(mine, theirs)
    (folder / name).write_text(text)
load(name="specdecode_old_kernels", sources=[str(folder / n) for n in ("dot8.cpp", "attention.cpp", "layer.cpp")],
     extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"], build_directory=str(folder),
     is_python_module=False, verbose=False)
shutil.rmtree(folder, ignore_errors=True)
load_kernels()
NAMESPACES = {"old": torch.ops.specdecode_old, "working tree": torch.ops.specdecode}


class Ops:  # stands in for the `torch` module of llama.py and dot8.py: torch, with torch.ops.specdecode swapped
    def __init__(self, namespace):
        self.ops = types.SimpleNamespace(specdecode=namespace)

    def __getattr__(self, name):
        return getattr(torch, name)


def use(build: str) -> None:
    llama.torch = dot8.torch = Ops(NAMESPACES[build])


print(f"torch threads {torch.get_num_threads()}")
if args.what == "passes":
    target = load_target("qwen2.5-coder-1.5b")
    models = {"1.5B": target.model, "0.5B draft": load_draft("qwen2.5-coder-0.5b", target).model}
    cases = [("1.5B", k) for k in (1, 2, 3, 4, 8)] + [("0.5B draft", 1)]
    context = 64
    samples = {(build, case): [] for build in NAMESPACES for case in cases}
    for model in models.values():
        model.rollback(0)
        model.extend(torch.arange(100, 100 + context), keep=1)
    for _ in range(args.repeats):
        for case in cases:
            model = models[case[0]]
            for build in NAMESPACES:
                use(build)
                start = time.perf_counter()
                model.extend(torch.arange(2000, 2000 + case[1]))
                samples[(build, case)].append(time.perf_counter() - start)
                model.rollback(context)
    print(f"{args.repeats} passes each, medians (ms)\n| model | k | old | working tree | old / working tree |\n"
          "|---|---|---|---|---|")
    for case in cases:
        old, new = (statistics.median(samples[(b, case)]) * 1e3 for b in NAMESPACES)
        print(f"| {case[0]} | {case[1]} | {old:.1f} | {new:.1f} | {old / new:.2f}x |")
elif args.what == "products":
    torch.manual_seed(0)
    matrices = [dot8.Packed(dot8.quantize(torch.randn(8960, 1536) * 0.02, 4)) for _ in range(12)]
    print("ms per 8960 x 1536 product, medians of 12\n| rows | old | working tree | old / working tree |\n"
          "|---|---|---|---|")
    for rows in (1, 2, 4, 8, 16):
        x = torch.randn(rows, 1536)
        times = {b: [] for b in NAMESPACES}
        for _ in range(12):
            for build, ops in NAMESPACES.items():
                start = time.perf_counter()
                for p in matrices:
                    ops.dot8_mm(x, p.w, p.sub, p.sup, 4, 1, p.unscale, 1)
                times[build].append((time.perf_counter() - start) / len(matrices) * 1e3)
        old, new = (statistics.median(times[b]) for b in NAMESPACES)
        print(f"| {rows} | {old:.3f} | {new:.3f} | {old / new:.2f}x |")
else:
    target = load_target("qwen2.5-coder-1.5b")
    models = {"llama.cpp": load_target("qwen2.5-coder-1.5b", engine="llama.cpp").model,
              "float32": load_target("qwen2.5-coder-1.5b", dtype="float32", engine="native").model}
    texts = [target.tokenizer.encode(p.prompt) for p in load_prompts("test")[: args.prompts]]
    results = agreements(models, [("llama.cpp", "float32")], texts)
    for build in NAMESPACES:
        use(build)
        results.update({(build, r): v for (_, r), v in agreements(
            {build: target.model, **models}, [(build, "float32"), (build, "llama.cpp")], texts).items()})
    print("| reading | against | top-1 agreement | mean KL(against || reading) |\n|---|---|---|---|")
    for (ours, against), r in results.items():
        print(f"| {ours} | {against} | {r['top1_agreement']:.2%} | {r['mean_kl']:.5f} ({r['positions']} positions) |")
