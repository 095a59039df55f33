"""The served models and the one place that runs them.

The target and its draft are loaded on the first request that needs them, once, under a lock. Prompts are tokenised
in a worker thread. Generations run round by round in worker threads, so the event loop stays free and a client
that goes away stops its generation at the next round (or, while it waits its turn, before any model work). Up to
`sequences` requests generate at once, their passes batched by the scheduler (scheduler.py; one at a time where the
engine keeps one cache); the others wait their turn in arrival order. At most `max_queue` generating requests are
admitted at once (running or waiting: the next gets a 503), and each has `request_timeout` seconds from its
admission: past that it stops waiting (503) or stops generating and answers with what it has.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import anyio
import torch

from ..analysis import check_gamma
from ..drafts.base import Draft
from ..drafts.model import check_confidence
from ..engine import Generation, Round, TokenLogprob, timing_free
from ..load import Target, add_prompt_paths, default_draft, load_draft, load_target
from ..models.base import CausalLM
from ..models.costs import pass_times
from ..sampling import GREEDY, SamplingConfig, TemperatureTooSmall, log_probs
from ..stops import check_stop
from .errors import APIError
from .scheduler import Lease, Scheduler
from .schemas import MAX_STOP_STRINGS, CompletionRequest, OpenAIRequest, Sampling
from .threads import R, on_engine, serial

log = logging.getLogger("specdecode.server")

_DONE = object()


COST_KS = (1, 2, 4, 8, 16)  # pass sizes whose cost the "choosing gamma" figure measures on the served engine
MAX_CHARS_PER_TOKEN = 64  # a prompt longer than this many characters per allowed token is refused untokenised
SCORE_CHUNK = 128  # prompt tokens per pass when scoring a prompt (echo with logprobs): [128, V] logits at a time


@dataclass
class Loaded:
    target: Target
    draft: Draft | None
    draft_name: str


@dataclass
class Job:
    """A checked request, ready to run: its Generations (one per choice, run in turn) and what the answer reports
    about them."""

    loaded: Loaded
    lease: Lease  # its place among the requests generating at once
    generations: list[Generation]
    prompt_tokens: int
    gamma: int | str  # drafts per round, "auto", or 0 without a draft
    prompt: list[int] = dataclasses.field(default_factory=list)
    echo: str | None = None  # the prompt's text, when the answer starts with it
    cold: bool = False  # reuse no cached cells of an earlier request (cache_prompt false)
    # With echo and logprobs: each prompt token's after the first (`Service.score`), else None
    prompt_logprobs: list[TokenLogprob] | None = None

    @property
    def generation(self) -> Generation:
        """The first (for most requests the only) choice's."""
        return self.generations[0]

    @property
    def model(self) -> str:
        return self.loaded.target.name


class Ticket:
    """A generating request's place among the `max_queue` admitted, with its deadline (time.monotonic seconds).
    Release it when the request is answered or abandoned (releasing twice is harmless): its sequence goes to the next
    request in line."""

    def __init__(self, service: Service, job: Job, deadline: float):
        self.service, self.job, self.deadline, self.released = service, job, deadline, False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.service.admitted -= 1
            self.job.lease.scheduler.release(self.job.lease)


