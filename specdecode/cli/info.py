"""`specdecode info`: what this CPU offers, which engine and weight format run the target and why, the named models
a command can take, and what a pass of k tokens costs on each engine here (the T(k) that adaptive gamma and the bench
work from)."""

from __future__ import annotations

import argparse
import json

import torch
from rich.table import Table

from ..cpu import VARIABLE, capability
from ..load import check_target, gguf_format, load_target, target_engine
from ..models import llama_cpp
from ..models.costs import pass_times
from ..models.default import DEFAULT_TARGET
from ..models.download import NAMED, in_cache, is_named
from ..models.kernels import kernel_isa
from ..models.linear import best_format
from .console import make_console

KS = (1, 2, 4, 8, 16)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "info", help="this CPU's capability, the engine and weight format chosen and why, and measured T(k)",
        description="Prints the CPU's capability as torch and oneDNN see it, the engine and weight format that run "
        "the target here and why, whether llama.cpp is available, the named models (fetched from PyPI on first use) "
        "and whether each is in the cache, and the measured time of a target pass of k = "
        f"{', '.join(map(str, KS))} tokens on each engine. {VARIABLE}=avx2 forces the AVX2 path on any x86 CPU.")
    p.add_argument("--target", default=DEFAULT_TARGET, help="the target to measure (default: the embedded SmolLM2)")
    p.add_argument("--no-measure", action="store_true", help="skip the T(k) measurement")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    check_target(args.target)
    cpu = capability()
    fmt = best_format(cpu)
    why = ("the CPU has native bf16 matmuls: prepacked bf16 through oneDNN, batch invariant" if fmt == "bf16-onednn"
           else "no native bf16 matmuls: int8 weights with bf16 activations, the fastest batch-invariant format "
           "measured on AVX2")
    if is_named(args.target):  # a GGUF file read into the native engine (load.gguf_format)
        fmt = gguf_format("auto")
        why = (f"a GGUF file: its Q4_K and Q6_K blocks as they are, against int8 activations, in our kernel's "
               f"{kernel_isa(cpu)} path (docs/real-pair.md)" if fmt == "int4-dot8" else
               "a GGUF file, no int4-dot8 kernel here: its Q4_K blocks as int4 as they are, finer types as int8")
    report = {"cpu": cpu.cpu, "flags": list(cpu.flags), "torch_kernels": cpu.isa, "native_bf16": cpu.bf16_matmul,
              "forced": cpu.forced, "kernel_path": kernel_isa(cpu), "threads": torch.get_num_threads(),
              "torch": torch.__version__,
              "engine": target_engine(args.target), "native_format": fmt, "native_format_why": why,
              "llama_cpp": _llama_cpp_version(), "models": _named_models(), "pass_ms": {}}
    if not args.no_measure:
        models = {"native": load_target(args.target, engine="native").model}
        if not is_named(args.target):  # a named GGUF model has no transformers checkpoint
            models["transformers"] = load_target(args.target, engine="transformers").model
        if report["llama_cpp"] and (args.target == DEFAULT_TARGET or is_named(args.target)):
            models["llama.cpp"] = load_target(args.target, engine="llama.cpp").model
        times = pass_times(models, KS, repeats=5)
        report["pass_ms"] = {name: {k: t * 1e3 for k, t in per_k.items()} for name, per_k in times.items()}
    if args.json:
        print(json.dumps(report))
        return 0
    console = make_console()
    console.print(f"CPU: {cpu.summary}")
    console.print(f"flags: {' '.join(cpu.flags) or 'none of interest'}; {report['threads']} threads; torch "
                  f"{torch.__version__}")
    console.print(f"engine for {args.target}: {report['engine']}; native weight format: {fmt} ({why})")
    console.print(f"llama.cpp: {report['llama_cpp'] or 'not available'}")
    models = Table(title=f"named models (--target / --draft NAME; without --target: the embedded {DEFAULT_TARGET})")
    for column in ("name", "model", "role", "GB", "licence", "from PyPI", "default draft", "in cache"):
        models.add_column(column, justify="right" if column == "GB" else "left")
    for m in report["models"]:
        models.add_row(m["name"], m["model"], m["role"], f"{m['bytes'] / 1e9:.2f}", m["licence"], m["packages"],
                       m["default_draft"] or "", "yes" if m["in_cache"] else "no (fetched on first use)")
    console.print(models)
    if report["pass_ms"]:
        table = Table(title="T(k): one target pass of k new tokens (median ms, after a 64-token context)")
        table.add_column("engine")
        for k in KS:
            table.add_column(f"k={k}", justify="right")
        for name, per_k in report["pass_ms"].items():
            table.add_row(name, *(f"{per_k[k]:.1f} ({per_k[k] / per_k[1]:.2f}x)" for k in KS))
        console.print(table)
    return 0


def _named_models() -> list[dict]:
    """Each named model (models/download.py): what it is, where it comes from, and whether it is fetched yet."""
    return [{"name": s.name, "model": s.display, "role": s.role, "bytes": s.size, "licence": s.licence,
             "packages": f"{s.package}-part1..{s.parts} {s.version}", "default_draft": s.draft,
             "in_cache": in_cache(s.name)} for s in NAMED.values()]


def _llama_cpp_version() -> str | None:
    try:
        return f"llama-cpp-python {llama_cpp.binding().__version__}"
    except llama_cpp.MissingBinding:
        return None
