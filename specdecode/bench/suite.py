"""What a bench run measures, and running it: pass costs, then every method on the same prompts, alternating.

A method is named by a spec string:
    plain            ours, plain decoding on the target's engine        plain-hf   ours, on the transformers engine
    hf               transformers model.generate()                      hf-lookup:N  its prompt lookup (N tokens)
    hf-assisted:D    its assisted generation with draft checkpoint D    spec:D:G   ours with draft D, gamma G or auto
"""

from __future__ import annotations

import platform
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..load import Target, load_draft, load_target, resolve_checkpoint
from ..models.hf import HFCausalLM, load_hf_model, parse_dtype
from ..prompts import KINDS, Prompt, load_prompts
from ..sampling import SamplingConfig
from .costs import pass_times, read_bandwidth, weight_bytes
from .methods import Method, ours, transformers_generate
from .report import draft_label
from .runner import run_alternating, summarize


@dataclass
class Plan:
    target: str
    greedy: list[str]  # method specs run with greedy decoding
    sampled: list[str]  # method specs run with each of `samplings`
    samplings: list[SamplingConfig] = field(default_factory=lambda: [SamplingConfig(1.0)])
    prompts_per_kind: int = 2
    split: str = "test"
    max_new_tokens: int = 64
    dtype: str = "bfloat16"
    cost_ks: tuple[int, ...] = (1, 2, 4, 8, 16)
    name: str = "default"
    texts: list[str] | None = None  # prompts to use instead of the project's set (the toy knows eight words)


def default_plan(target: str, draft: str, ngram: str | None) -> Plan:
    """The committed report's run: about 15 minutes on this 2-core CPU."""
    fixed = [f"spec:{draft}:{g}" for g in (1, 2, 3, 4, 6, 8)]
    tables = [f"spec:bigram:{ngram}:2", f"spec:bigram:{ngram}:auto", f"spec:unigram:{ngram}:1"] if ngram else []
    return Plan(
        target=target,
        greedy=["plain", "plain-hf", "hf", f"hf-assisted:{draft}", "hf-lookup:10", *fixed, f"spec:{draft}:auto",
                "spec:prompt-lookup:auto", "spec:prompt-lookup:4", f"spec:lookup+{draft}:auto",
                f"spec:lookup+{draft}:2", *tables],
        sampled=["plain", "hf", f"hf-assisted:{draft}", f"spec:{draft}:auto", f"spec:{draft}:3",
                 f"spec:lookup+{draft}:auto"],
        samplings=[SamplingConfig(1.0), SamplingConfig(1.0, top_p=0.9)],
    )


def quick_plans(directory: Path) -> list[Plan]:
    """CI smoke runs: the toy pair, and a tiny random Llama pair that exercises every transformers method."""
    from .tiny import tiny_pair

    target, draft = tiny_pair(directory, [p.prompt for p in load_prompts()])
    toy = Plan("toy", greedy=["plain", "spec:toy:2", "spec:toy:auto"], sampled=["plain", "spec:toy:auto"],
               prompts_per_kind=1, max_new_tokens=12, cost_ks=(1, 2, 4), name="toy",
               texts=["the cat", "the dog sat on", "the fish", "on the"])
    tiny = Plan(str(target), greedy=["plain", "plain-hf", "hf", f"hf-assisted:{draft}", "hf-lookup:4",
                                     f"spec:{draft}:2", f"spec:{draft}:auto", "spec:prompt-lookup:auto"],
                sampled=["plain", "hf", f"spec:{draft}:auto"], prompts_per_kind=1, max_new_tokens=12,
                dtype="float32", cost_ks=(1, 2, 4), name="tiny-random-llama")
    return [toy, tiny]


