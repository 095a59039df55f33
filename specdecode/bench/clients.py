"""`specdecode bench --clients N`: N concurrent streaming clients over loopback, against our server and llama.cpp's.

Each server runs in its own process on a free loopback port and is driven over HTTP only (its internals may change):
ours as `specdecode serve` runs it, and, for a target shipped as a GGUF file, llama-server on that file with `-np N`
slots, plain and (where the target has a named draft) speculating with `-md DRAFT`. Every client sends its share of
the held-out prompts one request after another: POST /v1/chat/completions, streamed, temperature 0, a fixed seed,
max_tokens = --max-new-tokens. The chat endpoint, not /v1/completions, because the held-out prompts are chat prompts
(the rest of the bench runs them chat-templated) and both servers render the same template from the model (llama-server
with --jinja reads the GGUF's own; ours reads the same file's).

The same prompts run with 1 client, then with N, each server in turn (1 client: ours first; N: ours last), all the
servers up at once and idle while another is measured. Per request: time to first token (TTFT: the first chunk with
text), the gaps between chunks with text, and the time per output token after the first (TPOT, (last - first chunk)
/ (tokens - 1), tokens as the server's usage counts them). Per load: aggregate tokens/s = completion tokens / the
load's wall time; TTFT p50/p95 over requests; per-token latency p50/p95 over all tokens (each token counts its
request's TPOT: a chunk may carry a round of several tokens, so chunk gaps alone would not be per token); chunk-gap
p50/p95 beside it. Exactness: with temperature 0 each request's text from our server under N clients must equal the
same request's text served alone (the 1-client load); mismatches are counted and reported, never fatal.

Beside the servers, the same requests run in this process by the library itself, one at a time, with no server and no
scheduler (`InProcess`): single-request speculative decoding, which our server's 1-client load should match. The two
alternate prompt by prompt (which goes first alternating too), so a CPU whose speed drifts over minutes shifts both.

The report (clients.json, clients.md) is `clients_report`'s.

Bounded: each request has a timeout, each load a cap (its clients' shares at that timeout, plus a margin), a server
that does not come up in time is a one-line ValueError; nothing here waits without a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..prompts import KINDS, Prompt, load_prompts
from .process import dies_with_its_parent, free_port, stop, wait_healthy

SEED = 1234  # every request's seed (greedy needs none; a sampled run would)
CHAT = "/v1/chat/completions"
STARTUP_SECONDS = 600.0  # a server's start and first (model-loading) request
TOY_TEXTS = ("the cat", "the dog sat on", "the fish", "on the", "the cat ran on the mat", "the dog")


def bench_prompts(target: str, per_kind: int) -> list[Prompt]:
    """The held-out prompts, `per_kind` of each kind, in kind order; the toy target (eight words) gets toy texts."""
    if target == "toy":
        return [Prompt(f"toy-{i}", "toy", "given", TOY_TEXTS[i % len(TOY_TEXTS)] + " the" * (i // len(TOY_TEXTS)))
                for i in range(per_kind * len(KINDS))]
    return [p for kind in KINDS for p in load_prompts("test", (kind,))[:per_kind]]


@dataclass
class Served:
    """A server under load: its name in the report, its base URL, the body fields it needs beside the shared ones,
    whether it claims that an answer never depends on the load (ours), and how to stop it."""

    name: str
    url: str
    stop: Callable[[], None]
    extra: dict = field(default_factory=dict)
    exact: bool = False


@dataclass
class Outcome:
    """One request, as its client saw it. Times in seconds from the request's start."""

    prompt_id: str
    client: int
    text: str = ""
    tokens: int = 0  # completion tokens: the server's usage, else the chunks with text
    prompt_tokens: int | None = None  # as the server's usage counts them
    ttft: float | None = None
    last: float | None = None  # the last chunk with text
    gaps: list[float] = field(default_factory=list)  # between successive chunks with text
    seconds: float = 0.0
    speculative: dict | None = None  # ours: the answer's `speculative` object
    error: str | None = None

    @property
    def per_token(self) -> float | None:
        """Seconds per output token after the first (TPOT)."""
        if self.tokens < 2 or self.ttft is None or self.last is None:
            return None
        return (self.last - self.ttft) / (self.tokens - 1)


