"""The methods a bench compares. Each runs one prompt and returns what it produced and how long it took.

    ours         plain decoding or speculative decoding through specdecode's engine
    transformers model.generate(): plain, assisted generation (assistant_model=) or prompt lookup
    llama.cpp    llama-cpp-python's own generation loop (`Llama.generate`): plain, or its prompt-lookup speculation
                 (draft_model=LlamaPromptLookupDecoding)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..adaptive import AdaptiveGamma
from ..cpu import torch_threads
from ..drafts.base import Draft
from ..engine import Generation, GenerationStats
from ..models.base import CausalLM
from ..models.llama_cpp import binding
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
    schedule = AdaptiveGamma.for_target(target) if gamma == "auto" else gamma

    def run(prompt_ids, sampling, max_new_tokens, seed):
        target.clear()  # no reuse of another run's cached prompt: every method starts cold
        if draft is not None:
            draft.clear()
        generation = Generation(target, draft, prompt_ids, max_new_tokens=max_new_tokens, gamma=schedule,
                                sampling=sampling, seed=seed, stop_token_ids=stops)
        with torch_threads(target.torch_threads):
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


def llama_cpp_generate(name: str, gguf: str, stops: list[int], threads: int, lookup_tokens: int = 0) -> Method:
    """llama.cpp as its Python users call it: a `Llama` of the GGUF file and its `generate` loop, greedy as
    temperature 0, sampling with its other samplers switched off (top-k 0, top-p 1 unless asked, min-p 0, no
    repetition penalty) so that it draws from the same adjusted distribution as ours. lookup_tokens > 0 adds its
    prompt-lookup speculation with that many drafted tokens."""
    llama_cpp = binding()
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    draft = LlamaPromptLookupDecoding(num_pred_tokens=lookup_tokens) if lookup_tokens else None
    llm = llama_cpp.Llama(gguf, n_ctx=4096, n_threads=threads, n_threads_batch=threads, draft_model=draft,
                          verbose=False)

    def run(prompt_ids, sampling, max_new_tokens, seed):
        kwargs = {"temp": 0.0} if sampling.greedy else {
            "temp": sampling.temperature, "top_k": sampling.top_k or 0,
            "top_p": sampling.top_p if sampling.top_p is not None else 1.0}
        llm.set_seed(seed)
        llm.reset()  # no reuse of the last prompt's cached prefix: every method starts cold
        tokens = []
        with torch_threads(1):  # as for ours on llama.cpp: torch's idle threads would compete with llama.cpp's
            start = time.perf_counter()
            for token in llm.generate(prompt_ids, min_p=0.0, repeat_penalty=1.0, **({"top_k": 0, "top_p": 1.0}
                                                                                      | kwargs)):
                tokens.append(int(token))
                if token in stops or len(tokens) >= max_new_tokens:
                    break
            seconds = time.perf_counter() - start
        return Outcome(tokens, seconds)

    return Method(name, "llama.cpp", run, "prompt-lookup" if lookup_tokens else "none", lookup_tokens or None,
                  "llama.cpp")
