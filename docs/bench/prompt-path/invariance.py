# Whether oneDNN's bf16 product (AMX-BF16 on the Xeon) gives a row the same bits at every row count past 32, on the
# 1.5B's shapes (random weights, prepacked): "M:1" where the first M rows of an M-row product equal those rows of a
# 512-row one. They do not, in ways that differ by shape: so the prompt path fixes which rows share a product.
#   .venv/bin/python docs/bench/prompt-path/invariance.py
import torch
torch.set_num_threads(2)
torch.manual_seed(0)
for N, K in ((2048, 1536), (17920, 1536), (1536, 8960), (1536, 1536)):
    w = torch.randn(N, K).bfloat16()
    pw = torch.ops.mkldnn._reorder_linear_weight(w)
    x = torch.randn(512, K).bfloat16()
    f = lambda a: torch.ops.mkldnn._linear_pointwise(a, pw, None, "none", [], "")
    big = f(x[:512])
    out = []
    for M in (33, 40, 64, 96, 100, 128, 200, 256, 300):
        out.append(f"{M}:{int(torch.equal(f(x[:M]), big[:M]))}")
    # a row in different company
    y1 = f(torch.cat([x[5:6], x[100:163]]))[0]
    print(N, K, " ".join(out), "row 5 among others (64 rows):", torch.equal(y1, big[5]), flush=True)
