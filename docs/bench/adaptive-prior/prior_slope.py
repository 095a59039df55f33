# A fresh AdaptiveGamma per answer (as `specdecode generate` makes one per run), on the pass-cost curves measured on
# the CPUs seen (T(k) / T(1), interpolated; a draft pass c of T(1)), i.i.d. acceptance at alpha: time per token over
# the first N tokens of an answer, for prior verify slopes, against the best fixed gamma, 400 seeds each.
#   .venv/bin/python docs/bench/adaptive-prior/prior_slope.py [TOKENS]
import random, statistics, sys
from specdecode.adaptive import AdaptiveGamma

CURVES = {  # (T(k) / T(1) at k = 1, 2, 4, 8, 16), c
    "Zen 4 EPYC (AVX-512 VNNI, 2026-12-06)": ((1, 1.08, 1.40, 2.3, 4.4), 0.38),
    "AMX Xeon (2026-12-04)": ((1, 1.05, 1.27, 1.95, 2.69), 0.34),
    "AVX2 EPYC (2026-12-03)": ((1, 1.25, 1.8, 3.2, 6.0), 0.37),
}
KS = (1, 2, 4, 8, 16)
TOKENS = int(sys.argv[1]) if len(sys.argv) > 1 else 64


def curve(points):
    def T(k):
        for (k0, t0), (k1, t1) in zip(zip(KS, points), zip(KS[1:], points[1:])):
            if k <= k1:
                return t0 + (t1 - t0) * (k - k0) / (k1 - k0)
        return points[-1] * k / 16
    return T


def answer(make, T, c, alpha, seed):
    rng, ctl, tokens, time = random.Random(seed), make(), 0, 0.0
    while tokens < TOKENS:
        gamma = ctl.choose() if make else ctl_fixed
        accepted = 0
        while accepted < gamma and rng.random() < alpha:
            accepted += 1
        ctl.update(gamma, accepted, T(gamma + 1), gamma * c, gamma)
        time += T(gamma + 1) + gamma * c
        tokens += accepted + 1
    return time / tokens


def fixed(T, c, alpha, gamma):
    tokens = (1 - alpha ** (gamma + 1)) / (1 - alpha) if gamma else 1.0
    return (T(gamma + 1) + gamma * c) / tokens


for name, (points, c) in CURVES.items():
    T = curve(points)
    print(f"{name}: c {c}; time per token in T(1), first {TOKENS} tokens of an answer, a fresh controller each")
    for alpha in (0.6, 0.75, 0.85, 0.95):
        best = min(range(11), key=lambda g: fixed(T, c, alpha, g))
        cells = [f"best fixed gamma {best}: {fixed(T, c, alpha, best):.3f}"]
        for slope in (0.06, 0.1, 0.15, 0.25):
            per = [answer(lambda: AdaptiveGamma(max_gamma=10, prior_slope=slope), T, c, alpha, s) for s in range(400)]
            cells.append(f"prior {slope}: {statistics.mean(per):.3f}")
        print(f"  alpha {alpha}: " + "  ".join(cells))
