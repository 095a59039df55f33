"""The memory's read speed as torch sums 1 GiB of float32 (1 and 2 threads, median of 6): the wall the products
are measured against.
    .venv/bin/python docs/bench/slow-hour-probes/read_bandwidth.py"""
import statistics
import time

import torch

a = torch.ones(2**28)  # 1 GiB
for threads in (1, 2):
    torch.set_num_threads(threads)
    times = []
    for _ in range(6):
        t = time.perf_counter()
        a.sum()
        times.append(time.perf_counter() - t)
    print(f"{threads} thread(s): read {a.numel() * 4 / statistics.median(times) / 1e9:.1f} GB/s")
