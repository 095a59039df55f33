# oneDNN bf16 products (AMX-BF16 on this Xeon) on the 1.5B layer shapes, weights prepacked, one layer in cache: an upper
# bound on what a bf16 prompt path would cost per row (x 28 layers; the weights of all 28 would stream from memory).
import time, torch
torch.set_num_threads(2)
def med(f, n=9):
    ts = []
    for _ in range(n):
        a = time.perf_counter(); f(); ts.append(time.perf_counter() - a)
    return sorted(ts)[n // 2] * 1e3
shapes = {"qkv": (2048, 1536), "o": (1536, 1536), "gate_up": (17920, 1536), "down": (1536, 8960)}
for M in (16, 32, 64, 128):
    row = []
    tot = 0
    for name, (N, K) in shapes.items():
        w = torch.randn(N, K).bfloat16()
        packed = torch.ops.mkldnn._reorder_linear_weight(w, None) if hasattr(torch.ops.mkldnn, "_reorder_linear_weight") else None
        x = torch.randn(M, K).bfloat16()
        if packed is not None:
            f = lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        else:
            f = lambda: torch.nn.functional.linear(x, w)
        t = med(f); tot += t
        row.append(f"{name} {t:.2f}")
    print(f"M={M}: " + ", ".join(row) + f"; layer {tot:.2f} ms, x28 = {tot*28:.0f} ms, {tot*28/M:.2f} ms/row", flush=True)
