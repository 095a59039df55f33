"""The server under bad input and load: text that is not Unicode, huge or slow bodies, foreign Host headers, a full
queue, the time limit, clients that leave while queued, tokenising off the event loop."""

from __future__ import annotations

import json
import logging
import threading
import time

import anyio
import pytest
from fastapi.testclient import TestClient
from serving import held

from specdecode.cli import main
from specdecode.cli.serve import allowed_hosts
from specdecode.server import create_app
from specdecode.server.guard import Guard
from specdecode.server.schemas import CompletionRequest


def make_client(**options) -> TestClient:
    """One request at a time unless told (sequences), so that a model's patched `extend` is the one that runs."""
    return TestClient(create_app(target="toy", max_prompt_tokens=64, max_tokens=300, **{"sequences": 1} | options))


@pytest.fixture(scope="module")
def client():
    with make_client(max_body_bytes=2000) as client:
        yield client


def error(response, status: int) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


@pytest.mark.parametrize("path, body", [
    ("/v1/completions", b'{"prompt": "the \\ud800 cat"}'),
    ("/v1/completions", b'{"prompt": "the \\ud800 cat", "stream": true}'),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "the cat \\udfff"}]}'),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud83d"}]}]}'),
    ("/api/live", b'{"prompt": "\\ud800"}'),
])
def test_a_lone_surrogate_is_a_400_not_a_traceback(client, caplog, path, body):
    with caplog.at_level(logging.ERROR):
        response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert "unicode" in error(response, 400)["message"].lower()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_lone_surrogate_never_reaches_a_real_tokenizer():
    """A transformers tokenizer raises TypeError on a lone surrogate (the 500 the probe found): refused before it."""
    from tiny import word_tokenizer

    from specdecode.load import Target
    from specdecode.server.errors import APIError
    from specdecode.server.service import Loaded, Service
    from specdecode.tokenizer import TextTokenizer
    from specdecode.toy import WORDS

    service = Service("toy", None, "auto", "auto", "auto", 64, 300)
    toy = service.load().target
    loaded = Loaded(Target(toy.model, TextTokenizer(word_tokenizer(list(WORDS))), "toy", "words"), None, "none")
    assert service.encode(loaded, text="the cat") == loaded.target.tokenizer.encode("the cat", chat=False)
    for request in ({"text": "the \ud800 cat"}, {"messages": [{"role": "user", "content": "\udfff the"}]}):
        with pytest.raises(APIError, match="not valid Unicode"):
            service.encode(loaded, **request)


def test_a_body_over_the_limit_is_a_413_before_it_is_parsed(client):
    big = b'{"prompt": "the cat", "junk": "' + b"x" * 3000 + b'"}'
    assert "larger than" in error(client.post("/v1/completions", content=big,
                                              headers={"Content-Type": "application/json"}), 413)["message"]
    chunked = (part for part in [big[:1000], big[1000:]])  # no Content-Length: counted as it arrives
    error(client.post("/v1/completions", content=chunked, headers={"Content-Type": "application/json"}), 413)
    assert client.post("/v1/completions", json={"prompt": "the cat", "max_tokens": 2}).status_code == 200


def test_a_body_that_stops_halfway_is_a_408():
    sent = []

    async def scenario():
        async def receive():
            if not sent:
                sent.append("part")
                return {"type": "http.request", "body": b'{"prompt": ', "more_body": True}
            await anyio.sleep(60)  # the rest never comes

        async def send(message):
            sent.append(message)

        async def app(scope, receive, send):
            raise AssertionError("the app must not see a request whose body never arrived")

        guard = Guard(app, max_body_bytes=100, body_timeout=0.2)
        with anyio.fail_after(5):
            await guard({"type": "http", "method": "POST", "path": "/", "headers": []}, receive, send)

    anyio.run(scenario)
    assert sent[1]["type"] == "http.response.start" and sent[1]["status"] == 408


