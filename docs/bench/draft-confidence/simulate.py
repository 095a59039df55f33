# Replays collect.py's data: speculation with at most G drafts a round, drafting stopped after a draft whose
# top-1 probability (the draft's softmax at T = 1) is below a threshold; greedy acceptance = the draft's argmax is the
# target's token. Speed-up over plain decoding for pass-cost curves measured on the Zen 4 and Zen 5 EPYCs (T(k) / T(1), c).
#   .venv/bin/python docs/bench/draft-confidence/simulate.py DATA.pt
import sys

import torch

rows = torch.load(sys.argv[1])
CURVES = {  # name: (T(k) / T(1) for k = 1.., c)
    "bench (T(1) 32 ms)": ([1.0, 1.05, 1.17, 1.30, 1.50, 1.65, 1.85, 2.05, 2.3], 0.376),
    "fast (T(1) 24 ms)": ([1 + 0.23 * k for k in range(9)], 0.42),
    # Zen 5 (a thirty-first session's 24-prompt bench: T(2), T(4), T(8) / T(1) = 1.02, 1.29, 1.93; a draft step
    # alone 0.27 of a pass, 0.33 with what a drafting round adds in the bench)
    "zen5, c 0.27": ([1.0, 1.02, 1.15, 1.29, 1.45, 1.61, 1.77, 1.93, 2.05], 0.27),
    "zen5, c 0.33": ([1.0, 1.02, 1.15, 1.29, 1.45, 1.61, 1.77, 1.93, 2.05], 0.33),
}


def replay(r, G, t, curve, c):
    match = (r["draft_top"] == r["target"]).tolist()
    conf = r["draft_conf"].tolist()
    n, i, tokens, cost = len(match), 0, 0, 0.0
    while i < n:
        drafts = 0
        for j in range(min(G, n - i)):
            drafts += 1
            if conf[i + j] < t:
                break
        accepted = 0
        while accepted < drafts and match[i + accepted]:
            accepted += 1
        cost += drafts * c + curve[drafts]
        tokens += accepted + 1
        i += accepted + 1
    return tokens, cost


for name, (curve, c) in CURVES.items():
    print(name)
    best = None
    for t in (0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9):
        line = []
        for G in (1, 2, 3, 4, 5, 6, 8):
            tok = cost = 0.0
            for r in rows:
                a, b = replay(r, G, t, curve, c)
                tok, cost = tok + a, cost + b
            line.append(f"G{G} {tok / cost:.3f}")
            if best is None or tok / cost > best[0]:
                best = (tok / cost, t, G)
        print(f"  threshold {t:.1f}: " + "  ".join(line))
    print(f"  best: {best[0]:.3f}x at threshold {best[1]}, G {best[2]}")

# Sampled (T = 1): a draft accepted with probability sum(min(p, q)) at its position (teacher-forced on the greedy
# answer: an approximation), drawn with a fixed seed; the same thresholds.
g = torch.Generator().manual_seed(0)
for name, (curve, c) in CURVES.items():
    print(name, "sampled")
    for t in (0.0, 0.5, 0.7, 0.8, 0.9):
        line = []
        for G in (1, 2, 3, 4, 6, 8):
            tok = cost = 0.0
            for _ in range(20):
                for r in rows:
                    match = (torch.rand(len(r["overlap"]), generator=g) < r["overlap"]).int()
                    a, b = replay({"draft_top": match, "target": torch.ones_like(match),
                                   "draft_conf": r["draft_conf"]}, G, t, curve, c)
                    tok, cost = tok + a, cost + b
            line.append(f"G{G} {tok / cost:.3f}")
        print(f"  threshold {t:.1f}: " + "  ".join(line))
