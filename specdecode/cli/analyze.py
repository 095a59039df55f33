"""`specdecode analyze`: the paper's formulas (sections 2.3 and 3.1-3.5) for numbers you choose."""

from __future__ import annotations

import argparse

import torch
from rich.console import Console
from rich.table import Table

from .. import analysis
from ..rule import keep_probability, output_distribution, residual
from .console import make_console


def add_parser(sub) -> None:
    p = sub.add_parser(
        "analyze",
        help="the paper's arithmetic: tokens per target call, speed-up, extra work, best gamma",
        description="Evaluate the paper's formulas. With --p and --q, also walk through the rule on one pair of "
        "probability lists (paper 2.3). Example: specdecode analyze --alpha 0.8 --gamma 5 --c 0.05",
    )
    p.add_argument("--alpha", type=float, default=0.8, help="acceptance rate alpha in [0, 1] (default 0.8)")
    p.add_argument("--gamma", type=int, default=5, help="drafts per round, >= 1 (default 5)")
    p.add_argument("--c", type=float, default=0.05,
                   help="cost of a draft forward pass relative to the target's, wall clock (default 0.05)")
    p.add_argument("--c-hat", type=float, default=None,
                   help="the same ratio in arithmetic operations (default: equal to --c)")
    p.add_argument("--max-gamma", type=int, default=10, help="largest gamma in the table and search (default 10)")
    p.add_argument("--p", type=_probs, default=None, metavar="P1,P2,...", help="target list p, e.g. 0.5,0.3,0.2")
    p.add_argument("--q", type=_probs, default=None, metavar="Q1,Q2,...", help="draft list q, e.g. 0.6,0.2,0.2")
    p.add_argument("--paper", action="store_true",
                   help="reproduce the paper's Table 2: predicted speed-ups from its alpha and c beside the reported")
    p.set_defaults(run=run)


def _probs(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if any(v < 0 for v in values) or abs(sum(values) - 1) > 1e-6:
        raise argparse.ArgumentTypeError(f"probabilities must be >= 0 and sum to 1: {text!r}")
    return values


def run(args: argparse.Namespace) -> int:
    console = make_console()
    if args.paper:
        return _paper(console)
    c_hat = args.c if args.c_hat is None else args.c_hat
    if args.max_gamma < 1:
        raise ValueError(f"--max-gamma must be >= 1, got {args.max_gamma}")
    if (args.p is None) != (args.q is None):
        raise ValueError("give both --p and --q, or neither")
    if args.p is not None:
        _rule_walkthrough(console, args.p, args.q)

    alpha, gamma, c = args.alpha, args.gamma, args.c
    tokens = analysis.expected_tokens(alpha, gamma)
    console.print(f"alpha {alpha:g}, gamma {gamma}, c {c:g}, c_hat {c_hat:g}")
    console.print(f"  all {gamma} drafts accepted (alpha^(gamma+1) = {alpha ** (gamma + 1):.3f})")
    console.print(f"  expected tokens per target call  {tokens:.2f}")
    console.print(f"  expected speed-up                {analysis.speedup(alpha, gamma, c):.2f}x")
    console.print(f"  extra arithmetic                 {analysis.extra_arithmetic(alpha, gamma, c_hat):.2f}x")
    best = analysis.best_gamma(alpha, c, max_gamma=args.max_gamma)
    console.print(f"  best gamma (1..{args.max_gamma})             {best} "
                  f"({analysis.speedup(alpha, best, c):.2f}x)")

    table = Table("gamma", "tokens / target call", "speed-up", "extra arithmetic", "", title="Over gamma")
    for g in range(1, args.max_gamma + 1):
        table.add_row(str(g), f"{analysis.expected_tokens(alpha, g):.2f}", f"{analysis.speedup(alpha, g, c):.2f}x",
                      f"{analysis.extra_arithmetic(alpha, g, c_hat):.2f}x", "best" if g == best else "",
                      style="bold" if g == best else None)
    console.print(table)
    return 0


def _rule_walkthrough(console: Console, p_list: list[float], q_list: list[float]) -> None:
    if len(p_list) != len(q_list):
        raise ValueError(f"--p has {len(p_list)} entries and --q has {len(q_list)}")
    p, q = torch.tensor(p_list, dtype=torch.float64), torch.tensor(q_list, dtype=torch.float64)
    keep, left = keep_probability(p, q), residual(p, q)
    rejected = float((q * (1 - keep)).sum())
    fmt = lambda t: "(" + ", ".join(f"{v:.3g}" for v in t.tolist()) + ")"  # noqa: E731
    console.print(f"p = {fmt(p)}, q = {fmt(q)}")
    console.print(f"  keep probability min(1, p/q)      {fmt(keep)}")
    console.print(f"  probability of a rejection        {rejected:.3g}")
    console.print(f"  redraw list norm(max(0, p - q))   {fmt(left)}")
    console.print(f"  output distribution               {fmt(output_distribution(p, q))}  (equals p)")
    console.print(f"  beta = sum min(p, q)              {analysis.beta(p, q):.3g}")


def _paper(console: Console) -> int:
    table = Table("task", "draft", "c", "temp", "gamma", "alpha", "predicted", "reported", "best gamma",
                  title="Table 2 of the paper (T5-XXL target): speed-up predicted by (1 - alpha^(gamma+1)) / "
                  "((1 - alpha)(gamma c + 1))")
    for r in analysis.paper_table():
        table.add_row(r["task"], r["draft"], f"{r['c']:g}", str(r["temperature"]), str(r["gamma"]),
                      f"{r['alpha']:.2f}", f"{r['predicted']:.2f}x", f"{r['reported']:.1f}x", str(r["best_gamma"]))
    console.print(table)
    return 0
