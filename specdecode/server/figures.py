"""The data behind the page's figures, computed by the project's own engine, rule and formulas.

    round   one real round of the toy bigram pair (draft, verify, keep) after the text so far
    draws   the rule run batched on the worked example p = (0.5, 0.3, 0.2), q = (0.6, 0.2, 0.2)
    gamma   expected tokens, speed-up and extra arithmetic over gamma, and the best gamma
    live    the served pair's rounds as server-sent events, then the run's measured numbers
    page    what the page shows that is not a figure's result: the legend, the toy vocabulary, defaults and limits
            (the page's script repeats none of them)
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import torch
from pydantic import BaseModel

from ..analysis import best_gamma, expected_tokens, extra_arithmetic, measured_verify_cost, speedup
from ..drafts.model import ModelDraft
from ..engine import Generation, Round
from ..rule import keep_probability, residual, verify
from ..sampling import SamplingConfig, sample
from ..toy import DRAFT_NOISE, EXAMPLE_P, EXAMPLE_Q, EXAMPLE_WORDS, WORDS, ToyTokenizer, bigram_pair
from .openai import finish_reason, speculative, sse
from .schemas import LiveRequest, ToyRoundRequest
from .service import Job

# What each piece of a round is (the kinds of `Round.labelled`), as the page's tooltips say it.
KINDS = {
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "corrected": "corrected: the target's token after a rejection",
    "bonus": "bonus: the target's token after every draft was accepted",
}
# The page's legend: corrected and bonus tokens share a colour, so one entry names both.
LEGEND = ({"kind": "accepted", "text": KINDS["accepted"]}, {"kind": "rejected", "text": KINDS["rejected"]},
          {"kind": "corrected", "text": "target's token (corrected or bonus)"})
TOY_START = [0]  # the "Try it" text starts as the toy vocabulary's first word
DRAWS_N = 10_000  # the draws figure's runs of the rule
TOY_PROMPT = "the cat"  # the live figure's first prompt on the toy target
PROMPT = "Explain speculative decoding in one sentence."  # and on any other


def field_bounds(request: type[BaseModel], name: str) -> dict:
    """A request field's default, minimum and maximum (those it has), as its JSON schema states them."""
    field = request.model_json_schema()["properties"][name]
    bounds = {"default": field["default"]} if "default" in field else {}
    for option in (field, *field.get("anyOf", ())):
        bounds |= {key: option[key] for key in ("minimum", "maximum") if key in option}
    return bounds


def page(toy: bool) -> dict:
    """The facts the page shows beside its figures' results; `toy`: whether the served target is the toy."""
    return {
        "kinds": KINDS, "legend": LEGEND, "draws": {"n": DRAWS_N},
        "toy": {"words": list(WORDS), "start": {"tokens": TOY_START, "text": ToyTokenizer().decode(TOY_START).strip()},
                "gamma": field_bounds(ToyRoundRequest, "gamma"),
                "agreement_at_least": 1 - DRAFT_NOISE},  # sum_x min(p, q) in every row of the toy pair
        "live": {"prompt": TOY_PROMPT if toy else PROMPT, "words": list(WORDS) if toy else None,
                 **{name: field_bounds(LiveRequest, name) for name in ("max_tokens", "gamma", "temperature")}},
    }


def round_parts(rnd: Round, piece) -> list[dict]:
    """A round as coloured pieces (see `Round.labelled`)."""
    return [{"text": piece(t), "kind": kind} for t, kind in rnd.labelled()]


def round_event(rnd: Round, piece) -> dict:
    return {"parts": round_parts(rnd, piece), "drafted": [piece(t) for t in rnd.drafted], "n_accepted": rnd.n_accepted,
            "next": piece(rnd.next_token), "kind": rnd.kind, "emitted": len(rnd.emitted)}


def shared_pass(job: Job, rnd: Round) -> dict:
    """The target pass that verified the round: how many requests' rows it carried, how many rows, how many were
    this request's (served alone: its own only)."""
    record = job.lease.last_pass
    if record is None:
        yours = len(rnd.drafted) + 1
        return {"requests": 1, "rows": yours, "yours": yours}
    return {"requests": len(record["rows"]), "rows": sum(n for _, n in record["rows"]),
            "yours": sum(n for lease, n in record["rows"] if lease == job.lease.id)}


