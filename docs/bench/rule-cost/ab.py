# The cost of the rule and of the draft's sampling on the real pair: the working tree's rule, sampling and draft
# proposals (`ModelDraft.propose`) against those of an earlier commit, in one process, alternating prompt by prompt
# (order rotated), the same seeds. From the repository root, nothing else running:
#   .venv/bin/python docs/bench/rule-cost/ab.py BASE_COMMIT [PROMPTS_PER_KIND] [TEMPERATURES, e.g. 0,1]
# Prints, per sampling, variant and method (plain; the default lookup+0.5B draft, gamma auto), tokens/s with the
# prefill, the time in the engine's `_judge` per round, and how many outputs equal the base's.
import subprocess, sys, time, types
from collections import defaultdict

import torch

import specdecode.drafts.base as base
import specdecode.drafts.model as draft_model
import specdecode.engine as engine
from specdecode.adaptive import AdaptiveGamma
from specdecode.bench.clients import bench_prompts
from specdecode.load import default_draft, load_draft, load_target
from specdecode.sampling import SamplingConfig


def module_at(commit: str, path: str, name: str, *replace: tuple[str, str]) -> types.ModuleType:
    source = subprocess.run(["git", "show", f"{commit}:{path}"], capture_output=True, text=True, check=True).stdout
    for old, new in replace:
        source = source.replace(old, new)
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, f"{commit}:{path}", "exec"), module.__dict__)
    return module


commit = sys.argv[1]
per_kind = int(sys.argv[2]) if len(sys.argv) > 2 else 1
old_sampling = module_at(commit, "specdecode/sampling.py", "old_sampling")
old_rule = module_at(commit, "specdecode/rule.py", "old_rule", ("from .sampling import", "from old_sampling import"))
old_draft = module_at(commit, "specdecode/drafts/model.py", "old_draft", ("from ..", "from specdecode."),
                      ("from .base", "from specdecode.drafts.base"))
old_draft.__dict__.update(adjust=old_sampling.adjust, sample=old_sampling.sample)


def old_one_hot(tokens, vocab_size):
    ids = torch.tensor(tokens, dtype=torch.int64)
    return base.Proposal(ids, torch.nn.functional.one_hot(ids, vocab_size).to(torch.float32))


new = {"adjust": engine.adjust, "verify": engine.verify, "sample": draft_model.sample, "one_hot": base.Proposal.one_hot,
       "propose": draft_model.ModelDraft.propose}
old = {"adjust": old_sampling.adjust, "verify": old_rule.verify, "sample": old_sampling.sample, "one_hot": old_one_hot,
       "propose": old_draft.ModelDraft.propose}
spent = defaultdict(float)


def use(functions: dict) -> None:
    engine.adjust, engine.verify = functions["adjust"], functions["verify"]
    draft_model.adjust, draft_model.sample = functions["adjust"], functions["sample"]
    base.Proposal.one_hot = staticmethod(functions["one_hot"])
    draft_model.ModelDraft.propose = functions["propose"]


judge = engine.Generation._judge


def timed_judge(self, logits, proposal):
    started = time.perf_counter()
    result = judge(self, logits, proposal)
    spent["judge"] += time.perf_counter() - started
    return result


engine.Generation._judge = timed_judge
torch.set_num_threads(2)
target = load_target("qwen2.5-coder-1.5b")
draft = load_draft(default_draft(target), target)
temperatures = [float(t) for t in (sys.argv[3] if len(sys.argv) > 3 else "1").split(",")]
variants = {"base": old, "tree": new}
controllers = {(v, m, t): AdaptiveGamma.for_target(target.model) for v in variants for m in ("plain", "spec")
               for t in temperatures}
totals = defaultdict(lambda: [0.0, 0, 0.0, 0])  # seconds, tokens, judge seconds, rounds
outputs = defaultdict(list)
for i, prompt in enumerate(bench_prompts("qwen2.5-coder-1.5b", per_kind)):
    ids = target.tokenizer.encode_chat([{"role": "user", "content": prompt.prompt}])
    names = list(variants)[i % 2:] + list(variants)[: i % 2]
    for temperature, method in [(t, m) for t in temperatures for m in ("plain", "spec")]:
        sampling = SamplingConfig(temperature)
        for name in names:
            use(variants[name])
            target.model.clear()
            draft.clear()
            spent.clear()
            g = engine.Generation(target.model, draft if method == "spec" else None, ids, max_new_tokens=64,
                                  gamma=controllers[name, method, temperature] if method == "spec" else 0, sampling=sampling,
                                  seed=i, stop_token_ids=target.tokenizer.stop_token_ids)
            g.run()
            total = totals[name, method, temperature]
            total[0] += g.stats.seconds
            total[1] += g.stats.new_tokens
            total[2] += spent["judge"]
            total[3] += g.stats.rounds
            outputs[name, method, temperature].append(list(g.new_tokens))
    print(prompt.id, flush=True)
use(new)
for temperature, method in [(t, m) for t in temperatures for m in ("plain", "spec")]:
    rates = {}
    for name in variants:
        seconds, tokens, judged, rounds = totals[name, method, temperature]
        rates[name] = tokens / seconds
        same = sum(a == b for a, b in zip(outputs[name, method, temperature], outputs["base", method, temperature]))
        print(f"T = {temperature:g}, {method}, {name} ({commit if name == 'base' else 'working tree'}): "
              f"{tokens / seconds:.2f} tokens/s ({tokens} tokens, {seconds:.1f} s), rule {judged / rounds * 1e3:.2f} ms "
              f"a round over {rounds} rounds, output equal to base's on {same}/{len(outputs[name, method, temperature])}")
    print(f"T = {temperature:g}, {method}: working tree / base = {rates['tree'] / rates['base']:.3f}")
