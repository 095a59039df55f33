# One token drawn from a 151,936-token row (`adjust` then `sample`), ms, in a fresh process; with the argument
# "mallopt", glibc's mmap threshold raised to 64 MB and its trim threshold to 256 MB first. Run it several times each:
#   .venv/bin/python docs/bench/malloc-probe/draw.py [mallopt]
import ctypes
import sys
import time

import torch

if "mallopt" in sys.argv:
    libc = ctypes.CDLL(None)
    print("mallopt", libc.mallopt(-3, 64 << 20), libc.mallopt(-1, 256 << 20))
from specdecode.sampling import SamplingConfig, adjust, cumulative, sample

torch.set_num_threads(2)
V=151936
p=adjust(torch.randn(V)*3, SamplingConfig(1.0))
g=torch.Generator().manual_seed(0)
def bench(f, reps=200):
    f(); a=time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter()-a)/reps*1e3
rows=p.reshape(-1,V)
print("cumulative first", bench(lambda: cumulative(rows)))
print("sample", bench(lambda: sample(p, g)))
x=torch.randn(V)*3
print("adjust+sample", bench(lambda: sample(adjust(x, SamplingConfig(1.0)), g)))
