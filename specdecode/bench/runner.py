"""Run methods on the same prompts, alternating their order prompt by prompt, and collect every raw figure."""

from __future__ import annotations

from dataclasses import dataclass, field

from tqdm import tqdm

from ..analysis import acceptance_rate
from ..sampling import SamplingConfig
from .methods import Method, Outcome


@dataclass
class Record:
    method: str
    prompt_id: str
    sampling: str
    new_tokens: int
    seconds: float
    identical_to_reference: bool | None
    stats: dict = field(default_factory=dict)


def run_alternating(methods: list[Method], prompts: list[tuple[str, list[int]]], sampling: SamplingConfig,
                    max_new_tokens: int, reference: dict[str, str] | None = None, seed: int = 0,
                    progress: bool = True) -> list[Record]:
    """Every method on every prompt; the order of methods rotates from prompt to prompt so that no method always
    runs first (warm caches) or last. One untimed warm-up run per method first. With greedy sampling each output is
    compared with its reference method's output on the same prompt (`reference`: method name -> the name of the
    method to compare with, e.g. ours plain on the same engine; methods without one are not compared)."""
    for method in methods:
        method.run(prompts[0][1], sampling, min(8, max_new_tokens), seed)
    records: list[Record] = []
    bar = tqdm(total=len(methods) * len(prompts), desc=f"bench ({sampling.describe()})", disable=not progress,
               unit="run")
    for i, (prompt_id, ids) in enumerate(prompts):
        order = methods[i % len(methods):] + methods[: i % len(methods)]
        outcomes: dict[str, Outcome] = {}
        for method in order:
            outcomes[method.name] = method.run(ids, sampling, max_new_tokens, seed + i)
            bar.update()
        for method in methods:
            out = outcomes[method.name]
            ref = outcomes.get((reference or {}).get(method.name)) if sampling.greedy else None
            same = (out.new_tokens == ref.new_tokens) if ref is not None else None
            records.append(Record(method.name, prompt_id, sampling.describe(), len(out.new_tokens), out.seconds,
                                  same, out.stats.as_dict() if out.stats else {}))
    bar.close()
    return records


def summarize(records: list[Record], method: str) -> dict:
    """Totals of one method: tokens/s over all its prompts (total tokens / total seconds), alpha, tokens per call."""
    mine = [r for r in records if r.method == method]
    tokens, seconds = sum(r.new_tokens for r in mine), sum(r.seconds for r in mine)
    accepted = sum(r.stats.get("tokens_accepted", 0) for r in mine)
    rejected = sum(r.stats.get("rejections", 0) for r in mine)
    calls = sum(r.stats.get("target_calls", 0) for r in mine)
    same = [r.identical_to_reference for r in mine if r.identical_to_reference is not None]
    return {"method": method, "prompts": len(mine), "new_tokens": tokens, "seconds": seconds,
            "tokens_per_second": tokens / seconds if seconds else 0.0,
            "alpha": acceptance_rate(accepted, rejected),
            "tokens_per_target_call": tokens / calls if calls else None,
            "identical": f"{sum(same)}/{len(same)}" if same else None}
