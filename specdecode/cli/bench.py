"""`specdecode bench`: every method side by side on held-out prompts, alternating, with a report under docs/bench/."""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

import torch
from rich.table import Table

from ..bench import clients, clients_report, native_steps
from ..bench import report as reports
from ..bench.accuracy import PromptPath, agreements
from ..bench.suite import Plan, default_plan, machine_info, named_plan, quick_plans, run_plan
from ..cpu import capability
from ..load import SHIPPED_DRAFT, SHIPPED_EAGLE, SHIPPED_NGRAM, add_prompt_paths, load_target, resolve_checkpoint
from ..models.default import DEFAULT_TARGET
from ..models.download import is_named
from ..models.eagle import is_eagle
from ..prompts import load_prompts
from ..sampling import SamplingConfig
from .console import make_console


def add_parser(sub) -> None:
    p = sub.add_parser(
        "bench", help="ours beside llama.cpp (its server and binding, plain and speculating) and transformers, "
        "predicted vs measured speed-ups; or a served load of N clients",
        description="Runs every method on the same held-out prompts, alternating their order prompt by prompt, "
        "after measuring the cost of target passes of k tokens. Writes report.json, report.md and plots.",
        epilog="Method specs for --methods: plain, plain-hf, hf, hf-lookup:N, hf-assisted:DRAFT_DIR, llama.cpp, "
        "llama.cpp-lookup:N, llama-server, llama-server-draft:DRAFT:N, llama-server-ngram (llama.cpp's server, built "
        "on first use), spec:DRAFT:GAMMA (GAMMA an integer or auto; DRAFT as for generate --draft); ours may "
        "name its engine, as plain@native or spec:prompt-lookup:auto@llama.cpp.")
    p.add_argument("--quick", action="store_true", help="a smoke run on the toy pair and a tiny random model (CI)")
    p.add_argument("--engine-steps", action="store_true",
                   help="only the native engine's speed work, step by step (writes native_steps.md)")
    p.add_argument("--out", type=Path, default=Path("docs/bench"), help="report directory (default docs/bench)")
    p.add_argument("--accuracy", action="store_true",
                   help="only the target's agreement with llama.cpp on the same GGUF file, and of both with the "
                   "file's float32 reading, teacher-forced over the held-out prompts (top-1 agreement, mean KL; "
                   "writes accuracy.md)")
    p.add_argument("--target", default=DEFAULT_TARGET)
    p.add_argument("--draft", default=None,
                   help="the suite's draft (default: a named target's own, as `generate` uses it, else the shipped "
                   "draft; with --clients: any draft `specdecode serve --draft` takes, default the server's own)")
    p.add_argument("--ngram", default=str(SHIPPED_NGRAM), help="n-gram table for the bigram / unigram drafts")
    p.add_argument("--eagle", default=str(SHIPPED_EAGLE), help="EAGLE-3 head directory (default: the shipped one)")
    p.add_argument("--methods", default=None, help="comma-separated method specs instead of the suite (greedy, and "
                   "sampled with --temperature)")
    p.add_argument("--temperature", type=float, default=None, metavar="T",
                   help="with --methods: run them sampled at temperature T as well (seeded, the same seed for every "
                   "method)")
    p.add_argument("--prompts-per-kind", type=int, default=2, help="held-out prompts of each of the six kinds (2)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--clients", type=int, default=None, metavar="N",
                   help="only a load run over loopback: N concurrent streaming clients on the held-out prompts "
                   "against `specdecode serve` and, for a GGUF target, llama-server -np N (plain, and with the "
                   "target's named draft), then the same prompts with 1 client (writes clients.json, clients.md)")
    p.add_argument("--request-timeout", type=float, default=300.0,
                   help="with --clients: seconds one request may take (300); each load is capped at its clients' "
                   "shares of requests at this timeout")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError("--threads must be >= 1")
        torch.set_num_threads(args.threads)
    if args.prompts_per_kind < 1 or args.max_new_tokens < 1:
        raise ValueError("--prompts-per-kind and --max-new-tokens must be >= 1")
    if args.temperature is not None and (not args.methods or not args.temperature > 0):
        raise ValueError("--temperature takes a number > 0 and goes with --methods (the suite samples at 1.0)")
    command = "specdecode " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["bench"] else "specdecode bench"
    if args.clients is not None:
        return _clients(args, command)
    if args.engine_steps:
        return _engine_steps(args, command)
    if args.accuracy:
        return _accuracy(args, command)
    with tempfile.TemporaryDirectory() as scratch:
        if args.quick:
            plans = quick_plans(Path(scratch))
        elif args.methods:
            specs = [m.strip() for m in args.methods.split(",")]
            plans = [Plan(args.target, greedy=specs, sampled=specs if args.temperature else [],
                          samplings=[SamplingConfig(args.temperature or 1.0)], name="custom")]
        else:
            ngram = args.ngram if Path(args.ngram).is_file() else None
            eagle = args.eagle if is_eagle(Path(args.eagle)) else None
            plans = [named_plan(args.target, args.draft) if is_named(args.target) else
                     default_plan(args.target, args.draft or str(SHIPPED_DRAFT), ngram, eagle)]
        for plan in plans:
            plan.prompts_per_kind = min(plan.prompts_per_kind, args.prompts_per_kind) if args.quick \
                else args.prompts_per_kind
            plan.max_new_tokens = min(plan.max_new_tokens, args.max_new_tokens) if args.quick \
                else args.max_new_tokens
            report = reports.add_predictions(run_plan(plan))
            out = args.out / plan.name if len(plans) > 1 else args.out
            written = reports.write(report, out, command)
            _print(report)
            print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def _print(report: dict) -> None:
    console = make_console()
    for name, c in report["costs"].items():
        cells = ", ".join(f"k={k} {v:.1f} ms" for k, v in c["ms"].items())
        console.print(f"{name}: {cells}; plain {c['plain_tokens_per_second']:.1f} tok/s, bandwidth "
                      f"{c['bandwidth_achieved_gb_s']:.1f} GB/s ({c['bandwidth_fraction']:.0%} of "
                      f"{report['machine']['read_bandwidth_gb_s']:.1f})", markup=False)
    table = Table("sampling", "method", "tokens/s", "vs llama.cpp", "vs llama-server", "vs generate", "tokens/call",
                  "alpha", "measured",
                  "predicted", "identical", title=f"{report['target']}, {report['machine']['dtype']}, "
                  f"{report['machine']['threads']} threads")
    for m in report["methods"]:
        table.add_row(m["sampling"], m["method"], f"{m['tokens_per_second']:.1f}",
                      reports.fmt(m.get("speedup_vs_llama_cpp"), ".2f", "x"),
                      reports.fmt(m.get("speedup_vs_llama_server"), ".2f", "x"),
                      reports.fmt(m.get("speedup_vs_generate"), ".2f", "x"), reports.fmt(m["tokens_per_target_call"]),
                      reports.fmt(m["alpha"]), reports.fmt(m.get("measured_speedup"), ".2f", "x"),
                      reports.fmt(m.get("predicted_speedup"), ".2f", "x"), m["identical"] or "")
    console.print(table)


