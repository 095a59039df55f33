"""One chat request through a `Service`'s Scheduler, as the server runs it but without HTTP: shared by the in-process
scripts under docs/bench (batched-costs/ab.py, hybrid-allotment/ab_draft.py)."""

import time

import anyio

from specdecode.server.schemas import ChatRequest
from specdecode.server.service import _DONE
from specdecode.server.threads import serial


def one(service, loaded, prompt: str, max_tokens: int = 64, seed: int = 1234) -> tuple[int, float | None, str, int]:
    """prompt, greedy -> (tokens, per-token seconds: the time from its first token to its last over the tokens after
    the first, its text, its rounds that emitted tokens)."""
    messages = [{"role": "user", "content": prompt}]
    request = ChatRequest(model="default", messages=messages, max_tokens=max_tokens, temperature=0, seed=seed)
    job = service.job(loaded, service.encode(loaded, messages=messages), request)
    scheduler = service.scheduler
    anyio.run(scheduler.acquire, job.lease, None, None)
    steps, ends = iter(job.generation), []
    serial()
    try:
        while True:
            with scheduler.inside():
                step = next(steps, _DONE)
            if step is _DONE:
                break
            if step.emitted:
                ends.append((time.perf_counter(), len(step.emitted)))
    finally:
        scheduler.release(job.lease)
    tokens = sum(n for _, n in ends)
    per = (ends[-1][0] - ends[0][0]) / (tokens - ends[0][1]) if tokens > ends[0][1] else None
    return tokens, per, job.generation.text(), len(ends)