def toy_round(request: ToyRoundRequest) -> dict:
    """Exactly one round of the toy pair through `Generation`, after request.tokens."""
    target, draft = bigram_pair()
    seed = request.seed if request.seed is not None else secrets.randbits(62)
    generation = Generation(target, ModelDraft(draft), request.tokens, max_new_tokens=request.gamma + 1,
                            gamma=request.gamma, sampling=SamplingConfig(request.temperature), seed=seed,
                            first_from_prefill=False)
    steps = iter(generation)
    rnd = next(steps)
    steps.close()
    tokenizer = ToyTokenizer()
    return {**round_event(rnd, tokenizer.piece), "gamma": request.gamma, "seed": seed,
            "target_calls": generation.stats.target_calls, "emitted_tokens": rnd.emitted,
            "emitted_text": tokenizer.decode(rnd.emitted), "words": list(WORDS)}


def draws(n: int, seed: int) -> dict:
    """n independent runs of the rule with gamma = 1: draft x ~ q, keep it or take the corrected token."""
    generator = torch.Generator().manual_seed(seed)
    p, q = EXAMPLE_P, EXAMPLE_Q
    drafted = sample(q.expand(n, -1), generator)  # [n]
    n_accepted, next_token = verify(p.expand(n, 2, -1), q.expand(n, 1, -1), drafted[:, None], generator)
    produced = torch.where(n_accepted == 1, drafted, next_token)
    counts = torch.bincount(produced, minlength=len(p)).tolist()
    return {"words": list(EXAMPLE_WORDS), "p": p.tolist(), "q": q.tolist(), "keep": keep_probability(p, q).tolist(),
            "residual": residual(p, q).tolist(), "n": n, "seed": seed, "counts": counts,
            "frequencies": [c / n for c in counts], "accepted": int(n_accepted.sum())}


def gamma_table(alpha: float, c: float, c_hat: float, max_gamma: int, costs: dict | None = None) -> dict:
    """The paper's 3.2 to 3.5 over gamma = 1 .. max_gamma; with `costs` (the served engine's measured T(k), see
    `Service.verify_costs`) also the speed-up with the verify pass costing T(gamma + 1) / T(1) instead of nothing."""
    points = [{"gamma": g, "expected_tokens": expected_tokens(alpha, g), "speedup": speedup(alpha, g, c),
               "extra_arithmetic": extra_arithmetic(alpha, g, c_hat)} for g in range(1, max_gamma + 1)]
    best = best_gamma(alpha, c, max_gamma)
    table = {"alpha": alpha, "c": c, "c_hat": c_hat, "max_gamma": max_gamma, "best_gamma": best,
             "best_speedup": speedup(alpha, best, c), "best_extra_arithmetic": extra_arithmetic(alpha, best, c_hat),
             "points": points}
    if costs is not None:
        verify = measured_verify_cost(costs["ratio"])
        for point in points:
            point["speedup_measured"] = speedup(alpha, point["gamma"], c, verify(point["gamma"] + 1))
        best_measured = best_gamma(alpha, c, max_gamma, verify)
        table |= {"engine": costs["engine"], "verify_ms": costs["ms"], "best_gamma_measured": best_measured,
                  "best_speedup_measured": speedup(alpha, best_measured, c, verify(best_measured + 1))}
    return table


async def live(job: Job, choices: AsyncIterator[tuple[int, Round]]) -> AsyncIterator[str]:
    """`event: round` per round of the job's one choice (as `round_event`), then `event: stats` with the measured
    numbers."""
    piece = job.loaded.target.tokenizer.piece
    async for _, rnd in choices:
        yield sse({**round_event(rnd, piece), "pass": shared_pass(job, rnd)}, "round")
    text = job.loaded.target.tokenizer.decode(job.generation.new_tokens)
    yield sse({**speculative(job), "target": job.model, "new_tokens": len(job.generation.new_tokens),
               "prompt_tokens": job.prompt_tokens, "text": text, "finish_reason": finish_reason(job.generation)},
              "stats")
