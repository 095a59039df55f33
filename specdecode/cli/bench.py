"""`specdecode bench`: methods side by side on the project's prompts, alternating, same machine and threads."""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch
from rich.table import Table

from ..bench.methods import Method, ours, transformers_generate
from ..bench.runner import run_alternating, summarize
from ..load import load_draft, load_target, resolve_checkpoint
from ..models.default import DEFAULT_TARGET
from ..models.hf import HFCausalLM, load_hf_model, parse_dtype
from ..prompts import KINDS, load_prompts
from ..sampling import SamplingConfig
from .console import make_console

DEFAULT_METHODS = "plain,hf,hf-lookup:10,spec:prompt-lookup:5"


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="compare methods side by side (ours vs transformers' generate)",
                       description="Run each method on the same prompts, alternating the order prompt by prompt. "
                       "Methods: plain (ours), hf (transformers generate), hf-lookup:N (its prompt lookup), "
                       "hf-assisted:DIR (its assisted generation), spec:DRAFT:GAMMA (ours).")
    p.add_argument("--target", default=DEFAULT_TARGET)
    p.add_argument("--methods", default=DEFAULT_METHODS, help=f"comma-separated (default {DEFAULT_METHODS})")
    p.add_argument("--kinds", default=",".join(KINDS), help="prompt kinds to use")
    p.add_argument("--split", default="test", choices=["dev", "test", "all"])
    p.add_argument("--limit", type=int, default=None, help="at most this many prompts per kind")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", type=Path, default=None, help="also write every raw figure to this JSON file")
    p.set_defaults(run=run)


def _methods(spec: str, target, dtype: str) -> list[Method]:
    stops = target.tokenizer.stop_token_ids
    methods = []
    for item in spec.split(","):
        kind, _, rest = item.strip().partition(":")
        if kind == "plain":
            methods.append(ours(f"ours plain ({target.engine})", target.model, None, 0, stops, target.engine))
        elif kind == "plain-hf":
            methods.append(ours("ours plain (transformers)", HFCausalLM(target.transformers_model()), None, 0, stops,
                                "transformers"))
        elif kind == "hf":
            methods.append(transformers_generate("transformers generate", target.transformers_model(), stops))
        elif kind == "hf-lookup":
            n = int(rest or 10)
            methods.append(transformers_generate(f"transformers prompt lookup {n}", target.transformers_model(),
                                                 stops, prompt_lookup_num_tokens=n))
        elif kind == "hf-assisted":
            assistant = load_hf_model(resolve_checkpoint(rest), parse_dtype(dtype))[0]
            methods.append(transformers_generate("transformers assisted", target.transformers_model(), stops,
                                                 assistant_model=assistant))
        elif kind == "spec":
            draft_name, _, gamma = rest.rpartition(":")
            draft = load_draft(draft_name, target, dtype)
            methods.append(ours(f"ours {draft.name} gamma {gamma}", target.model, draft,
                                gamma if gamma == "auto" else int(gamma), stops, target.engine))
        else:
            raise ValueError(f"unknown bench method {item!r}")
    return methods


def run(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    sampling = SamplingConfig(args.temperature, None, args.top_p)
    kinds = tuple(k.strip() for k in args.kinds.split(","))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown prompt kind {unknown[0]!r}: choose from {', '.join(KINDS)}")
    prompts = []
    for kind in kinds:
        chosen = load_prompts(None if args.split == "all" else args.split, (kind,))
        prompts += chosen[: args.limit] if args.limit else chosen
    target = load_target(args.target, args.dtype)
    methods = _methods(args.methods, target, args.dtype)
    encoded = [(p.id, target.tokenizer.encode(p.prompt)) for p in prompts]
    records = run_alternating(methods, encoded, sampling, args.max_new_tokens, reference=methods[0].name)
    summaries = [summarize(records, m.name) for m in methods]
    base = next((s for s in summaries if s["method"] == "transformers generate"), summaries[0])
    table = Table("method", "tokens/s", f"vs {base['method']}", "tokens/call", "alpha", "greedy identical",
                  title=f"{target.name}, {args.dtype}, {torch.get_num_threads()} threads, {sampling.describe()}, "
                  f"{len(prompts)} prompts x {args.max_new_tokens} tokens")
    for s in summaries:
        table.add_row(s["method"], f"{s['tokens_per_second']:.1f}",
                      f"{s['tokens_per_second'] / base['tokens_per_second']:.2f}x",
                      f"{s['tokens_per_target_call']:.2f}" if s["tokens_per_target_call"] else "",
                      f"{s['alpha']:.2f}" if s["alpha"] is not None else "", s["identical"] or "")
    make_console().print(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "command": "specdecode bench " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                                                      if k not in ("run", "command") and v is not None),
            "machine": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
            "dtype": args.dtype, "summaries": summaries, "records": [r.__dict__ for r in records]}, indent=1))
    return 0
