# Texts of different alpha one after another (as the bench's prompts, two of each kind), one AdaptiveGamma across
# them: throughput (tokens per T(1)) with the alpha counts carried whole ("now") or cut to W decisions at each new
# text; i.i.d. acceptance, verify line 1 + 0.27 (k - 1), a draft pass 0.355 of T(1), 64 tokens a text, 200 seeds.
# Run from the repository root: .venv/bin/python docs/bench/draft-probes/controller_memory.py [shuffled]
import random, statistics, sys
from specdecode.adaptive import AdaptiveGamma
SLOPE, C = 0.27, 0.355
line = lambda k: 1 + SLOPE * (k - 1)
class Cut(AdaptiveGamma):
    W = 8
    def new_text(self):
        n = self._accepted + self._rejected
        if n > self.W:
            self._accepted, self._rejected = self._accepted * self.W / n, self._rejected * self.W / n
def run(make, alphas, tokens_per_text, seed):
    rng = random.Random(seed); c = make(); tok = tm = 0.0; per = []
    for alpha in alphas:
        if hasattr(c, "new_text"): c.new_text()
        t0, m0, n = tok, tm, 0
        while n < tokens_per_text:
            g = c.choose(); a = 0
            while a < g and rng.random() < alpha: a += 1
            c.update(g, a, line(g + 1), g * C, g)
            n += a + 1; tok += a + 1; tm += line(g + 1) + C * g
        per.append((tok - t0) / (tm - m0))
    return tok / tm, per
kinds = [0.75, 0.75, 0.9, 0.9, 0.88, 0.88, 0.8, 0.8, 0.6, 0.6, 0.88, 0.88]
if len(sys.argv) > 1 and sys.argv[1] == "shuffled":
    order = lambda s: random.Random(s).sample(kinds, len(kinds))
else:
    order = lambda s: kinds
res = {}
for name, make in [("now", lambda: AdaptiveGamma(max_gamma=8))] + [(f"cut{w}", (lambda w: lambda: type(f"Cut{w}", (Cut,), {"W": w})(max_gamma=8))(w)) for w in (4, 8, 12, 16)]:
    out = [run(make, order(s) * 3, 64, s) for s in range(200)]
    res[name] = statistics.mean(o[0] for o in out)
    perkind = [statistics.mean(o[1][i] for o in out) for i in range(12)]
    print(f"{name:6s} {res[name]:.4f} {res[name]/res['now']:.4f} per text (first pass of 12): " + " ".join(f"{x:.3f}" for x in perkind), flush=True)
