"""Answers in OpenAI's shapes: completions and chat completions, whole or as server-sent events.

Each answer carries a `speculative` object (in a stream: on the last chunk) with what the rule did. A request of n
choices runs n generations in turn; a stream sends each choice's chunks after the previous choice's.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Literal

from ..engine import Generation, GenerationStats, Round, TokenLogprob
from ..tokenizer import Tokenizer, complete, utf8
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
            "draft_cost": stats.draft_cost, "rounds": stats.rounds, "prefill_rounds": stats.prefill_rounds,
            "mean_gamma": stats.tokens_drafted / stats.decoding_calls if stats.decoding_calls else 0.0}


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


def token_text(data: bytes) -> str:
    """A token's text as OpenAI writes it: its bytes as UTF-8, or, when they are not whole characters (a token that
    holds part of one), each byte escaped after "bytes:" ("bytes:\\xe6\\x97"), so distinct tokens keep distinct
    texts."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in data)


class Offsets:
    """Where each token's text starts in an answer's text, in characters (a token that begins inside a character:
    where that character starts), fed the bytes each token adds to the text in order."""

    def __init__(self):
        self.chars, self.tail = 0, b""  # characters so far; bytes of an unfinished last one

    def take(self, data: bytes) -> int:
        offset = self.chars
        data = self.tail + data
        whole = complete(data)
        self.chars += len(utf8(data[:whole]))
        self.tail = data[whole:]
        return offset


def text_logprobs(scored: list[TokenLogprob], tokenizer: Tokenizer, offsets: Offsets,
                  in_text: Callable[[int], bytes] | None = None) -> dict:
    """Completions' logprobs object; `top_logprobs` always holds the chosen token (so up to logprobs + 1 entries,
    as OpenAI documents). in_text: the bytes a token adds to the text (default: its `text_bytes`)."""
    in_text = in_text or (lambda token: tokenizer.text_bytes([token]))
    text = lambda token: token_text(tokenizer.token_bytes(token))  # noqa: E731

    def top(s: TokenLogprob) -> dict:
        alternatives = {text(t): lp for t, lp in s.top}
        alternatives.setdefault(text(s.token), s.logprob)
        return alternatives

    return {"tokens": [text(s.token) for s in scored], "token_logprobs": [s.logprob for s in scored],
            "top_logprobs": [top(s) for s in scored], "text_offset": [offsets.take(in_text(s.token)) for s in scored]}


def echo_logprobs(job: Job, offsets: Offsets) -> dict:
    """The echoed prompt's logprobs: the first token's are null (nothing comes before it), as OpenAI writes them."""
    tokenizer = job.loaded.target.tokenizer
    first = job.prompt[0]
    head = {"tokens": [token_text(tokenizer.token_bytes(first))], "token_logprobs": [None], "top_logprobs": [None],
            "text_offset": [offsets.take(tokenizer.token_bytes(first))]}
    rest = text_logprobs(job.prompt_logprobs or [], tokenizer, offsets, tokenizer.token_bytes)
    return {key: head[key] + rest[key] for key in head}


def chat_logprobs(scored: list[TokenLogprob], tokenizer: Tokenizer) -> dict:
    """Chat's logprobs object: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}, each
    token's raw bytes in `bytes` (joined, they are the content); the end-of-turn token, which is no content, left
    out."""
    def entry(token: int, logprob: float) -> dict:
        data = tokenizer.token_bytes(token)
        return {"token": token_text(data), "logprob": logprob, "bytes": list(data)}

    ends = set(tokenizer.stop_token_ids)
    return {"content": [entry(s.token, s.logprob) | {"top_logprobs": [entry(t, lp) for t, lp in s.top]}
                        for s in scored if s.token not in ends]}


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
    tokenizer = job.loaded.target.tokenizer
    choices = []
    for i, generation in enumerate(job.generations):
        scored = generation.logprobs if generation.top_logprobs is not None else None
        text, logprobs = generation.text(), None
        if kind == "chat":
            logprobs = None if scored is None else chat_logprobs(scored, tokenizer)
        else:
            logprobs = _completion_logprobs(job, scored, Offsets(), echo=True)
            text = (job.echo or "") + text
        choices.append(_choice(kind, i, text, logprobs, finish_reason(generation), chunk=False))
    return {**_header(kind, False), "model": job.model, "choices": choices, "usage": usage(job),
            "speculative": speculative(job)}


def _completion_logprobs(job: Job, scored: list[TokenLogprob] | None, offsets: Offsets, echo: bool) -> dict | None:
    """Completions' logprobs of scored tokens, after the echoed prompt's when echo (and the job echoes)."""
    if scored is None:
        return None
    prompt = echo_logprobs(job, offsets) if echo and job.echo is not None else None
    logprobs = text_logprobs(scored, job.loaded.target.tokenizer, offsets)
    return logprobs if prompt is None else {key: prompt[key] + logprobs[key] for key in prompt}


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
    tokenizer = job.loaded.target.tokenizer
    last = len(job.generations) - 1

    def chunk(index: int, text: str | None, logprobs: dict | None = None, reason: str | None = None) -> dict:
        return {**head, "choices": [_choice(kind, index, text, logprobs, reason, chunk=True)]}

    def begin(index: int) -> list[str]:
        """A choice's first chunk: the role (chat), or the echoed prompt (completions with echo)."""
        if kind == "chat":
            return [sse({**head, "choices": [{"index": index, "delta": {"role": "assistant", "content": ""},
                                              "logprobs": None, "finish_reason": None}]})]
        if job.echo is None:
            return []
        scored = [] if job.generations[index].top_logprobs is not None else None
        return [sse(chunk(index, job.echo, _completion_logprobs(job, scored, offsets, echo=True)))]

    def finish(index: int, deltas: TextDeltas) -> list[str]:
        generation = job.generations[index]
        rest = deltas.next(generation.text())
        events = [sse(chunk(index, rest))] if rest else []
        end = chunk(index, None, reason=finish_reason(generation))
        if index == last and not include_usage:
            end |= {"usage": usage(job), "speculative": speculative(job)}
        return [*events, sse(end)]

    current, deltas, offsets = -1, TextDeltas(), Offsets()

    def advance(index: int) -> list[str]:
        """The chunks that end the choices before index and begin those up to it (a choice may have no rounds)."""
        nonlocal current, deltas, offsets
        events = []
        while current < index:
            if current >= 0:
                events += finish(current, deltas)
            current, deltas, offsets = current + 1, TextDeltas(), Offsets()
            events += begin(current)
        return events

    async for index, rnd in choices:
        for event in advance(index):
            yield event
        generation = job.generations[index]
        text = deltas.next(generation.text(final=False))
        scored = rnd.logprobs if generation.top_logprobs is not None else None
        if text or scored:
            logprobs = None if scored is None else chat_logprobs(scored, tokenizer) if kind == "chat" else \
                _completion_logprobs(job, scored, offsets, echo=False)
            if text or logprobs != {"content": []}:  # (not a chunk of the end-of-turn token alone)
                yield sse(chunk(index, text, logprobs))
    if all(generation.stats.seconds > 0 for generation in job.generations):  # every choice ran (none cut short)
        for event in advance(last):
            yield event
    if current >= 0:
        for event in finish(current, deltas):
            yield event
    if include_usage:
        yield sse({**head, "choices": [], "usage": usage(job), "speculative": speculative(job)})
    yield sse("[DONE]")
