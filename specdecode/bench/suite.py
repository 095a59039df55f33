"""What a bench run measures, and running it: pass costs, then every method on the same prompts, alternating.

A method is named by a spec string:
    plain            ours, plain decoding on the target's engine        plain-hf   ours, on the transformers engine
    hf               transformers model.generate()                      hf-lookup:N  its prompt lookup (N tokens)
    hf-assisted:D    its assisted generation with draft checkpoint D    spec:D:G   ours with draft D, gamma G or auto
    llama.cpp        llama.cpp's own loop on the GGUF file              llama.cpp-lookup:N  its prompt lookup (N)
    llama-server     llama.cpp's server, default build (bench/llama_server.py), plain
    llama-server-draft:D:N   speculating with draft GGUF D (a named model or a file), n-max N or "default"
    llama-server-ngram       speculating with its n-gram drafts (ngram-simple)
Ours may name its engine: plain@native, spec:D:G@llama.cpp (default: the engine `auto` picks for the target).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..cpu import capability
from ..load import (
    DEFAULT_DRAFTS,
    Target,
    add_prompt_paths,
    load_draft,
    load_target,
    parse_draft,
    resolve_checkpoint,
    target_engine,
)
from ..models.costs import compute_rate, pass_times, read_bandwidth
from ..models.download import NAMED, gguf_file, is_named
from ..models.hf import HFCausalLM, load_hf_model, parse_dtype
from ..models.llama_cpp import binding
from ..prompts import KINDS, Prompt, load_prompts
from ..sampling import SamplingConfig
from .llama_server import LlamaServer, llama_server_method, server_build
from .methods import Method, llama_cpp_generate, ours, transformers_generate
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
    dtype: str = "auto"
    cost_ks: tuple[int, ...] = (1, 2, 4, 8, 16)
    name: str = "default"
    texts: list[str] | None = None  # prompts to use instead of the project's set (the toy knows eight words)
    default_draft: str | None = None  # the draft `specdecode generate` uses by default, as named in the specs


def default_plan(target: str, draft: str, ngram: str | None, eagle: str | None = None) -> Plan:
    """The committed report's run: about 20 minutes on this 2-core CPU. Ours runs on the engine `auto` picks
    (llama.cpp where it is built) and on the native engine (the feature draft's, `eagle`: an EAGLE-3 head directory);
    llama.cpp's and transformers' own loops beside them."""
    engine = target_engine(target)
    native = "@native" if engine != "native" else ""
    tables = [f"spec:bigram:{ngram}:auto"] if ngram else []
    feature = [f"spec:eagle:{eagle}:auto{native}", f"spec:lookup+eagle:{eagle}:auto{native}"] if eagle else []
    return Plan(
        target=target,
        greedy=["plain", "llama.cpp", "llama.cpp-lookup:10", "hf", f"hf-assisted:{draft}", "spec:prompt-lookup:auto",
                *[f"spec:prompt-lookup:{g}" for g in (1, 2, 4)], f"spec:lookup+{draft}:auto",
                f"spec:lookup+{draft}:1", f"spec:{draft}:auto", *tables, f"plain{native}",
                f"spec:lookup+{draft}:auto{native}", f"spec:{draft}:2{native}", *feature],
        sampled=["plain", "llama.cpp", "hf", f"spec:lookup+{draft}:auto", f"spec:lookup+{draft}:auto{native}",
                 *feature[:1]],
        samplings=[SamplingConfig(1.0)],
        default_draft="prompt-lookup" if engine == "llama.cpp" else f"lookup+{draft}",
    )


def named_plan(target: str, draft: str | None = None) -> Plan:
    """A named GGUF target's run (docs/real-pair.md's command, about 10 minutes for 2 prompts a kind here): llama.cpp's
    server plain and speculating with the same draft model at its default settings (its n-gram drafts where the draft
    names no model), ours plain on the native engine and ours with `draft` (default: what `generate` uses, the
    target's named draft or prompt lookup), greedy and at T = 1."""
    draft = draft or NAMED[target].draft or DEFAULT_DRAFTS["other targets"]
    _, model, _ = parse_draft(draft)
    theirs = f"llama-server-draft:{model}:default" if is_named(model) else "llama-server-ngram"
    specs = ["llama-server", theirs, "plain@native", f"spec:{draft}:auto"]
    return Plan(target, greedy=specs, sampled=specs, default_draft=draft)


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


@dataclass(frozen=True)
class MethodSpec:
    """A method spec string, parsed (see the module docstring)."""

    kind: str  # plain, plain-hf, hf, hf-lookup, hf-assisted, llama.cpp, llama.cpp-lookup, spec or llama-server*
    arg: str = ""  # N (lookup tokens), a draft checkpoint (hf-assisted) or a draft name (spec, llama-server-draft)
    gamma: int | str | None = None  # spec: an integer >= 1 or "auto"; llama-server-draft: n-max or "default"
    engine: str | None = None  # ours only: the engine named after @, None for the one `auto` picks

    @classmethod
    def parse(cls, spec: str) -> MethodSpec:
        text, _, engine = spec.partition("@")
        kind, _, rest = text.partition(":")
        if kind not in ("plain", "plain-hf", "hf", "hf-lookup", "hf-assisted", "llama.cpp", "llama.cpp-lookup", "spec",
                        "llama-server", "llama-server-draft", "llama-server-ngram"):
            raise ValueError(f"unknown bench method {spec!r}")
        if kind == "llama-server-draft":
            draft, _, n = rest.rpartition(":")
            if not draft or not (n == "default" or n.isdigit() and int(n) >= 1):
                raise ValueError(f"bench method {spec!r}: write llama-server-draft:DRAFT:N, N an integer >= 1 or "
                                 "default")
            return cls(kind, draft, n if n == "default" else int(n))
        if kind in ("hf-lookup", "llama.cpp-lookup"):
            if rest and not rest.isdigit():
                raise ValueError(f"bench method {spec!r}: the lookup length must be a whole number")
            return cls(kind, rest or "10", engine=engine or None)
        if kind == "spec":
            draft, _, gamma = rest.rpartition(":")
            if not draft or not (gamma == "auto" or gamma.isdigit() and int(gamma) >= 1):
                raise ValueError(f"bench method {spec!r}: write spec:DRAFT:GAMMA, GAMMA an integer >= 1 or auto")
            return cls(kind, draft, gamma if gamma == "auto" else int(gamma), engine or None)
        if kind == "hf-assisted" and not rest:
            raise ValueError(f"bench method {spec!r}: write hf-assisted:DRAFT_DIR")
        return cls(kind, rest, engine=engine or None)


def build_methods(specs: list[str], target_for) -> list[Method]:
    """target_for(engine or None) -> the plan's target on that engine (None: the engine `auto` picks). Every spec is
    parsed before any model is built, so a bad one fails first."""
    methods = []
    for spec in [MethodSpec.parse(s) for s in specs]:
        target = target_for(spec.engine)
        stops = target.tokenizer.stop_token_ids
        if spec.kind == "plain":
            methods.append(ours(f"ours plain ({target.engine})", target.model, None, 0, stops, target.engine))
        elif spec.kind == "plain-hf":
            methods.append(ours("ours plain (transformers)", HFCausalLM(target.transformers_model()), None, 0, stops,
                                "transformers"))
        elif spec.kind == "hf":
            methods.append(transformers_generate("transformers generate", target.transformers_model(), stops))
        elif spec.kind == "hf-lookup":
            methods.append(transformers_generate(f"transformers prompt lookup {spec.arg}", target.transformers_model(),
                                                 stops, prompt_lookup_num_tokens=int(spec.arg)))
        elif spec.kind == "hf-assisted":
            assistant = load_hf_model(resolve_checkpoint(spec.arg), parse_dtype(target.dtype))[0]
            methods.append(transformers_generate("transformers assisted", target.transformers_model(), stops,
                                                 assistant_model=assistant))
        elif spec.kind in ("llama.cpp", "llama.cpp-lookup"):
            gguf = str(target_for("llama.cpp").model.path)
            n = int(spec.arg) if spec.kind == "llama.cpp-lookup" else 0
            methods.append(llama_cpp_generate(f"llama.cpp prompt lookup {n}" if n else "llama.cpp plain", gguf,
                                              stops, torch.get_num_threads(), n))
        elif spec.kind.startswith("llama-server"):
            methods.append(_llama_server(spec, gguf_of(target_for)))
        else:  # spec
            draft = load_draft(spec.arg, target, target.dtype)
            add_prompt_paths(target, draft, long_lived=True)
            methods.append(ours(f"ours {draft_label(draft.name)} gamma {spec.gamma} ({target.engine})", target.model,
                                draft, spec.gamma, stops, target.engine))
    return methods


def gguf_of(target_for) -> Path:
    """The GGUF file the plan's target runs from (as llama.cpp reads it)."""
    return Path(target_for("llama.cpp").model.path)


def _llama_server(spec: MethodSpec, gguf: Path) -> Method:
    """llama-server on the target's GGUF file: plain, speculating with a draft GGUF (a named model or a file; its
    default --spec-draft-n-max, or N), or with its n-gram drafts (ngram-simple)."""
    threads = torch.get_num_threads()
    if spec.kind == "llama-server":
        return llama_server_method("llama-server plain", LlamaServer(gguf, threads))
    if spec.kind == "llama-server-ngram":
        return llama_server_method("llama-server ngram-simple", LlamaServer(gguf, threads, ["--spec-type",
                                   "ngram-simple"]), "ngram-simple")
    draft = gguf_file(spec.arg) if is_named(spec.arg) else Path(spec.arg)
    flags = ["-md", str(draft), "--spec-type", "draft-simple"]
    if spec.gamma != "default":
        flags += ["--spec-draft-n-max", str(spec.gamma)]
    return llama_server_method(f"llama-server draft {draft_label(spec.arg)} n-max {spec.gamma}",
                               LlamaServer(gguf, threads, flags), spec.arg, spec.gamma)


def _prompts(plan: Plan) -> list[Prompt]:
    if plan.texts is not None:
        return [Prompt(f"text-{i}", "text", "given", text) for i, text in enumerate(plan.texts)]
    chosen = []
    for kind in KINDS:
        chosen += load_prompts(plan.split, (kind,))[: plan.prompts_per_kind]
    return chosen


def machine_info(dtype: str) -> dict:
    """The machine a run measures on: CPU and capability, threads, torch, dtype, commit, bandwidth, date."""
    cpu = capability()
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {"cpu": cpu.cpu, "capability": cpu.summary, "flags": list(cpu.flags), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "dtype": dtype,
            "commit": commit, "read_bandwidth_gb_s": read_bandwidth() / 1e9,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def run_plan(plan: Plan, progress: bool = True) -> dict:
    """Every raw figure of one plan, as a JSON-able dict."""
    started = time.perf_counter()
    specs = [MethodSpec.parse(s) for s in plan.greedy + plan.sampled]  # a bad spec fails before any model loads
    if any(s.kind.startswith(("llama.cpp", "llama-server")) or s.engine == "llama.cpp" for s in specs):
        binding()  # the file's llama.cpp reading (its path, its pass costs): a missing binding fails before loading
    target = load_target(plan.target, plan.dtype)
    machine = machine_info(plan.dtype)
    loaded = {target.engine: target}

    def target_for(engine: str | None) -> Target:
        engine = engine or target.engine
        if engine not in loaded:
            loaded[engine] = load_target(plan.target, plan.dtype, engine)
        return loaded[engine]

    samplings = [(SamplingConfig(0), plan.greedy)] + [(s, plan.sampled) for s in plan.samplings]
    built = [(sampling, build_methods(specs, target_for)) for sampling, specs in samplings if specs]
    if any(m.engine == "llama-server" for _, methods in built for m in methods):
        machine["llama_server_build"] = server_build()
    engines = {name: t.model for name, t in loaded.items()}
    if "native" in engines and target.source is not None:
        engines["transformers"] = HFCausalLM(target.transformers_model())
    compute_before = compute_rate() / 1e9
    before = pass_times(engines, plan.cost_ks)
    prompts = _prompts(plan)
    encoded = [(p.id, target.tokenizer.encode(p.prompt)) for p in prompts]
    runs, summaries = [], []
    for sampling, methods in built:
        # Greedy output is compared with ours plain on the same engine (engines differ in numerics, so their texts
        # may differ), where the plan runs one.
        plains = {m.engine: m.name for m in methods if m.family == "ours" and m.draft == "none"}
        reference = {m.name: plains[m.engine] for m in methods if m.engine in plains}
        records = run_alternating(methods, encoded, sampling, plan.max_new_tokens, reference=reference,
                                  progress=progress)
        runs += [r.__dict__ for r in records]
        for m in methods:
            summaries.append(summarize(records, m.name) | {"sampling": sampling.describe(), "family": m.family,
                                                             "draft": m.draft, "gamma": m.gamma, "engine": m.engine})
    # The pass costs are measured before the methods run and again after, and averaged: the machine's speed drifts
    # over a run, and the predictions use them for the decoding in between.
    after = pass_times(engines, plan.cost_ks)
    machine["host_gflops"] = [compute_before, compute_rate() / 1e9]  # (passes of several rows move with it)
    costs = {}
    for name in engines:
        per_k = {k: (before[name][k] + after[name][k]) / 2 for k in plan.cost_ks}
        costs[name] = {"ms": {k: t * 1e3 for k, t in per_k.items()},
                       "ratio": {k: t / per_k[1] for k, t in per_k.items()},
                       "ms_before": {k: t * 1e3 for k, t in before[name].items()},
                       "ms_after": {k: t * 1e3 for k, t in after[name].items()},
                       "weight_bytes": engines[name].weight_bytes,
                       "precision": loaded[name].precision if name in loaded else "bfloat16",
                       "plain_tokens_per_second": 1 / per_k[1]}
        costs[name]["bandwidth_achieved_gb_s"] = costs[name]["weight_bytes"] / per_k[1] / 1e9
        costs[name]["bandwidth_fraction"] = costs[name]["bandwidth_achieved_gb_s"] / machine["read_bandwidth_gb_s"]
    return {"plan": plan.name, "target": target.name, "engine": target.engine, "default_draft": plan.default_draft,
            "machine": machine, "costs": costs,
            "prompts": [p.id for p in prompts], "kinds": {p.id: p.kind for p in prompts},
            "max_new_tokens": plan.max_new_tokens, "methods": summaries, "runs": runs,
            "seconds": time.perf_counter() - started}
