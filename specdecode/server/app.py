"""The FastAPI app: OpenAI-compatible endpoints, the page's endpoints, and the page itself.

    GET  /                        the explainer page (static/index.html, app.js, style.css; nothing from the net)
    GET  /health                  liveness and what is served
    GET  /v1/models               the served target
    GET  /v1/models/{id}          the served target, by its name (or "default")
    POST /v1/completions          OpenAI completions (prompt), optionally streamed
    POST /v1/chat/completions     OpenAI chat completions (messages), optionally streamed
    POST /api/live                the live figure: one event per round, then the measured numbers
    POST /api/toy/round           the "draft, verify, repeat" figure: one round of the toy pair
    GET  /api/draws               the "10,000 draws" figure: the rule on the worked example
    GET  /api/gamma               the "choosing gamma" figure: speed-up and extra arithmetic over gamma
    GET  /api/costs               the served engine's measured T(k), which /api/gamma?verify=measured uses
    GET  /api/page                what the page shows beside the figures: legend, toy vocabulary, defaults, limits
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Literal

import anyio
from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles

from ..engine import Round
from ..models.default import DEFAULT_TARGET
from . import errors, figures, openai
from .guard import Guard
from .schemas import ChatRequest, CompletionRequest, LiveRequest, OpenAIRequest, ToyRoundRequest
from .service import Job, Service, Ticket

STATIC = Path(__file__).parent / "static"
MAX_DRAWS = 100_000  # the draws figure's largest n (it asks for 10,000; a million cost ~300 MB a call)
log = logging.getLogger("specdecode.server")


class ClosingStreamingResponse(StreamingResponse):
    """A streaming response that always closes its body, so a generation's lock is released when a client leaves
    (Starlette leaves an abandoned body generator to the garbage collector), and then releases its ticket."""

    def __init__(self, *args, ticket: Ticket, **kwargs):
        super().__init__(*args, **kwargs)
        self.ticket = ticket

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.body_iterator.aclose()
            self.ticket.release()


def create_app(target: str = DEFAULT_TARGET, draft: str | None = None, dtype: str = "auto",
               engine: str = "auto", max_prompt_tokens: int = 4096, max_tokens: int = 2048,
               gamma: int | str = "auto", max_body_bytes: int = 1_000_000, max_queue: int = 16,
               request_timeout: float = 300.0, allowed_hosts: list[str] | None = None, sequences: int = 4,
               draft_confidence: float | None = None) -> FastAPI:
    """The app serving `target` with `draft` (None: the target's default draft), loaded on first use.

    max_prompt_tokens and max_tokens cap what one request may ask for; gamma is the default drafts per round (an
    integer, or "auto": chosen each round by `adaptive.AdaptiveGamma`). max_body_bytes caps a request body (413),
    max_queue the generating requests running or waiting (503), request_timeout each one's seconds; allowed_hosts
    (None: any) the Host names answered (see `guard`); sequences the requests generating at once, their passes
    batched (scheduler.py); draft_confidence a draft model's threshold for stopping when unsure (`load.load_draft`).
    """
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be an integer >= 1, got {max_body_bytes!r}")
    service = Service(target, draft, dtype, engine, gamma, max_prompt_tokens, max_tokens, max_queue, request_timeout,
                      sequences, draft_confidence)
    app = FastAPI(title="specdecode", version="0.1.0", docs_url=None, redoc_url=None,  # the docs UIs need a CDN
                  description="Exact speculative decoding behind an OpenAI-compatible API.")
    app.state.service = service
    app.add_middleware(Guard, max_body_bytes=max_body_bytes, allowed_hosts=allowed_hosts)
    errors.install(app)
    started = int(time.time())

    def streamed(job: Job, request: Request,
                 events: Callable[[AsyncIterator[tuple[int, Round]]], AsyncIterator[str]],
                 error_event: str | None = None) -> StreamingResponse:
        ticket = service.admit(job)  # a full queue is a 503 before the first byte

        async def body() -> AsyncIterator[str]:
            try:
                await service.score(job, request.is_disconnected, ticket.deadline)
                async with contextlib.aclosing(service.choices(job, request.is_disconnected,
                                                               ticket.deadline)) as choices:
                    async for event in events(choices):
                        yield event
            except Exception as error:  # the status line is gone: report in the stream, then end it
                status = error.status if isinstance(error, errors.APIError) else 500
                if status >= 500 and not isinstance(error, errors.APIError):
                    log.exception("generation failed")
                if isinstance(error, errors.APIError):
                    body = errors.error_body(error.message, status, error.param, error.code)
                else:
                    body = errors.error_body(f"generation failed: {error}", status)
                yield openai.sse(body, error_event)
                if error_event is None:
                    yield openai.sse("[DONE]")
                return
            _log_job(job, request)

        return ClosingStreamingResponse(body(), media_type="text/event-stream", ticket=ticket,
                                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def respond(job: Job, request: Request, body: OpenAIRequest, kind: openai.Kind):
        if body.stream:
            include_usage = body.stream_options is not None and body.stream_options.include_usage
            return streamed(job, request, lambda choices: openai.stream(job, choices, kind, include_usage))
        ticket = service.admit(job)
        try:
            await service.score(job, request.is_disconnected, ticket.deadline)
            for generation in job.generations:
                await service.run(job, generation, request.is_disconnected, ticket.deadline)
        finally:
            ticket.release()
        _log_job(job, request)
        return openai.answer(job, kind)

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/health")
    async def health() -> dict:
        loaded = service.loaded
        return {"status": "ok", "target": service.model_id, "draft": loaded.draft_name if loaded else
                (service.draft_spec or "default"), "loaded": loaded is not None, "toy": service.target_spec == "toy",
                "gamma": service.gamma, "max_tokens": service.max_tokens,
                "max_prompt_tokens": service.max_prompt_tokens}

    def model_object() -> dict:
        return {"id": service.model_id, "object": "model", "created": started, "owned_by": "specdecode"}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [model_object()]}

    @app.get("/v1/models/{model:path}")
    async def model(model: str) -> dict:
        """The served target by any name it answers to (loads nothing)."""
        if model not in service.names():
            raise errors.APIError(f"the model {model!r} does not exist: this server serves {service.model_id!r}",
                                  404, "model", "model_not_found")
        return model_object()

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        service.check(body)
        loaded = await service.ready(body.model)
        job = service.job(loaded, await service.tokenize(loaded, text=body.prompt), body)
        return await respond(job, request, body, "text")

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatRequest, request: Request):
        service.check(body)
        loaded = await service.ready(body.model)
        messages = [{"role": m.role, "content": m.text()} for m in body.messages]
        job = service.job(loaded, await service.tokenize(loaded, messages=messages), body)
        return await respond(job, request, body, "chat")

    @app.post("/api/live")
    async def live(body: LiveRequest, request: Request) -> StreamingResponse:
        loaded = await service.ready()
        job = service.job(loaded, await service.tokenize(loaded, messages=[{"role": "user", "content": body.prompt}]),
                          body)
        return streamed(job, request, lambda choices: figures.live(job, choices), error_event="error")

    @app.post("/api/toy/round")
    def toy_round(body: ToyRoundRequest) -> dict:
        return figures.toy_round(body)

    @app.get("/api/draws")
    def draws(n: int = Query(figures.DRAWS_N, ge=1, le=MAX_DRAWS),
              seed: int | None = Query(None, ge=0, le=2**63 - 1)) -> dict:
        return figures.draws(n, seed if seed is not None else secrets.randbits(31))

    @app.get("/api/gamma")
    async def gamma_curve(alpha: float = Query(ge=0, le=1, allow_inf_nan=False),
                          c: float = Query(ge=0, le=100, allow_inf_nan=False),
                          c_hat: float | None = Query(None, ge=0, le=100, allow_inf_nan=False,
                                                      description="arithmetic cost ratio; defaults to c"),
                          max_gamma: int = Query(20, ge=1, le=64),
                          verify: Literal["free", "measured"] = Query(
                              "free", description="the verify pass: free (the paper) or as measured on the served "
                              "engine (loads the models on first use)")) -> dict:
        costs = await service.verify_costs() if verify == "measured" else None
        return figures.gamma_table(alpha, c, c if c_hat is None else c_hat, max_gamma, costs)

    @app.get("/api/costs")
    async def costs() -> dict:
        """The served target's measured T(k), k = 1, 2, 4, 8, 16 (measured once)."""
        return await service.verify_costs()

    @app.get("/api/page")
    async def page() -> dict:
        """The page's facts that are not a figure's result (the page's script keeps no copy of them)."""
        return figures.page(service.target_spec == "toy")

    return app


def _log_job(job: Job, request: Request) -> None:
    stats = job.generation.stats
    alpha = f"{stats.alpha:.2f}" if stats.alpha is not None else "n/a"
    log.info("%s: %d tokens, %d target calls (%.2f per call), alpha %s, %.1f tokens/s, %s", request.url.path,
             stats.new_tokens, stats.target_calls, stats.tokens_per_target_call, alpha, stats.tokens_per_second,
             openai.finish_reason(job.generation))
