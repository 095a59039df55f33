# The old rule (exploring rounds only) against AdaptiveGamma: plain rounds of 32 on an alpha-0.9 text after 400 at a0
import sys; sys.path.insert(0,'tests')
from test_adaptive import simulate
from specdecode.adaptive import AdaptiveGamma
class Old(AdaptiveGamma):
    def choose(self, copied=False, behind=0, remaining=None):
        best = self._best(copied)
        if best == 0:
            self._plain_rounds[copied] += 1
            every = self.explore_every if self.rate(1, copied) >= 0.9 * self.rate(0) else 4 * self.explore_every
            if self._plain_rounds[copied] % every == 0:
                return 1
        return best
if __name__ == "__main__":
    line = lambda k: 1 + 0.35 * (k - 1)
    for a0 in (0.55, 0.6, 0.62):
      for cls in (Old, AdaptiveGamma):
        res = []
        for seed in range(20):
            c = cls(max_gamma=8)
            simulate(c, a0, line, 0.3, rounds=400, seed=seed)
            ch = simulate(c, 0.9, line, 0.3, rounds=32, seed=100 + seed)
            res.append(sum(g == 0 for g in ch))
        print(a0, cls.__name__, sorted(res))
