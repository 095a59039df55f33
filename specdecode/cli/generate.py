"""`specdecode generate`: speculative decoding of one prompt, streamed, with the stats of the run."""

from __future__ import annotations

import argparse
import json
import sys

import torch
from rich.console import Console
from rich.markup import escape
from tqdm import tqdm

from ..cpu import torch_threads
from ..drafts.model import check_confidence
from ..engine import Generation, GenerationStats
from ..load import Target, add_prompt_paths, default_draft, load_draft, load_target
from ..models.llama_cpp import LlamaCppLM
from ..sampling import SamplingConfig
from .console import make_console
from .options import add_model_options

COLOURS = {"accepted": "green", "rejected": "strike dark_orange", "corrected": "blue", "bonus": "blue"}


def add_parser(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="generate text with speculative decoding, streamed, then print the run's stats",
        description="Continue PROMPT with speculative decoding. By default the target is the embedded "
        "SmolLM2-135M-Instruct, the prompt is sent through its chat template, and decoding is greedy. "
        "The last line compares target calls with tokens produced.",
        epilog="Examples: specdecode generate 'Write a haiku about tea.'   |   specdecode generate --show "
        "--draft prompt-lookup 'Repeat this code and fix the bug: ...'   |   specdecode generate --target toy "
        "'the cat' --temperature 1",
    )
    p.add_argument("prompt", help="the prompt text")
    add_model_options(p, "drafts per round (an integer >= 1), or 'auto' (default): chosen every round from the "
                      "measured acceptance rate and costs")
    p.add_argument("--max-new-tokens", type=int, default=128, help="most tokens to generate (default 128)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default), else sampling temperature")
    p.add_argument("--top-k", type=int, default=None, help="sample only from the k most likely tokens")
    p.add_argument("--top-p", type=float, default=None, help="sample from the smallest set with this mass, (0, 1]")
    p.add_argument("--seed", type=int, default=None, help="random seed, for a reproducible sampled run")
    p.add_argument("--stop", action="append", default=[], metavar="STR",
                   help="end the text before this string (repeatable; the first match of any ends it)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for the engine (default: torch's choice, one per core)")
    p.add_argument("--lookup-ngram", type=int, default=3, help="longest n-gram prompt lookup matches (default 3)")
    p.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    p.add_argument("--show", action="store_true",
                   help="colour each round: accepted drafts green, the rejected draft struck through in orange, "
                   "the target's own token blue")
    p.add_argument("--compare", action="store_true",
                   help="also measure plain decoding of the target against speculative decoding, both the same "
                   "way: after the shown run (which warms the speculative side), one untimed plain run warms the "
                   "plain side (and is the output compared for identity, when greedy); then each side is timed "
                   "twice, alternating plain, speculative, speculative, plain, unstreamed, with the same prompt, "
                   "limits and seed. tokens/s = new tokens over wall seconds (prefill included), summed over each "
                   "side's two runs")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the stream")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    sampling = SamplingConfig(args.temperature, args.top_k, args.top_p)  # validates before any loading
    if any(not s for s in args.stop):
        raise ValueError("--stop needs a non-empty string")
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    if not args.prompt.strip():
        raise ValueError("the prompt is empty")
    if args.draft_confidence is not None:
        check_confidence(args.draft_confidence, "--draft-confidence")
    target = load_target(args.target, args.dtype, args.engine)
    with torch_threads(target.model.torch_threads):  # llama.cpp: torch's idle threads slow it
        return _generate(args, target, sampling)


