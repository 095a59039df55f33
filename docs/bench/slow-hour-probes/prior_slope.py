"""Adaptive gamma's prior verify slope, simulated: 30 runs of 40 rounds (acceptance 0.83 per draft, 5% noise on each
pass) on two cost curves of the 1.5B and its 0.5B draft on the AVX2 EPYC: a CPU-bound hour after the one-row tiles
(T(k) = 78 + 48 (k - 1) ms, a draft pass 25 ms: plain decoding wins) and an hour like the earlier sessions'
(T(k) = 50 + 12 (k - 1) ms, 14 ms: gamma 2 wins). Tokens per second by prior, against plain and the best fixed gamma.
    .venv/bin/python docs/bench/slow-hour-probes/prior_slope.py"""
import random

from specdecode.adaptive import AdaptiveGamma


def run(prior, seed, T, D, rounds=40, alpha=0.83):
    rnd = random.Random(seed)
    c = AdaptiveGamma(10, prior_slope=prior)
    tokens, seconds, gammas = 0, 0.0, []
    for _ in range(rounds):
        g = c.choose(False)
        gammas.append(g)
        accepted = 0
        while accepted < g and rnd.random() < alpha:
            accepted += 1
        t = T(g + 1) * (1 + 0.05 * rnd.gauss(0, 1))
        seconds += t + D * g
        tokens += accepted + 1
        c.update(g, accepted, t, D * g if g else None, g, pass_times=[(1, D)] * g)
    return tokens / seconds, sum(gammas) / len(gammas)


for name, T, D in (("CPU-bound hour", lambda k: 0.078 + 0.048 * (k - 1), 0.025),
                   ("earlier hours", lambda k: 0.050 + 0.012 * (k - 1), 0.014)):
    best = max(((1 - 0.83 ** (g + 1)) / 0.17 / (T(g + 1) + D * g), g) for g in range(11))
    print(f"{name}: plain {1 / T(1):.2f} tok/s, best fixed gamma {best[1]} at {best[0]:.2f} tok/s")
    for prior in (0.06, 0.2, 0.3, 0.4, 0.6):
        runs = [run(prior, seed, T, D) for seed in range(30)]
        rate, gamma = sum(r[0] for r in runs) / 30, sum(r[1] for r in runs) / 30
        print(f"  prior {prior}: {rate:.2f} tok/s ({rate * T(1):.2f}x plain), mean gamma {gamma:.2f}")