def test_sizes_a_request_chooses_are_capped(client):
    error(client.get("/api/draws", params={"n": 1_000_000}), 400)
    huge = " ".join(["the"] * 1100)  # over 64 characters per allowed token (of 64): refused before tokenising
    with make_client() as roomy:
        assert error(roomy.post("/v1/completions", json={"prompt": huge}), 400)["code"] == "context_length_exceeded"


def test_a_foreign_host_is_refused_where_there_is_an_allowlist():
    with TestClient(create_app(target="toy", allowed_hosts=["127.0.0.1", "localhost", "::1"]),
                    base_url="http://127.0.0.1:8000") as client:
        assert client.get("/health").status_code == 200
        for host in ("localhost:8000", "[::1]:8000", "LOCALHOST"):
            assert client.get("/health", headers={"Host": host}).status_code == 200
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example"):
            assert error(client.get("/health", headers={"Host": host}), 400)["code"] == "host_not_allowed"
            error(client.post("/v1/completions", json={"prompt": "the"}, headers={"Host": host}), 400)


def test_serve_answers_only_loopback_names_by_default():
    assert set(allowed_hosts("127.0.0.1", None)) >= {"127.0.0.1", "localhost", "::1"}
    assert allowed_hosts("0.0.0.0", None) is None  # bound to every interface on purpose: any name
    assert allowed_hosts("127.0.0.1", "example.org, localhost") == ["example.org", "localhost"]
    assert allowed_hosts("127.0.0.1", "*") is None
    for flags in (["--max-queue", "0"], ["--request-timeout", "0"], ["--max-body-bytes", "-1"],
                  ["--allowed-hosts", ","], ["--draft-confidence", "2"]):
        assert main(["serve", *flags]) == 2


def test_the_served_draft_stops_at_the_confidence_asked_for():
    with TestClient(create_app(target="toy", draft_confidence=0.5)) as client:
        assert client.post("/v1/completions", json={"prompt": "the cat", "max_tokens": 4}).status_code == 200
        assert client.app.state.service.load().draft.confidence == 0.5
    with pytest.raises(ValueError, match="confidence threshold"):
        create_app(target="toy", draft_confidence=-1)


def test_tokenising_does_not_hold_up_the_event_loop():
    with make_client() as client:
        service = client.app.state.service
        tokenizer = service.load().target.tokenizer
        encode = tokenizer.encode

        def slow_encode(text, chat=True):
            time.sleep(1.5)
            return encode(text, chat)

        tokenizer.encode = slow_encode
        try:
            thread = threading.Thread(target=lambda: client.post("/v1/completions", json={"prompt": "the",
                                                                                          "max_tokens": 2}))
            thread.start()
            time.sleep(0.3)
            start = time.perf_counter()
            assert client.get("/health").status_code == 200
            assert time.perf_counter() - start < 0.8
            thread.join()
        finally:
            tokenizer.encode = encode


def test_a_full_queue_is_a_503_before_the_first_byte_and_the_queue_drains():
    with make_client(max_queue=2) as client:
        service = client.app.state.service
        service.load()
        hold = held(service)  # a generation holds the model: requests queue up
        hold.__enter__()
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(
            client.post("/v1/completions", json={"prompt": "the cat", "max_tokens": 5}).status_code))
            for _ in range(2)]
        try:
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 10
            while service.admitted < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            busy = error(client.post("/v1/completions", json={"prompt": "the", "max_tokens": 5}), 503)
            assert busy["code"] == "server_busy"
            with client.stream("POST", "/v1/completions", json={"prompt": "the", "stream": True}) as response:
                assert response.status_code == 503 and "server_busy" in response.read().decode()
            assert client.get("/health").status_code == 200  # the page and health are never queued
        finally:
            hold.__exit__(None, None, None)
        for thread in threads:
            thread.join(timeout=30)
        assert answers == [200, 200] and service.admitted == 0
        assert client.post("/v1/completions", json={"prompt": "the", "max_tokens": 5}).status_code == 200