@dataclass
class Load:
    method: str
    clients: int
    seconds: float  # wall time, first request sent to last answer ended
    outcomes: list[Outcome]
    capped: bool = False  # the load's cap stopped it (its unfinished requests are errors)
    host_gflops: tuple[float, float] | None = None  # the cores' compute rate just before and just after (`probed`)


def request_body(prompt: Prompt, max_tokens: int, extra: dict) -> dict:
    return {"messages": [{"role": "user", "content": prompt.prompt}], "stream": True,
            "stream_options": {"include_usage": True}, "temperature": 0, "max_tokens": max_tokens, "seed": SEED,
            **extra}


def _message(text: str) -> str:
    """A refusal's one-line reason from its body (OpenAI's error object, or the text itself)."""
    try:
        error = json.loads(text).get("error")
        text = error.get("message", text) if isinstance(error, dict) else str(error or text)
    except (ValueError, AttributeError):
        pass
    return " ".join(text.split())[:200] or "no body"


def _chunk_text(chunk: dict) -> str:
    choices = chunk.get("choices") or [{}]
    delta = choices[0].get("delta")
    return (delta.get("content") if delta is not None else choices[0].get("text")) or ""


async def stream_request(http, url: str, body: dict, timeout: float, prompt_id: str = "", client: int = 0
                         ) -> Outcome:
    """One streamed request, bounded by `timeout` seconds end to end; whatever goes wrong is the outcome's error."""
    import httpx

    out = Outcome(prompt_id, client)
    start = time.perf_counter()
    pieces, usage, chunks, done, previous = [], None, 0, False, None
    try:
        async with asyncio.timeout(timeout), http.stream("POST", url, json=body) as response:
            if response.status_code != 200:
                refusal = (await response.aread()).decode(errors="replace")
                out.error = f"HTTP {response.status_code}: {_message(refusal)}"
            else:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    chunk = json.loads(data)
                    if chunk.get("error"):
                        out.error = f"error in the stream: {_message(data)}"
                        break
                    now = time.perf_counter() - start
                    if piece := _chunk_text(chunk):
                        if out.ttft is None:
                            out.ttft = now
                        else:
                            out.gaps.append(now - previous)
                        previous = out.last = now
                        chunks += 1
                        pieces.append(piece)
                    usage = chunk.get("usage") or usage
                    out.speculative = chunk.get("speculative") or out.speculative
                if not done and out.error is None:
                    out.error = "the stream ended without [DONE]"
    except TimeoutError:
        out.error = f"no whole answer within {timeout:g} s"
    except (httpx.HTTPError, OSError, ValueError) as error:
        out.error = f"{type(error).__name__}: {error}".rstrip(": ")
    out.seconds = time.perf_counter() - start
    out.text = "".join(pieces)
    out.tokens = int(usage["completion_tokens"]) if usage and "completion_tokens" in usage else chunks
    out.prompt_tokens = usage.get("prompt_tokens") if usage else None
    return out


def load_cap(prompts: int, clients: int, request_timeout: float) -> float:
    """The most seconds one load may take: its largest share of requests, each at its timeout, plus a margin."""
    return math.ceil(prompts / clients) * request_timeout + 10.0


def run_load(served: Served, prompts: list[Prompt], clients: int, max_tokens: int, request_timeout: float,
             cap: float | None = None, progress: bool = True) -> Load:
    """`clients` concurrent clients, client i sending prompts i, i + clients, ... one after another."""
    return asyncio.run(_load(served, prompts, clients, max_tokens, request_timeout,
                             load_cap(len(prompts), clients, request_timeout) if cap is None else cap, progress))