def _clients(args: argparse.Namespace, command: str) -> int:
    if args.clients < 1:
        raise ValueError(f"--clients must be >= 1, got {args.clients}")
    if others := [flag for flag, on in (("--quick", args.quick), ("--methods", args.methods), ("--engine-steps",
                  args.engine_steps), ("--accuracy", args.accuracy)) if on]:
        raise ValueError(f"--clients is a run of its own: drop {', '.join(others)}")
    if not 0 < args.request_timeout < float("inf"):
        raise ValueError(f"--request-timeout must be a number of seconds > 0, got {args.request_timeout}")
    console = make_console()
    report = clients.run_clients(args.target, args.draft, args.clients,
                                 clients.bench_prompts(args.target, args.prompts_per_kind), args.max_new_tokens,
                                 torch.get_num_threads(), args.request_timeout, _serve_flags(args.clients),
                                 say=lambda line: console.print(line, markup=False))
    report |= {"machine": machine_info("auto"), "command": command}
    if any(m["method"].startswith("llama-server") for m in report["methods"]):
        from ..bench.llama_server import server_build

        report["machine"]["llama_server_build"] = server_build()
    written = clients_report.write(report, args.out)
    console.print(clients_report.markdown(report), markup=False)
    for line in clients_report.warnings(report):
        console.print(line, style="bold red", markup=False)
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def _serve_flags(clients: int) -> list[str]:
    """`specdecode serve` flags for N clients that this checkout's serve has: --sequences N (requests generating at
    once) where it exists."""
    from . import serve

    sub = argparse.ArgumentParser().add_subparsers()
    serve.add_parser(sub)
    flags = ["--sequences", str(clients)]
    return flags if not sub.choices["serve"].parse_known_args(flags)[1] else []


