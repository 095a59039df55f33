"""The methods a bench compares. Each runs one prompt and returns what it produced and how long it took.

    ours         plain decoding or speculative decoding through specdecode's engine
    transformers model.generate(): plain, assisted generation (assistant_model=) or prompt lookup
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..adaptive import AdaptiveGamma
from ..drafts.base import Draft
from ..engine import Generation, GenerationStats
from ..models.base import CausalLM
from ..sampling import SamplingConfig


@dataclass
class Outcome:
    new_tokens: list[int]
    seconds: float
    stats: GenerationStats | None = None  # ours only


@dataclass
class Method:
    name: str
    family: str  # "ours" or "transformers"
    run: Callable[[list[int], SamplingConfig, int, int], Outcome]  # (prompt_ids, sampling, max_new_tokens, seed)
    draft: str = "none"
    gamma: int | str | None = None
    engine: str = "transformers"


def ours(name: str, target: CausalLM, draft: Draft | None, gamma: int | str, stops: list[int],
         engine: str) -> Method:
    """gamma "auto": one `AdaptiveGamma` for all of this method's runs, so it keeps what it learned (as transformers'
    heuristic schedule keeps its number of assistant tokens across calls)."""
    schedule = AdaptiveGamma() if gamma == "auto" else gamma

    def run(prompt_ids, sampling, max_new_tokens, seed):
        generation = Generation(target, draft, prompt_ids, max_new_tokens, schedule if draft else 5, sampling, seed,
                                stops)
        generation.run()
        return Outcome(generation.new_tokens, generation.stats.seconds, generation.stats)

    return Method(name, "ours", run, draft.name if draft else "none", gamma if draft else None, engine)


def transformers_generate(name: str, model, stops: list[int], **assist) -> Method:
    """model.generate() as users call it; assist: assistant_model=... or prompt_lookup_num_tokens=..."""

    def run(prompt_ids, sampling, max_new_tokens, seed):
        torch.manual_seed(seed)
        kwargs = {"do_sample": False} if sampling.greedy else {
            "do_sample": True, "temperature": sampling.temperature, "top_k": sampling.top_k or 0,
            "top_p": sampling.top_p if sampling.top_p is not None else 1.0}
        ids = torch.tensor([prompt_ids])
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                 eos_token_id=stops or None, pad_token_id=stops[0] if stops else 0, **kwargs,
                                 **assist)
        seconds = time.perf_counter() - start
        return Outcome(out[0, len(prompt_ids):].tolist(), seconds)

    draft = "prompt-lookup" if "prompt_lookup_num_tokens" in assist else ("model" if assist else "none")
    gamma = assist.get("prompt_lookup_num_tokens") or ("heuristic" if "assistant_model" in assist else None)
    return Method(name, "transformers", run, draft, gamma, "transformers")