async def _load(served: Served, prompts: list[Prompt], clients: int, max_tokens: int, request_timeout: float,
                cap: float, progress: bool) -> Load:
    import httpx

    outcomes: list[Outcome] = []
    bar = tqdm(total=len(prompts), desc=f"{served.name}, {clients} client{'s' if clients > 1 else ''}",
               unit="request", file=sys.stderr, disable=not progress, leave=False)
    timeout = httpx.Timeout(request_timeout, connect=min(10.0, request_timeout))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(http, index: int) -> None:
        for prompt in prompts[index::clients]:
            outcomes.append(await stream_request(http, served.url + CHAT, request_body(prompt, max_tokens,
                                                 served.extra), request_timeout, prompt.id, index))
            bar.update()

    capped = False
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as http:
        start = time.perf_counter()
        try:
            async with asyncio.timeout(cap):
                await asyncio.gather(*(client(http, i) for i in range(clients)))
        except TimeoutError:
            capped = True
        seconds = time.perf_counter() - start
    bar.close()
    answered = {o.prompt_id for o in outcomes}
    outcomes += [Outcome(p.id, i % clients, error=f"unfinished: the load's cap of {cap:g} s was reached")
                 for i, p in enumerate(prompts) if p.id not in answered]
    return Load(served.name, clients, seconds, outcomes, capped)


def merged(loads: list[Load]) -> Load:
    """One load of several run one after another (their wall times added)."""
    return Load(loads[0].method, loads[0].clients, sum(load.seconds for load in loads),
                [o for load in loads for o in load.outcomes], any(load.capped for load in loads))


def warm_up(served: Served, prompt: Prompt, max_tokens: int, timeout: float = STARTUP_SECONDS) -> Outcome:
    """One untimed request (ours loads its models on the first); a failure is a one-line ValueError."""

    async def one() -> Outcome:
        import httpx

        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=10.0)) as http:
            return await stream_request(http, served.url + CHAT, request_body(prompt, max_tokens, served.extra),
                                        timeout, prompt.id)

    outcome = asyncio.run(one())
    if outcome.error:
        raise ValueError(f"{served.name}: the warm-up request failed: {outcome.error}")
    return outcome


# Servers


def start_ours(target: str, draft: str | None, threads: int, clients: int, request_timeout: float,
               serve_flags: list[str] = (), startup_seconds: float = STARTUP_SECONDS) -> Served:
    """`specdecode serve` in its own process (this checkout's code, torch on `threads` threads), its queue long
    enough for every client; serve_flags are passed on (e.g. --sequences N where serve has it)."""
    port = free_port()
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "OMP_NUM_THREADS": str(threads),
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "specdecode", "serve", "--target", target, *(["--draft", draft] if draft else []),
               "--port", str(port), "--max-queue", str(max(16, 2 * clients)), "--request-timeout",
               f"{request_timeout:g}", "--log-level", "warning", *serve_flags]
    log = tempfile.TemporaryFile()  # noqa: SIM115 (open as long as the server runs)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env, preexec_fn=dies_with_its_parent)

    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, process, log, "our server", startup_seconds, lambda: stop(process, log))
    return Served("ours", url, lambda: stop(process, log), {"cache_prompt": False}, exact=True)


def llama_server_files(target: str, draft: str | None) -> tuple[Path | None, Path | None, str | None]:
    """(the target's GGUF file, the draft GGUF llama-server speculates with, why llama-server is skipped) for a
    target that ships as a GGUF file: a named model, the default target's file, or a FILE.gguf. The draft: --draft
    when it names a named draft model, else the named draft made for this target; none for other targets."""
    from ..models.default import DEFAULT_TARGET, gguf_path
    from ..models.download import NAMED, gguf_file

    if target in NAMED and NAMED[target].role == "target":
        named = draft if draft in NAMED and NAMED[draft].role == "draft" else \
            next((n for n, spec in NAMED.items() if spec.role == "draft"), None)
        return gguf_file(target), gguf_file(named) if named else None, None
    if target == DEFAULT_TARGET:
        return gguf_path(), None, None
    if target.endswith(".gguf") and Path(target).is_file():
        return Path(target), None, None
    return None, None, f"{target} is not a GGUF target (a named model, {DEFAULT_TARGET} or a FILE.gguf)"


def start_llama_server(gguf: Path, threads: int, clients: int, draft: Path | None = None) -> Served:
    """llama-server on `gguf` with `clients` slots (-np; each slot the context one request had alone), continuous
    batching as it runs by default, its prompt cache off (the same prompts run at 1 and at N clients: so is ours)."""
    from .llama_server import LlamaServer

    flags = ["--jinja"]
    if draft is not None:
        flags += ["-md", str(draft), "--spec-type", "draft-simple"]
    server = LlamaServer(gguf, threads, flags, context=4096 * clients, slots=clients)
    name = "llama-server plain" if draft is None else f"llama-server draft {draft.stem}"
    return Served(name, f"http://127.0.0.1:{server.port}", server.close, {"cache_prompt": False})


