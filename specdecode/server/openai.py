"""Answers in OpenAI's shapes: completions and chat completions, whole or as server-sent events.

Each answer carries a `speculative` object (in a stream: on the last chunk) with what the rule did.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Literal

from ..engine import Generation, Round
from .service import Job

Kind = Literal["text", "chat"]


def sse(data: dict | str, event: str | None = None) -> str:
    """One server-sent event."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


def speculative(job: Job) -> dict:
    stats = job.generation.stats
    return {"gamma": job.gamma, "draft": job.loaded.draft_name, "target_calls": stats.target_calls,
            "accepted_per_round": list(stats.accepted_per_round),
            "drafted_per_round": list(stats.drafted_per_round), "alpha": stats.alpha,
            "tokens_per_target_call": stats.tokens_per_target_call, "tokens_per_second": stats.tokens_per_second,
            "draft_cost": stats.draft_cost, "rounds": stats.rounds,
            "mean_gamma": stats.tokens_drafted / stats.rounds if stats.rounds else 0.0}


def usage(job: Job) -> dict:
    new = len(job.generation.new_tokens)
    return {"prompt_tokens": job.prompt_tokens, "completion_tokens": new, "total_tokens": job.prompt_tokens + new}


def finish_reason(generation: Generation) -> str:
    return "stop" if generation.stop_reason == "stop_token" else "length"


def _header(kind: Kind, chunk: bool) -> dict:
    prefix, obj = ("cmpl", "text_completion") if kind == "text" else ("chatcmpl", "chat.completion")
    if chunk and kind == "chat":
        obj += ".chunk"
    return {"id": f"{prefix}-{uuid.uuid4().hex[:24]}", "object": obj, "created": int(time.time())}


def answer(job: Job, kind: Kind) -> dict:
    """The whole answer of a finished job."""
    text = job.loaded.target.tokenizer.decode(job.generation.new_tokens)
    reason = finish_reason(job.generation)
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason} if kind == "text" else \
        {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None, "finish_reason": reason}
    return {**_header(kind, False), "model": job.model, "choices": [choice], "usage": usage(job),
            "speculative": speculative(job)}


class TextDeltas:
    """The new text after each round (a trailing partial character is held back until its last byte arrives)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.sent = tokenizer, ""

    def next(self, tokens: list[int], final: bool = False) -> str:
        text = self.tokenizer.decode(tokens)
        if not final:
            text = text.rstrip("\ufffd")
        if not text.startswith(self.sent):  # re-spelled earlier text cannot be taken back from a stream
            return ""
        delta, self.sent = text[len(self.sent):], text
        return delta


async def stream(job: Job, rounds: AsyncIterator[Round], kind: Kind) -> AsyncIterator[str]:
    """Chunks as rounds arrive, a last chunk with finish_reason, usage and speculative, then `data: [DONE]`."""
    head = {**_header(kind, True), "model": job.model}

    def chunk(piece: str | None, reason: str | None = None) -> dict:
        if kind == "text":
            choice = {"index": 0, "text": piece or "", "logprobs": None, "finish_reason": reason}
        else:
            choice = {"index": 0, "delta": {"content": piece} if piece is not None else {}, "logprobs": None,
                      "finish_reason": reason}
        return {**head, "choices": [choice]}

    if kind == "chat":
        yield sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                        "finish_reason": None}]})
    deltas = TextDeltas(job.loaded.target.tokenizer)
    async for _ in rounds:
        piece = deltas.next(job.generation.new_tokens)
        if piece:
            yield sse(chunk(piece))
    piece = deltas.next(job.generation.new_tokens, final=True)
    if piece:
        yield sse(chunk(piece))
    yield sse({**chunk(None, finish_reason(job.generation)), "usage": usage(job), "speculative": speculative(job)})
    yield sse("[DONE]")
