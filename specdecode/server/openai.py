"""Answers in OpenAI's shapes: completions and chat completions, whole or as server-sent events.

Each answer carries a `speculative` object (in a stream: on the last chunk) with what the rule did. A request of n
choices runs n generations in turn; a stream sends each choice's chunks after the previous choice's.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Literal

from ..engine import Generation, GenerationStats, Round, TokenLogprob
from .service import Job

Kind = Literal["text", "chat"]


def sse(data: dict | str, event: str | None = None) -> str:
    """One server-sent event."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


def speculative(job: Job) -> dict:
    """What the rule did, over all of the job's choices (their rounds one after the other)."""
    stats = GenerationStats.total([generation.stats for generation in job.generations])
    return {"gamma": job.gamma, "draft": job.loaded.draft_name, "target_calls": stats.target_calls,
            "accepted_per_round": list(stats.accepted_per_round),
            "drafted_per_round": list(stats.drafted_per_round), "alpha": stats.alpha,
            "tokens_per_target_call": stats.tokens_per_target_call, "tokens_per_second": stats.tokens_per_second,
            "draft_cost": stats.draft_cost, "rounds": stats.rounds,
            "mean_gamma": stats.tokens_drafted / stats.rounds if stats.rounds else 0.0}


def usage(job: Job) -> dict:
    new = sum(len(generation.new_tokens) for generation in job.generations)
    return {"prompt_tokens": job.prompt_tokens, "completion_tokens": new, "total_tokens": job.prompt_tokens + new}


def finish_reason(generation: Generation) -> str:
    return "stop" if generation.stop_reason in ("stop_token", "stop_string") else "length"


def _header(kind: Kind, chunk: bool) -> dict:
    prefix, obj = ("cmpl", "text_completion") if kind == "text" else ("chatcmpl", "chat.completion")
    if chunk and kind == "chat":
        obj += ".chunk"
    return {"id": f"{prefix}-{uuid.uuid4().hex[:24]}", "object": obj, "created": int(time.time())}


def text_logprobs(scored: list[TokenLogprob], piece: Callable[[int], str], offset: int = 0) -> dict:
    """Completions' logprobs object of tokens whose text starts at character `offset` (offsets add up the pieces)."""
    pieces = [piece(s.token) for s in scored]
    return {"tokens": pieces, "token_logprobs": [s.logprob for s in scored],
            "top_logprobs": [{piece(t): lp for t, lp in s.top} for s in scored],
            "text_offset": list(itertools.accumulate((len(p) for p in pieces[:-1]), initial=offset)) if pieces else []}


def chat_logprobs(scored: list[TokenLogprob], piece: Callable[[int], str]) -> dict:
    """Chat's logprobs object: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}."""
    def entry(token: int, logprob: float) -> dict:
        text = piece(token)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode())}

    return {"content": [entry(s.token, s.logprob) | {"top_logprobs": [entry(t, lp) for t, lp in s.top]}
                        for s in scored]}


def _choice(kind: Kind, index: int, text: str | None, logprobs: dict | None, reason: str | None,
            chunk: bool) -> dict:
    if kind == "text":
        return {"index": index, "text": text or "", "logprobs": logprobs, "finish_reason": reason}
    if not chunk:
        return {"index": index, "message": {"role": "assistant", "content": text}, "logprobs": logprobs,
                "finish_reason": reason}
    return {"index": index, "delta": {"content": text} if text is not None else {}, "logprobs": logprobs,
            "finish_reason": reason}


def answer(job: Job, kind: Kind) -> dict:
    """The whole answer of a finished job."""
    piece = job.loaded.target.tokenizer.piece
    choices = []
    for i, generation in enumerate(job.generations):
        scored = generation.logprobs if generation.top_logprobs is not None else None
        logprobs = None if scored is None else text_logprobs(scored, piece) if kind == "text" else \
            chat_logprobs(scored, piece)
        choices.append(_choice(kind, i, generation.text(), logprobs, finish_reason(generation), chunk=False))
    return {**_header(kind, False), "model": job.model, "choices": choices, "usage": usage(job),
            "speculative": speculative(job)}


class TextDeltas:
    """The new part of a growing text each time (text once sent cannot be taken back: when an earlier part is
    re-spelled, nothing is sent until the text agrees with what was sent again)."""

    def __init__(self):
        self.sent = ""

    def next(self, text: str) -> str:
        if not text.startswith(self.sent):
            return ""
        delta, self.sent = text[len(self.sent):], text
        return delta


async def stream(job: Job, choices: AsyncIterator[tuple[int, Round]], kind: Kind,
                 include_usage: bool = False) -> AsyncIterator[str]:
    """Chunks as rounds arrive, choice after choice, each choice ending with a chunk carrying its finish_reason;
    usage and speculative on the last chunk (include_usage: on an extra last chunk with no choices); then
    `data: [DONE]`. A chunk's text is what the choice's output may show so far (`Generation.text(final=False)`: a
    possible start of a stop string is held back); its logprobs are those of the round's tokens."""
    head = {**_header(kind, True), "model": job.model}
    piece = job.loaded.target.tokenizer.piece
    last = len(job.generations) - 1

    def chunk(index: int, text: str | None, scored: list[TokenLogprob] | None = None, reason: str | None = None,
              offset: int = 0) -> dict:
        logprobs = None if scored is None else text_logprobs(scored, piece, offset) if kind == "text" else \
            chat_logprobs(scored, piece)
        return {**head, "choices": [_choice(kind, index, text, logprobs, reason, chunk=True)]}

    def finish(index: int, deltas: TextDeltas) -> list[str]:
        generation = job.generations[index]
        rest = deltas.next(generation.text())
        events = [sse(chunk(index, rest))] if rest else []
        end = chunk(index, None, reason=finish_reason(generation))
        if index == last and not include_usage:
            end |= {"usage": usage(job), "speculative": speculative(job)}
        return [*events, sse(end)]

    current, deltas, offset = -1, TextDeltas(), 0
    async for index, rnd in choices:
        if index != current:
            for event in finish(current, deltas) if current >= 0 else []:
                yield event
            current, deltas, offset = index, TextDeltas(), 0
            if kind == "chat":
                yield sse({**head, "choices": [{"index": index, "delta": {"role": "assistant", "content": ""},
                                                "logprobs": None, "finish_reason": None}]})
        generation = job.generations[index]
        text = deltas.next(generation.text(final=False))
        scored = rnd.logprobs if generation.top_logprobs is not None else None
        if text or scored:
            yield sse(chunk(index, text, scored, offset=offset))
            offset += sum(len(piece(s.token)) for s in scored or ())
    if current >= 0:
        for event in finish(current, deltas):
            yield event
    if include_usage:
        yield sse({**head, "choices": [], "usage": usage(job), "speculative": speculative(job)})
    yield sse("[DONE]")