class InProcess:
    """The requests the clients send, run by the library in this process one at a time (`Generation`, as `specdecode
    generate` runs it): the same models and draft as `specdecode serve` loads by default, the same chat template,
    greedy, gamma "auto" with one controller kept across requests (as the server keeps what its last request
    learned), each request cold (target and draft forget cached prompts first, as cache_prompt false asks of ours)."""

    name = "ours in process"

    def __init__(self, target: str, draft: str | None, threads: int):
        from ..adaptive import AdaptiveGamma
        from ..load import add_prompt_paths, default_draft, load_draft, load_target

        self.threads = threads
        self.target = load_target(target)
        self.draft = load_draft(draft or default_draft(self.target), self.target)
        add_prompt_paths(self.target, self.draft, long_lived=True)
        self.draft_name = self.draft.name if self.draft is not None else "none"
        self.schedule = AdaptiveGamma.for_target(self.target.model)

    def request(self, prompt: Prompt, max_tokens: int) -> Outcome:
        """One request as a client of the server would see it: times from its start, the text of its rounds."""
        from ..cpu import torch_threads
        from ..engine import Generation, timing_free
        from ..sampling import GREEDY

        model, tokenizer = self.target.model, self.target.tokenizer
        out = Outcome(prompt.id, 0)
        start = time.perf_counter()
        with torch_threads(self.threads):
            ids = tokenizer.encode_chat([{"role": "user", "content": prompt.prompt}])
            model.clear()
            if self.draft is not None:
                self.draft.clear()
            # (a seed whose text the schedule could change gets Generation's own timing-free schedule, as in serve)
            schedule = "auto" if self.draft is None or timing_free(SEED, GREEDY, model) else self.schedule
            generation = Generation(model, self.draft, ids, max_new_tokens=max_tokens, gamma=schedule,
                                    sampling=GREEDY, seed=SEED, stop_token_ids=tokenizer.stop_token_ids,
                                    tokenizer=tokenizer)
            shown, previous = 0, None
            for _ in generation:
                text = generation.text(final=False)
                if len(text) > shown:  # a round whose text a client would get as a chunk
                    now = time.perf_counter() - start
                    if out.ttft is None:
                        out.ttft = now
                    else:
                        out.gaps.append(now - previous)
                    previous = out.last = now
                    shown = len(text)
        out.seconds = time.perf_counter() - start
        out.text, out.tokens, out.prompt_tokens = generation.text(), len(generation.new_tokens), len(ids)
        out.speculative = generation.stats.as_dict() | {"draft": self.draft_name}
        return out


def run_alone(served: Served, in_process: InProcess, prompts: list[Prompt], max_tokens: int,
              request_timeout: float, progress: bool = True) -> tuple[Load, Load]:
    """Our server with 1 client and the same requests in process, prompt by prompt in turn (the server first on
    even prompts, the library on odd ones) -> (the server's 1-client load, the in-process load)."""
    served_loads, outcomes, seconds = [], [], 0.0
    for i, prompt in enumerate(tqdm(prompts, desc=f"{served.name} and {in_process.name}, 1 client", unit="request",
                                    file=sys.stderr, disable=not progress, leave=False)):
        for turn in ((0, 1) if i % 2 == 0 else (1, 0)):
            if turn == 0:
                served_loads.append(run_load(served, [prompt], 1, max_tokens, request_timeout, progress=False))
            else:
                outcomes.append(in_process.request(prompt, max_tokens))
                seconds += outcomes[-1].seconds
    return merged(served_loads), Load(in_process.name, 1, seconds, outcomes)


def probed(run: Callable[[], Load | tuple[Load, ...]], threads: int) -> Load | tuple[Load, ...]:
    """run() with the host's compute rate (`compute_rate`, on `threads` torch threads) measured just before and just
    after, kept on the load(s) it returns: passes of several rows are compute-bound, and a shared host's compute rate
    moves within minutes, so loads run minutes apart may differ by the host as well as by the servers."""
    from ..cpu import torch_threads
    from ..models.costs import compute_rate

    def rate() -> float:
        with torch_threads(threads):
            return compute_rate() / 1e9

    before = rate()
    loads = run()
    after = rate()
    for load in loads if isinstance(loads, tuple) else (loads,):
        load.host_gflops = (before, after)
    return loads