def test_the_time_limit_refuses_a_long_wait_and_cuts_a_long_generation():
    with make_client(request_timeout=0.5) as client:
        service = client.app.state.service
        loaded = service.load()
        with held(service):
            message = error(client.post("/v1/completions", json={"prompt": "the", "max_tokens": 5}), 503)["message"]
        assert "time limit" in message
        model = loaded.target.model
        extend = model.extend
        model.extend = lambda tokens, keep=None: (time.sleep(0.02), extend(tokens, keep))[1]  # ~0.02 s a pass
        try:
            start = time.perf_counter()
            answer = client.post("/v1/completions", json={"prompt": "the", "max_tokens": 300, "gamma": 1}).json()
            assert time.perf_counter() - start < 3
        finally:
            del model.extend
        assert answer["choices"][0]["finish_reason"] == "length"
        assert 0 < answer["usage"]["completion_tokens"] < 300


def test_a_temperature_is_refused_only_where_the_logits_divided_by_it_overflow():
    with make_client() as client:
        model = client.app.state.service.load().target.model
        body = {"prompt": "the", "max_tokens": 5, "temperature": 1e-29}
        assert client.post("/v1/completions", json=body).status_code == 200
        extend = model.extend
        model.extend = lambda tokens, keep=None: extend(tokens, keep) * 1e30  # / 1e-29: past float32
        try:
            refused = error(client.post("/v1/completions", json=body), 400)
            with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as response:
                event = json.loads(next(line for line in response.iter_lines() if line.startswith("data: "))[6:])
        finally:
            del model.extend
        assert refused["param"] == event["error"]["param"] == "temperature" and "overflow" in refused["message"]


def test_a_stream_that_waits_past_the_time_limit_says_server_busy_as_the_unstreamed_503_does():
    with make_client(request_timeout=0.3) as client:
        service = client.app.state.service
        service.load()
        with held(service), client.stream("POST", "/v1/completions",
                                          json={"prompt": "the", "stream": True}) as response:
            events = [line for line in response.iter_lines() if line.startswith("data: ")]
        busy = json.loads(events[0].removeprefix("data: "))["error"]
        assert busy["code"] == "server_busy" and "time limit" in busy["message"] and events[-1] == "data: [DONE]"


def test_a_client_that_leaves_while_queued_costs_no_model_work():
    with make_client() as client:
        service = client.app.state.service
        loaded = service.load()
        passes = []
        model = loaded.target.model
        extend = model.extend
        model.extend = lambda tokens, keep=None: (passes.append(len(tokens)), extend(tokens, keep))[1]

        async def scenario():
            job = service.job(loaded, [0, 1, 2, 3], CompletionRequest(prompt="x", max_tokens=50, seed=1))
            calls = 0

            async def gone() -> bool:
                nonlocal calls
                calls += 1
                return True

            hold = held(service)
            await anyio.to_thread.run_sync(hold.__enter__)
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: anyio.to_thread.run_sync(lambda: (time.sleep(0.3),
                                                                           hold.__exit__(None, None, None))))
                rounds = await service.run(job, job.generation, gone)
            service.scheduler.release(job.lease)
            assert rounds == [] and calls >= 1 and job.generation.stats.rounds == 0

        try:
            anyio.run(scenario)
        finally:
            del model.extend
        assert passes == []  # not even the prefill


@pytest.mark.parametrize("temperature", [1e-39, 101, 1e300])
def test_absurd_temperatures_are_refused_by_the_api_and_the_cli(client, temperature):
    for path, body in [("/v1/completions", {"prompt": "the"}), ("/api/live", {"prompt": "the"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "the"}]})]:
        for stream in (False, True):
            response = client.post(path, json={**body, "temperature": temperature, "stream": stream})
            refused = error(response, 400)
            assert "between 1e-30 and 100" in refused["message"] and refused["param"] == "temperature"
    assert main(["generate", "--target", "toy", "the cat", "--temperature", str(temperature)]) == 2