class Service:
    def __init__(self, target: str, draft: str | None, dtype: str, engine: str, gamma: int | str,
                 max_prompt_tokens: int, max_tokens: int, max_queue: int = 16, request_timeout: float = 300.0,
                 sequences: int = 4, draft_confidence: float | None = None):
        check_gamma(gamma, auto=True)
        self.draft_confidence = draft_confidence if draft_confidence is None else check_confidence(draft_confidence)
        if max_prompt_tokens < 1 or max_tokens < 1 or max_queue < 1 or sequences < 1 or not request_timeout > 0:
            raise ValueError("max_prompt_tokens, max_tokens, max_queue and sequences must be >= 1, "
                             "request_timeout > 0")
        self.sequences = sequences  # requests generating at once (their passes batched)
        self.target_spec, self.draft_spec, self.dtype, self.engine = target, draft, dtype, engine
        self.gamma, self.max_prompt_tokens, self.max_tokens = gamma, max_prompt_tokens, max_tokens
        self.max_queue, self.request_timeout = max_queue, request_timeout
        self.admitted = 0  # generating requests admitted and not yet released (touched on the event loop only)
        self._loaded: Loaded | None = None
        self._load_lock = threading.Lock()
        self.scheduler: Scheduler | None = None  # made with the models
        self._costs: dict | None = None

    # --- the models ----------------------------------------------------------------------------------------------

    @property
    def loaded(self) -> Loaded | None:
        return self._loaded

    @property
    def model_id(self) -> str:
        """The name clients see: the loaded target's, or the configured one until it is loaded."""
        return self._loaded.target.name if self._loaded else self.target_spec

    def names(self) -> set[str]:
        """The model names requests may use: the served target's, the configured one, and "default"."""
        return {"default", self.target_spec, self.model_id}

    def load(self) -> Loaded:
        """The target and draft, loaded on first call (blocking: call it from a worker thread)."""
        if self._loaded is None:
            with self._load_lock:
                if self._loaded is None:
                    log.info("loading target %s ...", self.target_spec)
                    try:
                        target, draft, self.scheduler = on_engine(self._load_models)
                    except ValueError as error:
                        raise APIError(f"the server cannot load its models: {error}", 503) from None
                    self._loaded = Loaded(target, draft, draft.name if draft is not None else "none")
                    log.info("loaded target %s (%s), draft %s; %d request(s) at once", target.name, target.engine,
                             self._loaded.draft_name, self.scheduler.sequences)
        return self._loaded

    def _load_models(self) -> tuple[Target, Draft | None, Scheduler]:
        """The models and their scheduler (run on the engine thread, which then runs every pass: `threads`)."""
        target = load_target(self.target_spec, self.dtype, self.engine)
        draft = load_draft(self.draft_spec or default_draft(target), target, self.dtype, engine=self.engine,
                           confidence=self.draft_confidence)
        add_prompt_paths(target, draft, long_lived=True)
        return target, draft, Scheduler(target.model, draft, self.sequences)

    async def ready(self, model: str | None = None) -> Loaded:
        """Load (in a worker thread) and check the requested model name: unknown names are a 404."""
        loaded = await anyio.to_thread.run_sync(self.load)
        if model is not None and model not in self.names():
            raise APIError(f"the model {model!r} does not exist: this server serves {loaded.target.name!r} "
                           "(or say 'default')", 404, "model", "model_not_found")
        return loaded

    # --- requests ------------------------------------------------------------------------------------------------

    async def tokenize(self, loaded: Loaded, text: str | None = None, messages: list[dict] | None = None) -> list[int]:
        """`encode` in a worker thread: a long prompt does not hold up the event loop (and /health)."""
        return await anyio.to_thread.run_sync(lambda: self.encode(loaded, text, messages))

    def encode(self, loaded: Loaded, text: str | None = None, messages: list[dict] | None = None) -> list[int]:
        """Prompt ids of raw text, or of chat messages (through the chat template; joined words for the toy).

        Text that is not valid Unicode (a lone surrogate such as "\\ud800" from JSON) and text too long to be a
        prompt of max_prompt_tokens are refused before the tokenizer sees them."""
        param = "messages" if messages is not None else "prompt"
        texts = [m["content"] for m in messages] if messages is not None else [text]
        for part in texts:
            try:
                part.encode("utf-8")
            except UnicodeEncodeError as error:
                raise APIError(f"{param}: the text is not valid Unicode (a lone surrogate at character {error.start}; "
                               "JSON escapes such as \\ud83d must come in pairs)", param=param) from None
        chars = sum(len(part) for part in texts)
        if chars > self.max_prompt_tokens * MAX_CHARS_PER_TOKEN:
            raise APIError(f"the prompt has {chars} characters, too long to fit the {self.max_prompt_tokens} tokens "
                           "this server takes", param=param, code="context_length_exceeded")
        tokenizer = loaded.target.tokenizer
        ids = tokenizer.encode_chat(messages) if messages is not None else tokenizer.encode(text, chat=False)
        if not ids:
            raise APIError("the prompt is empty", param=param)
        if len(ids) > self.max_prompt_tokens:
            raise APIError(f"the prompt has {len(ids)} tokens, more than this server takes ({self.max_prompt_tokens})",
                           param=param, code="context_length_exceeded")
        window = loaded.target.model.max_length
        if window is not None and len(ids) >= window:
            raise APIError(f"the prompt has {len(ids)} tokens and does not fit the target's context window "
                           f"({window})", param=param, code="context_length_exceeded")
        return ids

    @staticmethod
    def check(request: OpenAIRequest) -> None:
        """Refuse, before any model work, a request that asks for what the server cannot do (naming the field)."""
        refused = request.unsupported()
        if refused is not None:
            raise APIError(refused[1], param=refused[0], code="unsupported_parameter")
        if isinstance(request, CompletionRequest) and request.max_tokens == 0 and not request.echo:
            raise APIError("max_tokens: 0 asks for no tokens; it is only for echo: true (to score the prompt)",
                           param="max_tokens")

    def job(self, loaded: Loaded, ids: list[int], request: Sampling) -> Job:
        """Check the request's fields and build its Generations, one per choice, choice i seeded seed + i (nothing
        runs yet)."""
        stop, choices = [], 1
        if isinstance(request, OpenAIRequest):
            try:
                stop = check_stop(request.stop, MAX_STOP_STRINGS)
            except ValueError as error:
                raise APIError(str(error), param="stop") from None
            choices = request.n
        max_tokens, field = request.new_tokens
        if max_tokens > self.max_tokens:
            raise APIError(f"{field} must be at most {self.max_tokens} on this server, got {max_tokens}", param=field)
        try:
            sampling = SamplingConfig(request.temperature, request.top_k, request.top_p)
        except ValueError as error:  # (top_k and top_p are checked by the schema)
            raise APIError(str(error), param="temperature") from None
        gamma = request.gamma or self.gamma
        cold = isinstance(request, OpenAIRequest) and not request.cache_prompt
        lease = self.scheduler.lease(() if cold else ids)
        # "auto": the scheduler's controller (alone: adaptive gamma, from what the last request measured; batched:
        # rows allotted); a seeded request whose text the schedule could change gets its own timing-free one.
        schedule = lease.allotted() if gamma == "auto" and loaded.draft is not None \
            and not timing_free(request.seed, sampling, loaded.target.model) else gamma
        tokenizer = loaded.target.tokenizer
        generations = [Generation(lease.target, lease.draft, ids, max_new_tokens=max_tokens, gamma=schedule,
                                  sampling=sampling, seed=None if request.seed is None else request.seed + i,
                                  stop_token_ids=tokenizer.stop_token_ids, stop=stop, tokenizer=tokenizer,
                                  logprobs=request.top_logprobs_wanted) for i in range(choices)]
        echo = request.prompt if isinstance(request, CompletionRequest) and request.echo else None
        return Job(loaded, lease, generations, len(ids), gamma if loaded.draft is not None else 0, list(ids), echo,
                   cold)

    async def verify_costs(self) -> dict:
        """The served target's measured pass costs, T(k) for k = 1, 2, 4, 8, 16 (measured once, between
        generations: it uses the target's cache) -> {"engine", "ms": {k: ms}, "ratio": {k: T(k) / T(1)}}."""
        if self._costs is None:
            loaded = await self.ready()
            lease = self.scheduler.lease()
            await self.scheduler.acquire(lease, None, None)
            try:
                if self._costs is None:
                    def measure():
                        with self.scheduler.exclusive():  # alone, so that no one else's rows are timed
                            return pass_times({"t": lease.target}, COST_KS, repeats=3)["t"]
                    times = await anyio.to_thread.run_sync(self._computed, measure)
                    self._costs = {"engine": loaded.target.engine, "ms": {k: t * 1e3 for k, t in times.items()},
                                   "ratio": {k: t / times[1] for k, t in times.items()}}
            finally:
                self.scheduler.release(lease)
        return self._costs

    # --- running -------------------------------------------------------------------------------------------------

    async def _turn(self, job: Job, deadline: float | None,
                    is_disconnected: Callable[[], Awaitable[bool]] | None) -> bool:
        """Wait (in arrival order) until the job's lease holds a sequence (True); False if the client left
        meanwhile; a 503 past the deadline."""
        try:
            if not await self.scheduler.acquire(job.lease, deadline, is_disconnected):
                log.info("client went away while waiting its turn: nothing run")
                return False
        except TimeoutError:
            raise APIError(f"the server is busy: the request waited its turn past the time limit "
                           f"({self.request_timeout:g} s)", 503, code="server_busy") from None
        if job.cold:  # (the sequence is this job's now, and no pass of it runs until its first round)
            job.lease.target.clear()
            if job.lease.draft is not None:
                job.lease.draft.clear()
        return True

    def _computed(self, work: Callable[[], R]) -> R:
        """work() from a worker thread: batched, in this thread computing alone (`threads.serial`) while the
        scheduler runs the passes on the engine thread; else all of it on the engine thread, which then runs the
        models' passes as well (one request at a time: nothing to run beside it)."""
        if self.scheduler.batched:
            serial()
            return work()
        return on_engine(work)

    def _step(self, steps: Iterator[Round]):
        """The next round of a generation (in a worker thread: `_computed`), as one of the scheduler's rounds."""
        def step():
            with self.scheduler.inside():
                return next(steps, _DONE)
        return self._computed(step)

    async def score(self, job: Job, is_disconnected: Callable[[], Awaitable[bool]] | None = None,
                    deadline: float | None = None) -> None:
        """With echo and logprobs: the prompt's logprobs from a plain scoring pass of the target (its unadjusted
        list, as `sampling.log_probs` reports greedy tokens), in `job.prompt_logprobs`. Runs between generations."""
        top = job.generation.top_logprobs
        if job.echo is None or top is None:
            return
        if not await self._turn(job, deadline, is_disconnected):
            return

        def scored():
            with self.scheduler.inside():
                return _score_prompt(job.lease.target, job.prompt, top)
        job.prompt_logprobs = await anyio.to_thread.run_sync(self._computed, scored)

    def admit(self, job: Job) -> Ticket:
        """A place for one more generating request, or a 503 when max_queue are already running or waiting."""
        if self.admitted >= self.max_queue:
            raise APIError(f"the server is busy: {self.max_queue} requests are already generating or waiting their "
                           "turn; retry later", 503, code="server_busy")
        self.admitted += 1
        return Ticket(self, job, time.monotonic() + self.request_timeout)

    async def rounds(self, job: Job, generation: Generation,
                     is_disconnected: Callable[[], Awaitable[bool]] | None = None,
                     deadline: float | None = None) -> AsyncIterator[Round]:
        """The rounds of one of the job's generations as they happen, once the job's lease holds a sequence (which
        it keeps until its ticket is released).

        A round runs in a worker thread, and this returns only after the thread has finished it (anyio does not
        abandon a running thread on cancellation). A client that leaves while waiting costs nothing (not even the
        prefill). Past the deadline (time.monotonic seconds) a waiting generation raises a 503 and a running one
        stops after its round. Use it with `contextlib.aclosing`.
        """
        if not await self._turn(job, deadline, is_disconnected):
            return
        if is_disconnected is not None and await is_disconnected():
            log.info("client went away while waiting its turn: nothing run")
            return
        steps = iter(generation)
        try:
            while True:
                try:
                    rnd = await anyio.to_thread.run_sync(self._step, steps)
                except TemperatureTooSmall as error:
                    raise APIError(str(error), param="temperature") from None
                if rnd is _DONE:
                    return
                yield rnd
                if is_disconnected is not None and await is_disconnected():
                    log.info("client went away: generation stopped after %d rounds", generation.stats.rounds)
                    return
                if deadline is not None and time.monotonic() > deadline:
                    log.warning("time limit (%g s) reached: generation stopped after %d rounds",
                                self.request_timeout, generation.stats.rounds)
                    return
        finally:
            steps.close()

    async def run(self, job: Job, generation: Generation, is_disconnected=None,
                  deadline: float | None = None) -> list[Round]:
        async with contextlib.aclosing(self.rounds(job, generation, is_disconnected, deadline)) as rounds:
            return [rnd async for rnd in rounds]

    async def choices(self, job: Job, is_disconnected=None, deadline: float | None = None
                      ) -> AsyncIterator[tuple[int, Round]]:
        """(choice index, round) of each of a job's generations in turn (each as `rounds` runs it, all under one
        deadline)."""
        for i, generation in enumerate(job.generations):
            async with contextlib.aclosing(self.rounds(job, generation, is_disconnected, deadline)) as rounds:
                async for rnd in rounds:
                    yield i, rnd
            if is_disconnected is not None and await is_disconnected():
                return


def _score_prompt(model: CausalLM, prompt: list[int], top: int) -> list[TokenLogprob]:
    """Each prompt token's logprob after the first (and the `top` most likely tokens there) from the target's
    passes over the prompt, SCORE_CHUNK tokens at a time."""
    scored = []
    model.rollback(0)
    for start in range(0, len(prompt) - 1, SCORE_CHUNK):
        fed = prompt[start: min(start + SCORE_CHUNK, len(prompt) - 1)]
        rows = log_probs(model.extend(torch.tensor(fed, dtype=torch.int64)), GREEDY)  # [k, V]: row i predicts i + 1
        nexts = prompt[start + 1: start + 1 + len(fed)]
        chosen = rows.gather(1, torch.tensor(nexts, dtype=torch.int64)[:, None])[:, 0].tolist()  # [k]
        values, tokens = torch.topk(rows, top, dim=-1)  # [k, top] each
        scored += [TokenLogprob(t, lp, [(int(a), float(v)) for a, v in zip(ts, vs, strict=True)])
                   for t, lp, ts, vs in zip(nexts, chosen, tokens.tolist(), values.tolist(), strict=True)]
    model.rollback(0)
    return scored
