"""`specdecode generate`: speculative decoding of a prompt, with the stats of the run."""

from __future__ import annotations

import argparse

from rich.console import Console

from ..engine import Generation
from ..sampling import SamplingConfig
from ..toy import ToyTokenizer, bigram_pair


def add_parser(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="generate text with speculative decoding and print the run's stats",
        description="Generate a continuation of PROMPT with speculative decoding. The stats line compares target "
        "calls with tokens produced. Example: specdecode generate --target toy 'the cat'",
    )
    p.add_argument("prompt", nargs="?", default="the", help="the text to continue (default: 'the')")
    p.add_argument("--target", default="toy", help="the target model: 'toy' (the eight-word bigram pair)")
    p.add_argument("--max-new-tokens", type=int, default=40, help="tokens to generate (default 40)")
    p.add_argument("--gamma", type=int, default=5, help="drafts per round, >= 1 (default 5)")
    p.add_argument("--temperature", type=float, default=1.0, help="0 means greedy (default 1.0)")
    p.add_argument("--top-k", type=int, default=None, help="keep the k most likely tokens")
    p.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass in (0, 1]")
    p.add_argument("--seed", type=int, default=None, help="random seed for a reproducible run")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.target != "toy":
        raise ValueError(f"unknown target {args.target!r}: only 'toy' is available")
    sampling = SamplingConfig(args.temperature, args.top_k, args.top_p)
    tokenizer = ToyTokenizer()
    target, draft = bigram_pair()
    generation = Generation(target, draft, tokenizer.encode(args.prompt), args.max_new_tokens, args.gamma,
                            sampling, args.seed)
    result = generation.run()
    console = Console(highlight=False, soft_wrap=True)
    console.print(args.prompt + " " + tokenizer.decode(result.new_tokens))
    s = result.stats
    alpha = f"{s.alpha:.2f}" if s.alpha is not None else "n/a"
    console.print(f"[dim]{s.new_tokens} new tokens in {s.target_calls} target calls "
                  f"({s.tokens_per_target_call:.2f} tokens per target call), alpha {alpha}, "
                  f"{s.tokens_per_second:.0f} tokens/s[/dim]")
    return 0