# Figures


def percentile(values: list[float], q: float, weights: list[float] | None = None) -> float | None:
    """The q-th percentile (nearest rank; weighted: each value counts its weight), None of nothing."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q, weights=None if weights is None else
                               np.asarray(weights, dtype=float), method="inverted_cdf"))


def latencies(outcomes: list[Outcome]) -> dict:
    """TTFT, per-token latency (over all tokens) and chunk gaps, p50 and p95, in milliseconds, of answered requests."""
    done = [o for o in outcomes if o.error is None]
    timed = [o for o in done if o.per_token is not None]
    ttft = [o.ttft for o in done if o.ttft is not None]
    per_token, weights = [o.per_token for o in timed], [o.tokens - 1 for o in timed]
    gaps = [g for o in done for g in o.gaps]
    figures = {}
    for name, values, w in (("ttft", ttft, None), ("per_token", per_token, weights), ("chunk_gap", gaps, None)):
        for q in (50, 95):
            value = percentile(values, q, w)
            figures[f"{name}_p{q}_ms"] = None if value is None else value * 1e3
    return figures


def summarize(load: Load) -> dict:
    """A load's figures: aggregate tokens/s, latencies overall and per client, errors."""
    done = [o for o in load.outcomes if o.error is None]
    tokens = sum(o.tokens for o in done)
    stats = [o.speculative for o in done if o.speculative]
    calls = sum(s.get("target_calls") or 0 for s in stats)
    per_client = []
    for client in sorted({o.client for o in load.outcomes}):
        mine = [o for o in load.outcomes if o.client == client]
        answered = [o for o in mine if o.error is None]
        busy = sum(o.seconds for o in answered)
        per_client.append({"client": client, "requests": len(mine), "errors": len(mine) - len(answered),
                           "tokens": sum(o.tokens for o in answered),
                           "tokens_per_second": sum(o.tokens for o in answered) / busy if busy > 0 else None,
                           **latencies(mine)})
    return {"clients": load.clients, "requests": len(load.outcomes), "errors": len(load.outcomes) - len(done),
            "error_examples": sorted({o.error for o in load.outcomes if o.error})[:3], "capped": load.capped,
            "tokens": tokens, "prompt_tokens": sum(o.prompt_tokens or 0 for o in done), "seconds": load.seconds,
            "tokens_per_second": tokens / load.seconds if load.seconds > 0 else 0.0,
            "tokens_per_target_call": tokens / calls if calls else None, **latencies(load.outcomes),
            "host_gflops": list(load.host_gflops) if load.host_gflops else None,
            "per_client": per_client, "answers": [answer(o) for o in load.outcomes]}


def answer(o: Outcome) -> dict:
    """One request in the report: its figures (ms), its error, its text."""
    return {"prompt_id": o.prompt_id, "client": o.client, "tokens": o.tokens, "prompt_tokens": o.prompt_tokens,
            "ttft_ms": None if o.ttft is None else o.ttft * 1e3,
            "per_token_ms": None if o.per_token is None else o.per_token * 1e3, "seconds": o.seconds,
            "error": o.error, "text": o.text}


def mismatches(outcomes: list[Outcome], reference: dict[str, str]) -> list[str]:
    """The prompts whose answer differs from the reference text for the same prompt (requests that failed, here or
    in the reference, are left out: they count as errors)."""
    return sorted(o.prompt_id for o in outcomes
                  if o.error is None and o.prompt_id in reference and o.text != reference[o.prompt_id])


def texts(load: Load) -> dict[str, str]:
    return {o.prompt_id: o.text for o in load.outcomes if o.error is None}


