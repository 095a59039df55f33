# Steady throughput (tokens per unit time) of the old rule and AdaptiveGamma at fixed alpha, 5 runs of 3,000 rounds
import sys, random; sys.path.insert(0,'tests'); sys.path.insert(0, __import__('os').path.dirname(__file__))
from trap import Old
from specdecode.adaptive import AdaptiveGamma
line = lambda k: 1 + 0.35 * (k - 1)
def run(c, alpha, rounds, seed):
    rng = random.Random(seed); tok = tm = 0
    for _ in range(rounds):
        g = c.choose(); a = 0
        while a < g and rng.random() < alpha: a += 1
        c.update(g, a, line(g + 1), g * 0.3, g)
        tok += a + 1; tm += line(g + 1) + 0.3 * g
    return tok / tm
for alpha in (0.02, 0.3, 0.5, 0.6, 0.65, 0.7, 0.8, 0.9):
    r = {}
    for cls in (Old, AdaptiveGamma):
        r[cls.__name__] = sum(run(cls(max_gamma=8), alpha, 3000, s) for s in range(5)) / 5
    print(alpha, {k: round(v, 4) for k, v in r.items()}, round(r['AdaptiveGamma'] / r['Old'], 4))
