"""`specdecode train-draft`: distil a small draft model from the target, offline, with a held-out evaluation."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from ..distill.eagle import EagleBudget, collect_documents, train_eagle
from ..distill.pipeline import Budget, cached, ngram_path, train_draft
from ..distill.train import DraftShape
from ..load import load_target
from ..models.default import DEFAULT_TARGET


def add_parser(sub) -> None:
    b, s = Budget(), DraftShape()
    p = sub.add_parser(
        "train-draft", help="distil a small draft model from the target (about 60 minutes by default)",
        description="The target answers generated prompts (half greedy, half sampled), recording its top-k "
        "next-token lists; a small Llama with the target's tokenizer learns to match them; the result is "
        "evaluated on held-out bench prompts. Writes a transformers checkpoint directory with training.json.",
        epilog="The shipped draft was made with: specdecode train-draft --out specdecode/data/smollm2-draft")
    p.add_argument("--kind", choices=("model", "eagle"), default="model",
                   help="model: a small standalone Llama (default); eagle: an EAGLE-3 head that drafts from the "
                   "target's hidden states (native engine only; the options below marked [eagle] apply)")
    p.add_argument("--target", default=DEFAULT_TARGET)
    p.add_argument("--out", type=Path, required=True, help="directory to write the draft to")
    e = EagleBudget()
    p.add_argument("--prompts", type=int, default=None,
                   help=f"training prompts (default {b.prompts}; eagle {e.prompts})")
    p.add_argument("--answer-tokens", type=int, default=b.answer_tokens,
                   help=f"longest target answer (default {b.answer_tokens})")
    p.add_argument("--batch", type=int, default=b.batch, help=f"prompts the target answers at once ({b.batch})")
    p.add_argument("--text-positions", type=int, default=None,
                   help=f"positions of standard-library text the target scores (default {b.text_positions}; eagle "
                   f"{e.text_positions})")
    p.add_argument("--data-cache", type=Path, default=None,
                   help="save the target's answers and scores here, or reuse them if the file exists (eagle: also "
                   "its scoring of them, in FILE-scored.pt beside it)")
    p.add_argument("--train-minutes", type=float, default=None,
                   help=f"training time budget (default {b.train_seconds / 60:g}; eagle {e.train_seconds / 60:g})")
    p.add_argument("--hidden", type=int, default=s.hidden, help=f"draft width (default {s.hidden})")
    p.add_argument("--layers", type=int, default=s.layers, help=f"draft layers (default {s.layers})")
    p.add_argument("--eval-prompts", type=int, default=b.eval_prompts, help="held-out prompts for the final alpha")
    p.add_argument("--eval-tokens", type=int, default=b.eval_tokens)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true",
                   help="[eagle] go on training the head already in --out (its training.json keeps every run)")
    p.add_argument("--draft-vocab", type=int, default=e.draft_vocab,
                   help=f"[eagle] tokens the head's softmax covers (default {e.draft_vocab})")
    p.add_argument("--rollout", type=int, default=e.rollout,
                   help=f"[eagle] steps of the rollout loss (default {e.rollout})")
    p.add_argument("--lr", type=float, default=e.lr, help=f"[eagle] peak learning rate (default {e.lr:g})")
    p.add_argument("--answer-share", type=float, default=e.answer_share,
                   help=f"[eagle] share of each batch drawn from the target's answers (default {e.answer_share:g})")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    b = EagleBudget() if args.kind == "eagle" else Budget()
    for name in ("prompts", "text_positions"):  # the defaults differ by kind
        if getattr(args, name) is None:
            setattr(args, name, getattr(b, name))
    if args.train_minutes is None:
        args.train_minutes = b.train_seconds / 60
    for name in ("prompts", "answer_tokens", "batch", "text_positions", "hidden", "layers", "eval_prompts",
                 "eval_tokens"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
    if args.train_minutes <= 0:
        raise ValueError("--train-minutes must be > 0")
    if args.hidden % 4:
        raise ValueError("--hidden must be a multiple of 4 (4 attention heads)")
    if args.kind == "eagle":
        return run_eagle(args)
    target = load_target(args.target)
    budget = Budget(args.prompts, args.answer_tokens, args.batch, args.text_positions, args.train_minutes * 60,
                    args.eval_prompts, args.eval_tokens)
    shape = DraftShape(hidden=args.hidden, layers=args.layers, intermediate=3 * args.hidden)
    command = "specdecode " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["train-draft"] else "specdecode train-draft"
    summary = train_draft(target, args.out, budget, shape, args.seed, data_cache=args.data_cache, command=command)
    t = summary["training"]
    e = summary["evaluation"]
    print(f"wrote {args.out}: {summary['parameters'] / 1e6:.1f}M parameters, {summary['answer_tokens']} target "
          f"tokens, {t['steps']} steps, held-out loss {t['held_out_before']:.3f} -> {t['held_out_after']:.3f}")
    print(f"wrote {ngram_path(args.out)}: unigram / bigram tables of the same answers")
    print(f"held-out alpha: {e['temperature_0']['alpha']:.2f} at temperature 0, {e['temperature_1']['alpha']:.2f} "
          f"at temperature 1; c = {e['temperature_0']['c']:.3f}; {summary['total_seconds'] / 60:.1f} minutes")
    return 0


def run_eagle(args: argparse.Namespace) -> int:
    for name in ("draft_vocab", "rollout"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
    if not 0 < args.lr < 1:
        raise ValueError("--lr must be in (0, 1)")
    if not 0 <= args.answer_share <= 1:
        raise ValueError("--answer-share must be in [0, 1]")
    target = load_target(args.target, engine="native")
    budget = EagleBudget(args.prompts, args.answer_tokens, args.batch, args.text_positions, args.draft_vocab,
                         rollout=args.rollout, answer_share=args.answer_share, lr=args.lr,
                         train_seconds=args.train_minutes * 60,
                         eval_prompts=args.eval_prompts, eval_tokens=args.eval_tokens)
    command = "specdecode " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["train-draft"] else \
        "specdecode train-draft --kind eagle"
    started = time.perf_counter()
    documents = cached(args.data_cache, lambda: collect_documents(target, budget, args.seed))
    scored_cache = args.data_cache.with_name(args.data_cache.stem + "-scored.pt") if args.data_cache else None
    summary = train_eagle(target, args.out, budget, documents, args.seed, resume=args.resume, command=command,
                          data_seconds=time.perf_counter() - started, scored_cache=scored_cache)
    run = summary["runs"][-1]
    e = summary["evaluation"]
    agreement = " / ".join(f"{a:.2f}" for a in run["held_out_after"]["agreement"])
    print(f"wrote {args.out}: {summary['parameters'] / 1e6:.1f}M parameters, {run['steps']} steps this run; held-out "
          f"top-1 agreement by rollout step {agreement}")
    print(f"held-out alpha: {e['temperature_0']['alpha']:.2f} at temperature 0, {e['temperature_1']['alpha']:.2f} "
          f"at temperature 1; c = {e['temperature_0']['c']:.3f}; {summary['cpu_hours']:.2f} CPU core-hours in all")
    return 0