def build_methods(specs: list[str], target: Target) -> list[Method]:
    stops = target.tokenizer.stop_token_ids
    methods = []
    for spec in specs:
        kind, _, rest = spec.partition(":")
        if kind == "plain":
            methods.append(ours(f"ours plain ({target.engine})", target.model, None, 0, stops, target.engine))
        elif kind == "plain-hf":
            methods.append(ours("ours plain (transformers)", HFCausalLM(target.transformers_model()), None, 0, stops,
                                "transformers"))
        elif kind == "hf":
            methods.append(transformers_generate("transformers generate", target.transformers_model(), stops))
        elif kind == "hf-lookup":
            methods.append(transformers_generate(f"transformers prompt lookup {rest or 10}",
                                                 target.transformers_model(), stops,
                                                 prompt_lookup_num_tokens=int(rest or 10)))
        elif kind == "hf-assisted":
            assistant = load_hf_model(resolve_checkpoint(rest), parse_dtype(target.dtype))[0]
            methods.append(transformers_generate("transformers assisted", target.transformers_model(), stops,
                                                 assistant_model=assistant))
        elif kind == "spec":
            draft_spec, _, gamma = rest.rpartition(":")
            draft = load_draft(draft_spec, target, target.dtype)
            methods.append(ours(f"ours {draft_label(draft.name)} gamma {gamma}", target.model, draft,
                                gamma if gamma == "auto" else int(gamma), stops, target.engine))
        else:
            raise ValueError(f"unknown bench method {spec!r}")
    return methods


def _prompts(plan: Plan) -> list[Prompt]:
    if plan.texts is not None:
        return [Prompt(f"text-{i}", "text", "given", text) for i, text in enumerate(plan.texts)]
    chosen = []
    for kind in KINDS:
        chosen += load_prompts(plan.split, (kind,))[: plan.prompts_per_kind]
    return chosen


def _machine(dtype: str) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {"cpu": cpu, "threads": torch.get_num_threads(), "torch": torch.__version__, "dtype": dtype,
            "commit": commit, "read_bandwidth_gb_s": read_bandwidth() / 1e9,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def run_plan(plan: Plan, progress: bool = True) -> dict:
    """Every raw figure of one plan, as a JSON-able dict."""
    started = time.perf_counter()
    target = load_target(plan.target, plan.dtype)
    machine = _machine(plan.dtype)
    engines = {target.engine: target.model}
    if target.engine == "native":
        engines["transformers"] = HFCausalLM(target.transformers_model())
    times = pass_times(engines, plan.cost_ks)
    costs = {name: {"ms": {k: t * 1e3 for k, t in per_k.items()},
                    "ratio": {k: t / per_k[1] for k, t in per_k.items()},
                    "weight_bytes": weight_bytes(engines[name]),
                    "plain_tokens_per_second": 1 / per_k[1]} for name, per_k in times.items()}
    for c in costs.values():
        c["bandwidth_achieved_gb_s"] = c["weight_bytes"] * c["plain_tokens_per_second"] / 1e9
        c["bandwidth_fraction"] = c["bandwidth_achieved_gb_s"] / machine["read_bandwidth_gb_s"]

    prompts = _prompts(plan)
    encoded = [(p.id, target.tokenizer.encode(p.prompt)) for p in prompts]
    runs, summaries = [], []
    for sampling, specs in [(SamplingConfig(0), plan.greedy)] + [(s, plan.sampled) for s in plan.samplings]:
        if not specs:
            continue
        methods = build_methods(specs, target)
        records = run_alternating(methods, encoded, sampling, plan.max_new_tokens, reference=methods[0].name,
                                  progress=progress)
        runs += [r.__dict__ for r in records]
        for m in methods:
            summaries.append(summarize(records, m.name) | {"sampling": sampling.describe(), "family": m.family,
                                                             "draft": m.draft, "gamma": m.gamma, "engine": m.engine})
    return {"plan": plan.name, "target": target.name, "engine": target.engine, "machine": machine, "costs": costs,
            "prompts": [p.id for p in prompts], "max_new_tokens": plan.max_new_tokens, "methods": summaries,
            "runs": runs, "seconds": time.perf_counter() - started}