def _engine_steps(args: argparse.Namespace, command: str) -> int:
    if is_named(args.target):
        raise ValueError(f"--engine-steps takes a transformers checkpoint (its steps are bf16 and int8 formats); "
                         f"{args.target} is a GGUF model: `specdecode info --target {args.target}` measures its T(k)")
    times = native_steps.measure(resolve_checkpoint(args.target))
    ks = list(next(iter(times.values())))
    lines = [f"# Native engine, step by step: {args.target}", "", f"Command: `{command}`; {capability().summary}; "
             f"{torch.get_num_threads()} threads; median of 9 passes after 64 cached tokens, configurations "
             "alternating. T(k) = one pass of k new tokens.", "",
             "| configuration | " + " | ".join(f"T({k})" for k in ks) + " | T(8)/T(1) | plain tok/s (1/T(1)) |",
             "|---" * (len(ks) + 3) + "|"]
    for name, per_k in times.items():
        lines.append(f"| {name} | " + " | ".join(f"{per_k[k] * 1e3:.1f} ms" for k in ks) +
                     f" | {per_k[8] / per_k[1]:.2f} | {1 / per_k[1]:.1f} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "native_steps.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def _accuracy(args: argparse.Namespace, command: str) -> int:
    target, reference = load_target(args.target), load_target(args.target, engine="llama.cpp")
    if reference.engine != "llama.cpp":
        raise ValueError(f"--accuracy compares with llama.cpp on the target's GGUF file, which {args.target} is not")
    if target.engine == "llama.cpp":
        raise ValueError("--accuracy compares a torch engine with llama.cpp: this target runs on llama.cpp already")
    models = {"ours": target.model, "llama.cpp": reference.model}
    if target.gguf is not None:  # the file's own model: its blocks dequantised to float32, float activations
        models["float32"] = load_target(args.target, dtype="float32", engine="native").model
    if add_prompt_paths(target, None, long_lived=True):  # (where this CPU gives the native engine one)
        models["prompt path"] = PromptPath(target.model)
    pairs = [(name, "llama.cpp") for name in ("ours", "prompt path") if name in models]
    if "float32" in models:
        pairs += [(name, "float32") for name in ("ours", "prompt path", "llama.cpp") if name in models]
    texts = [target.tokenizer.encode(p.prompt) for p in load_prompts("test")]
    results = agreements(models, pairs, texts)
    first = results[pairs[0]]
    names = {"ours": f"ours ({target.engine}, {target.precision})", "llama.cpp": "llama.cpp",
             "float32": "the file's float32 reading",
             "prompt path": f"ours, prompt rows ({getattr(target.model, 'prompt_format', None)} prompt path)"}
    lines = [f"# Accuracy: {target.name} on {target.engine} ({target.precision}) against llama.cpp", "",
             f"Command: `{command}`; {capability().summary}; {torch.get_num_threads()} threads. Teacher-forced over "
             f"the {first['texts']} held-out prompts, chat-templated: {first['positions']} positions (each "
             "text's first left out: bench/accuracy.py). The float32 reading (a GGUF target) holds the file's "
             "weights exactly and computes in float32: the model both engines approximate.", "",
             "| reading | against | top-1 agreement | mean KL(against ‖ reading) |", "|---|---|---|---|"]
    lines += [f"| {names[ours]} | {names[against]} | {r['top1_agreement']:.2%} | {r['mean_kl']:.5f} nats |"
              for (ours, against), r in results.items()]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "accuracy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