def _generate(args: argparse.Namespace, target: Target, sampling: SamplingConfig) -> int:
    draft_spec = args.draft or default_draft(target)
    draft = load_draft(draft_spec, target, args.dtype, args.lookup_ngram, confidence=args.draft_confidence)
    add_prompt_paths(target, draft, long_lived=False)  # (SPECDECODE_PROMPT_PATH=on: built for one prompt too)
    draft_name = draft.name if draft is not None else "none"
    prompt_ids = target.tokenizer.encode(args.prompt, chat=not args.raw)
    stops = target.tokenizer.stop_token_ids
    options = {"max_new_tokens": args.max_new_tokens, "gamma": args.gamma, "sampling": sampling, "seed": args.seed,
               "stop_token_ids": stops, "stop": args.stop, "tokenizer": target.tokenizer}
    generation = Generation(target.model, draft, prompt_ids, **options)
    console = make_console()
    if args.json:
        generation.run()
    else:
        _stream(generation, target, console, args.show)
    stats = generation.stats
    report = {"text": generation.text(), "new_tokens": stats.new_tokens,
              **_stats_fields(stats), "stop_reason": generation.stop_reason, "gamma": args.gamma,
              "draft": draft_name, "target": target.name, "engine": target.engine, "dtype": args.dtype,
              "threads": target.model.threads if isinstance(target.model, LlamaCppLM) else torch.get_num_threads(),
              "sampling": sampling.describe()}
    if args.compare:
        report |= _compare(lambda d: Generation(target.model, d, prompt_ids, **options), draft,
                           generation.new_tokens, sampling.greedy)
    if args.json:
        print(json.dumps(report))
        return 0
    console.print(_stats_line(report), style="dim", markup=False)
    if args.compare:
        same = {True: ", identical output", False: ", OUTPUT DIFFERS"}.get(report.get("identical_to_plain"), "")
        console.print(f"measured alike (alternating, warm, 2 runs each): plain decoding "
                      f"{report['plain_tokens_per_second']:.1f} tokens/s, speculative "
                      f"{report['speculative_tokens_per_second']:.1f} tokens/s = {report['speedup']:.2f}x{same}",
                      style="dim")
    return 0


COMPARE_ORDER = ("plain", "speculative", "speculative", "plain")  # alternating: drift over time hits both alike


def _compare(make, draft, shown: list[int], greedy: bool) -> dict:
    """--compare: make(draft or None) -> a Generation of the same prompt, limits and seed. The plain side is warmed
    by one untimed run (the speculative side was by the shown run), then both are timed in COMPARE_ORDER, unstreamed.
    -> the report's plain_* and speculative_* fields, speedup, and identical_to_plain when greedy."""
    bar = tqdm(total=1 + len(COMPARE_ORDER), desc="--compare: timing plain and speculative decoding", unit="run",
               leave=False)
    warm = make(None)
    warm.run()
    bar.update()
    timed = {"plain": [0, 0.0], "speculative": [0, 0.0]}  # new tokens, seconds
    for kind in COMPARE_ORDER:
        stats = make(draft if kind == "speculative" else None).run().stats
        timed[kind][0] += stats.new_tokens
        timed[kind][1] += stats.seconds
        bar.update()
    bar.close()
    speed = {kind: tokens / seconds if seconds > 0 else 0.0 for kind, (tokens, seconds) in timed.items()}
    report = {"plain_new_tokens": timed["plain"][0], "plain_seconds": timed["plain"][1],
              "plain_tokens_per_second": speed["plain"], "speculative_new_tokens": timed["speculative"][0],
              "speculative_seconds": timed["speculative"][1], "speculative_tokens_per_second": speed["speculative"],
              "speedup": speed["speculative"] / speed["plain"] if speed["plain"] else None,
              "compare_runs": list(COMPARE_ORDER)}
    if greedy:
        report["identical_to_plain"] = warm.new_tokens == shown
    return report


def _stats_fields(stats: GenerationStats) -> dict:
    return {k: v for k, v in stats.as_dict().items() if k != "gamma"}


def _stats_line(r: dict) -> str:
    alpha = f"{r['alpha']:.2f}" if r["alpha"] is not None else "n/a"
    return (f"{r['new_tokens']} new tokens, {r['target_calls']} target calls, {r['tokens_per_target_call']:.2f} "
            f"tokens per target call, alpha {alpha}, {r['tokens_per_second']:.1f} tokens/s "
            f"[{r['target']} on {r['engine']}, draft {r['draft']}, gamma {r['gamma']}, {r['sampling']}]")


def _stream(generation: Generation, target: Target, console: Console, show: bool) -> None:
    """Print text as rounds are accepted: plain text, or each round coloured by what the rule did."""
    tokenizer = target.tokenizer
    if show:
        console.print("[green]accepted draft[/] [strike dark_orange]rejected draft[/] [blue]target's own token "
                      "(corrected or bonus)[/]", style="dim")
    printed = ""
    for rnd in generation:
        if show:
            console.print("".join(f"[{COLOURS[kind]}]{escape(tokenizer.piece(t))}[/]" for t, kind in rnd.labelled()),
                          end="")
        else:
            # Print only what is new; hold back a trailing partial character, or a possible start of a stop string.
            text = generation.text(final=False)
            if text.startswith(printed):
                sys.stdout.write(text[len(printed):])
                sys.stdout.flush()
                printed = text
    if not show:
        text = generation.text()
        sys.stdout.write(text[len(printed):] if text.startswith(printed) else "\n" + text)
    console.print()