def compare(loads: dict[tuple[str, int], Load], exact: dict[str, bool], clients: int) -> list[dict]:
    """Per server: each load's figures, N clients over 1 (tokens/s), and the N-client answers that differ from the
    same request served alone (the 1-client load)."""
    methods = []
    for name in dict.fromkeys(method for method, _ in loads):
        alone, loaded = loads[(name, 1)], loads[(name, clients)]
        one, many, reference = summarize(alone), summarize(loaded), texts(alone)
        different = mismatches(loaded.outcomes, reference) if clients > 1 else []
        methods.append({"method": name, "exact": exact[name], "loads": {"1": one, str(clients): many},
                        "scaling": many["tokens_per_second"] / one["tokens_per_second"]
                        if one["tokens_per_second"] else None,
                        "compared": len([o for o in loaded.outcomes if o.error is None and o.prompt_id in
                                         reference]) if clients > 1 else 0,
                        "mismatches": len(different), "mismatched": different})
    return methods


def run_clients(target: str, draft: str | None, clients: int, prompts: list[Prompt], max_tokens: int, threads: int,
                request_timeout: float, serve_flags: list[str] = (), progress: bool = True,
                say: Callable[[str], None] = print) -> dict:
    """Start the servers, warm each up, run the 1-client load on each and then the N-client load (in the reverse
    order), stop them; the raw figures as a JSON-able dict."""
    if clients < 1:
        raise ValueError(f"--clients must be >= 1, got {clients}")
    if len(prompts) < clients:
        raise ValueError(f"--clients {clients} needs at least {clients} prompts, there are {len(prompts)}: raise "
                         "--prompts-per-kind")
    started = time.perf_counter()
    gguf, draft_gguf, skipped = llama_server_files(target, draft)
    if skipped:
        say(f"llama-server: skipped ({skipped})")
    elif draft_gguf is None:
        say(f"llama-server with a draft: skipped ({target} has no named draft model)")
    servers: list[Served] = []
    loads: dict[tuple[str, int], Load] = {}
    drafts: dict[str, str | None] = {}
    with contextlib.ExitStack() as stack:
        def started_server(served: Served) -> Served:
            stack.callback(served.stop)
            servers.append(served)
            return served

        started_server(start_ours(target, draft, threads, clients, request_timeout, serve_flags))
        if gguf is not None:
            started_server(start_llama_server(gguf, threads, clients))
            if draft_gguf is not None:
                started_server(start_llama_server(gguf, threads, clients, draft_gguf))
        for served in servers:
            warmed = warm_up(served, prompts[0], min(max_tokens, 8))
            drafts[served.name] = (warmed.speculative or {}).get("draft")
        say(f"{InProcess.name}: loading {target} ...")
        in_process = InProcess(target, draft, threads)
        in_process.request(prompts[0], min(max_tokens, 8))  # (untimed, as the servers' warm-up)
        for count in dict.fromkeys((1, clients)):
            for served in servers if count == 1 else servers[::-1]:
                if count == 1 and served is servers[0]:  # ours, alternating with the same requests in process
                    loads[(served.name, 1)], alone = probed(lambda s=served: run_alone(
                        s, in_process, prompts, max_tokens, request_timeout, progress), threads)
                else:
                    loads[(served.name, count)] = probed(lambda s=served, c=count: run_load(
                        s, prompts, c, max_tokens, request_timeout, progress=progress), threads)
    methods = compare(loads, {s.name: s.exact for s in servers}, clients)
    for m in methods:
        m["draft"] = drafts.get(m["method"])
    return {"target": target, "draft": draft, "clients": clients, "max_new_tokens": max_tokens, "seed": SEED,
            "endpoint": CHAT, "request_timeout": request_timeout, "prompts": [p.id for p in prompts],
            "llama_server_skipped": skipped, "methods": methods,
            "in_process": versus_in_process(alone, loads[(servers[0].name, 1)], in_process.draft_name),
            "seconds": time.perf_counter() - started}


def versus_in_process(alone: Load, served: Load, draft: str) -> dict:
    """The in-process load's figures, our server's 1-client tokens/s over it, and the requests whose text differs
    between the two."""
    figures, ours, reference = summarize(alone), summarize(served), texts(alone)
    different = mismatches(served.outcomes, reference)
    return {"method": alone.method, "draft": draft, "load": figures,
            "served_over_in_process": ours["tokens_per_second"] / figures["tokens_per_second"]
            if figures["tokens_per_second"] else None,
            "compared": len([o for o in served.outcomes if o.error is None and o.prompt_id in reference]),
            "mismatches": len(different), "mismatched": different}
