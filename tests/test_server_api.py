"""The HTTP API in-process (`create_app(target="toy")`): OpenAI shapes, streams, the page's endpoints, bad input."""

from __future__ import annotations

import contextlib
import json
import threading
import time

import anyio
import pytest
import torch
from fastapi.testclient import TestClient
from scipy import stats

from specdecode import analysis
from specdecode.cli import main
from specdecode.models.base import CausalLM
from specdecode.server import create_app
from specdecode.toy import DRAFT_NOISE, EXAMPLE_P, WORDS

MAX_PROMPT_TOKENS = 64
MAX_TOKENS = 300


@pytest.fixture(scope="module")
def app():
    return create_app(target="toy", max_prompt_tokens=MAX_PROMPT_TOKENS, max_tokens=MAX_TOKENS)


@pytest.fixture(scope="module")
def client(app):
    with TestClient(app) as client:
        yield client


def sse_events(text: str) -> list[tuple[str, str]]:
    """(event name, data) of each server-sent event; every event must be well-formed."""
    events = []
    assert text.endswith("\n\n"), "a stream ends with a blank line"
    for block in text.strip("\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            field, sep, value = line.partition(": ")
            assert sep and field in ("event", "data"), f"malformed SSE line {line!r}"
            if field == "event":
                name = value
            else:
                data.append(value)
        events.append((name, "\n".join(data)))
    return events


def openai_chunks(text: str) -> list[dict]:
    """The JSON chunks of an OpenAI stream, checking it ends with `data: [DONE]` and nothing else is odd."""
    events = sse_events(text)
    assert events[-1] == ("message", "[DONE]")
    assert all(name == "message" for name, _ in events)
    chunks = [json.loads(data) for _, data in events[:-1]]
    assert chunks and len({c["id"] for c in chunks}) == 1, "one id per stream"
    return chunks


def complete(client, **body) -> dict:
    response = client.post("/v1/completions", json={"prompt": "the cat", "max_tokens": 20, **body})
    assert response.status_code == 200, response.text
    return response.json()


def check_speculative(spec: dict, completion_tokens: int) -> None:
    assert set(spec) >= {"gamma", "draft", "target_calls", "accepted_per_round", "alpha", "tokens_per_target_call",
                         "tokens_per_second"}
    assert spec["draft"] == "toy-bigram-draft" and spec["gamma"] == "auto"  # the server's default schedule
    assert len(spec["accepted_per_round"]) == len(spec["drafted_per_round"]) == spec["target_calls"] >= 1
    assert all(0 <= n <= g for n, g in zip(spec["accepted_per_round"], spec["drafted_per_round"], strict=True))
    # (the first round is the prefill's: it chose the first token and drafted nothing)
    assert spec["prefill_rounds"] == 1 and spec["drafted_per_round"][0] == 0
    assert spec["mean_gamma"] == pytest.approx(sum(spec["drafted_per_round"]) / (spec["target_calls"] - 1))
    # every round emits its accepted drafts plus one corrected or bonus token (the toy has no stop token)
    assert sum(spec["accepted_per_round"]) + spec["target_calls"] == completion_tokens
    assert spec["tokens_per_target_call"] == pytest.approx(completion_tokens / spec["target_calls"])
    assert 0 <= spec["alpha"] <= 1 and spec["tokens_per_second"] > 0


# --- health, models, completions ------------------------------------------------------------------------------------

def test_health_and_models_need_no_model_loaded():
    with TestClient(create_app(target="toy")) as fresh:
        health = fresh.get("/health").json()
        assert health["status"] == "ok" and health["target"] == "toy" and health["loaded"] is False
        models = fresh.get("/v1/models").json()
        assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["toy"]
        assert models["data"][0]["object"] == "model"
        assert fresh.get("/health").json()["loaded"] is False
        complete(fresh, max_tokens=1)
        assert fresh.get("/health").json()["loaded"] is True


def test_completion(client):
    answer = complete(client, max_tokens=30, seed=3)
    assert answer["object"] == "text_completion" and answer["id"].startswith("cmpl-") and answer["model"] == "toy"
    (choice,) = answer["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "length"
    words = choice["text"].split()
    assert len(words) == 30 and set(words) <= set(WORDS) and choice["text"].startswith(" ")
    assert answer["usage"] == {"prompt_tokens": 2, "completion_tokens": 30, "total_tokens": 32}
    check_speculative(answer["speculative"], 30)


def test_completion_stream(client):
    whole = complete(client, max_tokens=40, seed=5)
    response = client.post("/v1/completions", json={"prompt": "the cat", "max_tokens": 40, "seed": 5, "stream": True})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    chunks = openai_chunks(response.text)
    assert all(c["object"] == "text_completion" and c["model"] == "toy" for c in chunks)
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "length" and last["usage"]["completion_tokens"] == 40
    check_speculative(last["speculative"], 40)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]  # same seed, same text
    assert last["speculative"]["accepted_per_round"] == whole["speculative"]["accepted_per_round"]
    assert len(chunks) >= 2  # text arrives round by round, before the closing chunk


def test_chat_completion_on_the_toy_joins_the_messages(client):
    body = {"messages": [{"role": "system", "content": "the"}, {"role": "user", "content": "dog"}],
            "max_tokens": 12, "seed": 2}
    answer = client.post("/v1/chat/completions", json=body).json()
    assert answer["object"] == "chat.completion" and answer["id"].startswith("chatcmpl-")
    (choice,) = answer["choices"]
    assert choice["message"]["role"] == "assistant" and len(choice["message"]["content"].split()) == 12
    assert answer["usage"]["prompt_tokens"] == 2
    check_speculative(answer["speculative"], 12)
    # content given as OpenAI's list of text parts means the same
    parts = {**body, "messages": [{"role": "system", "content": [{"type": "text", "text": "the"}]},
                                  {"role": "user", "content": "dog"}]}
    assert client.post("/v1/chat/completions", json=parts).json()["choices"] == answer["choices"]


def test_chat_completion_stream(client):
    body = {"messages": [{"role": "user", "content": "the fish"}], "max_tokens": 25, "seed": 4}
    whole = client.post("/v1/chat/completions", json=body).json()
    chunks = openai_chunks(client.post("/v1/chat/completions", json={**body, "stream": True}).text)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"][0]["delta"] == {} and chunks[-1]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    check_speculative(chunks[-1]["speculative"], 25)


def test_greedy_is_deterministic(client):
    a = complete(client, temperature=0, max_tokens=40)
    b = complete(client, temperature=0, max_tokens=40, seed=123)  # a seed changes nothing when greedy
    assert a["choices"][0]["text"] == b["choices"][0]["text"]


def test_a_seed_reproduces_a_sampled_answer(client):
    texts = [complete(client, temperature=1.0, top_p=0.95, top_k=6, max_tokens=60, seed=s)["choices"][0]["text"]
             for s in (7, 7, 8)]
    assert texts[0] == texts[1] and texts[0] != texts[2]


def test_model_may_be_named(client):
    for name in ("toy", "default"):
        assert complete(client, model=name, max_tokens=3)["model"] == "toy"


def test_request_gamma_overrides_the_default(client):
    spec = complete(client, gamma=2, max_tokens=30, seed=1)["speculative"]
    assert spec["gamma"] == 2 and max(spec["accepted_per_round"]) <= 2 and spec["mean_gamma"] <= 2
    auto = complete(client, gamma="auto", max_tokens=60, seed=1)
    spec = auto["speculative"]
    assert spec["gamma"] == "auto" and spec["mean_gamma"] > 0 and len(auto["choices"][0]["text"].split()) == 60
    assert sum(spec["accepted_per_round"]) + spec["target_calls"] == 60


# --- the page's endpoints -------------------------------------------------------------------------------------------

def test_cache_prompt_false_starts_the_request_cold(client, monkeypatch):
    """llama.cpp's field: with cache_prompt false the serving sequences (the target's, the draft model's) forget the
    cells they hold before the prefill, so nothing of an earlier request is reused; by default they keep them."""
    from specdecode.server.scheduler import Scheduled

    cleared = []
    monkeypatch.setattr(Scheduled, "clear", lambda self: cleared.append(self.model))
    first = complete(client, prompt="the cat", max_tokens=4, temperature=0)
    assert not cleared
    again = complete(client, prompt="the cat", max_tokens=4, temperature=0, cache_prompt=False)
    service = client.app.state.service
    assert {id(m) for m in cleared} == {id(service.scheduler.target), id(service.scheduler.draft.model)}
    assert again["choices"][0]["text"] == first["choices"][0]["text"]
    assert client.post("/v1/completions", json={"prompt": "the cat", "cache_prompt": "no"}).status_code == 400


def test_toy_round_runs_exactly_one_round(client):
    tokens, produced, runs = [0], 0, 0
    for i in range(12):
        gamma = 1 + i % 8
        r = client.post("/api/toy/round", json={"tokens": tokens, "gamma": gamma, "seed": i}).json()
        assert r["target_calls"] == 1 and r["gamma"] == gamma
        assert len(r["drafted"]) == gamma and 0 <= r["n_accepted"] <= len(r["drafted"])
        assert r["kind"] == ("bonus" if r["n_accepted"] == gamma else "corrected")
        assert r["emitted"] == len(r["emitted_tokens"]) == r["n_accepted"] + 1
        assert r["emitted_text"] == "".join(" " + WORDS[t] for t in r["emitted_tokens"])
        kinds = [p["kind"] for p in r["parts"]]
        rejected = ["rejected"] if r["kind"] == "corrected" else []
        assert kinds == ["accepted"] * r["n_accepted"] + rejected + [r["kind"]]
        assert [p["text"] for p in r["parts"]][: r["n_accepted"]] == r["drafted"][: r["n_accepted"]]
        tokens += r["emitted_tokens"]
        produced += r["emitted"]
        runs += r["target_calls"]
    assert runs == 12 and produced == len(tokens) - 1  # tokens produced = the sum of what each round emitted
    again = client.post("/api/toy/round", json={"tokens": [0, 1], "gamma": 8, "seed": 99}).json()
    assert again == client.post("/api/toy/round", json={"tokens": [0, 1], "gamma": 8, "seed": 99}).json()


def test_draws_reproduce_the_target_distribution(client):
    r = client.get("/api/draws", params={"seed": 2024}).json()
    assert r["words"] == ["cat", "dog", "fish"] and r["n"] == 10_000 and sum(r["counts"]) == 10_000
    assert r["p"] == pytest.approx([0.5, 0.3, 0.2]) and r["q"] == pytest.approx([0.6, 0.2, 0.2])
    pvalue = stats.chisquare(r["counts"], [10_000 * p for p in EXAMPLE_P.tolist()]).pvalue
    assert pvalue > 1e-3, (r["counts"], pvalue)
    assert 0.88 < r["accepted"] / r["n"] < 0.92  # drafts survive with probability sum min(p, q) = 0.9
    assert client.get("/api/draws", params={"seed": 2024}).json()["counts"] == r["counts"]


@pytest.mark.parametrize("alpha, c, c_hat, max_gamma", [
    (0.8, 0.05, None, 20), (0.4, 0.05, None, 20), (0.9, 0.0, None, 20), (0.9, 0.01, 0.2, 20), (0.2, 0.0, 0.0, 30),
    (1.0, 0.0, None, 20), (0.0, 1.0, None, 20), (0.63, 0.37, None, 8),
])
def test_gamma_endpoint_is_the_analysis_module(client, alpha, c, c_hat, max_gamma):
    params = {"alpha": alpha, "c": c, "max_gamma": max_gamma} | ({"c_hat": c_hat} if c_hat is not None else {})
    r = client.get("/api/gamma", params=params).json()
    c_hat = c if c_hat is None else c_hat
    assert r["best_gamma"] == analysis.best_gamma(alpha, c, max_gamma=max_gamma)
    assert r["best_speedup"] == pytest.approx(analysis.speedup(alpha, r["best_gamma"], c))
    assert [p["gamma"] for p in r["points"]] == list(range(1, max_gamma + 1))
    for p in r["points"]:
        assert p["speedup"] == pytest.approx(analysis.speedup(alpha, p["gamma"], c))
        assert p["extra_arithmetic"] == pytest.approx(analysis.extra_arithmetic(alpha, p["gamma"], c_hat))
        assert p["expected_tokens"] == pytest.approx(analysis.expected_tokens(alpha, p["gamma"]))


def test_gamma_with_the_served_engines_measured_verify_cost(client):
    """verify=measured: the speed-up curve again with T(gamma + 1) / T(1) as measured on the served target (the toy
    here), the best gamma under it, and /api/costs the measurement itself (made once)."""
    costs = client.get("/api/costs").json()
    assert costs["engine"] == "toy" and set(costs["ms"]) == {"1", "2", "4", "8", "16"} and costs["ratio"]["1"] == 1
    assert client.get("/api/costs").json() == costs  # measured once
    r = client.get("/api/gamma", params={"alpha": 0.7, "c": 0.05, "max_gamma": 12, "verify": "measured"}).json()
    verify = analysis.measured_verify_cost({int(k): v for k, v in costs["ratio"].items()})
    for p in r["points"]:
        assert p["speedup_measured"] == pytest.approx(analysis.speedup(0.7, p["gamma"], 0.05, verify(p["gamma"] + 1)))
    assert r["best_gamma_measured"] == analysis.best_gamma(0.7, 0.05, 12, verify)
    assert r["engine"] == "toy" and r["best_gamma"] == analysis.best_gamma(0.7, 0.05, 12)
    assert client.get("/api/gamma", params={"alpha": 0.7, "c": 0.05, "verify": "bogus"}).status_code == 400


def test_page_facts_are_the_servers_own(client):
    """/api/page: the legend covers every kind of piece a round has, the toy facts are the toy's, and the defaults
    and limits are the request schemas' (so the page's inputs refuse nothing the API takes, and the reverse)."""
    facts = client.get("/api/page").json()
    assert set(facts["kinds"]) == {"accepted", "rejected", "corrected", "bonus"}
    assert {entry["kind"] for entry in facts["legend"]} <= set(facts["kinds"])
    toy = facts["toy"]
    assert toy["words"] == facts["live"]["words"] == list(WORDS)
    assert toy["start"]["text"] == WORDS[toy["start"]["tokens"][0]]
    assert toy["gamma"] == {"default": 4, "minimum": 1, "maximum": 8} and toy["agreement_at_least"] == 1 - DRAFT_NOISE
    assert facts["live"]["gamma"] == {"default": None, "minimum": 1, "maximum": 32}  # None: the server's default
    assert facts["live"]["max_tokens"] == {"default": 64, "minimum": 1}
    assert client.get("/api/draws").json()["n"] == facts["draws"]["n"]
    assert client.post("/api/live", json={"prompt": facts["live"]["prompt"], "max_tokens": 2}).status_code == 200


def test_live_streams_rounds_then_stats(client):
    response = client.post("/api/live", json={"prompt": "the cat", "max_tokens": 30, "temperature": 1.0, "seed": 1})
    events = sse_events(response.text)
    names = [name for name, _ in events]
    assert names[-1] == "stats" and set(names[:-1]) == {"round"}
    rounds = [json.loads(data) for _, data in events[:-1]]
    final = json.loads(events[-1][1])
    assert sum(r["emitted"] for r in rounds) == final["new_tokens"] == 30
    assert len(rounds) == final["target_calls"] and [r["n_accepted"] for r in rounds] == final["accepted_per_round"]
    assert not rounds[0]["drafted"] and rounds[0]["pass"] == {"requests": 1, "rows": 2, "yours": 2}  # the prefill's
    for r in rounds:
        assert r["kind"] in ("corrected", "bonus") and r["n_accepted"] <= len(r["drafted"])
        assert {p["kind"] for p in r["parts"]} <= {"accepted", "rejected", "corrected", "bonus"}
    for r in rounds[1:]:
        assert r["pass"] == {"requests": 1, "rows": len(r["drafted"]) + 1, "yours": len(r["drafted"]) + 1}  # alone
    shown = "".join(p["text"] for r in rounds for p in r["parts"] if p["kind"] != "rejected")
    assert shown == final["text"] and final["target"] == "toy" and final["finish_reason"] == "length"
    assert 0 <= final["alpha"] <= 1 and final["tokens_per_target_call"] > 1 and final["draft_cost"] is not None


def test_live_rounds_say_which_requests_shared_their_target_pass(app, client):
    """Two requests at once: some round of the live one was verified in a pass that also carried the other's rows."""
    results = []
    other = threading.Thread(target=lambda: results.append(client.post(
        "/v1/completions", json={"prompt": "the dog", "max_tokens": MAX_TOKENS, "seed": 3})))
    service = app.state.service
    extend = service.scheduler.submit

    def slowed(*args):  # each pass a little slower, so that the two requests overlap
        time.sleep(0.002)
        return extend(*args)

    service.scheduler.submit = slowed
    try:
        other.start()
        response = client.post("/api/live", json={"prompt": "the cat", "max_tokens": MAX_TOKENS, "seed": 1})
    finally:
        other.join(60)
        del service.scheduler.submit
    rounds = [json.loads(data) for name, data in sse_events(response.text) if name == "round"]
    shared = [r for r in rounds[1:] if r["pass"]["requests"] == 2]  # (rounds[0]: the first token, the prefill's)
    assert shared and all(r["pass"]["rows"] > r["pass"]["yours"] == len(r["drafted"]) + 1 for r in shared)
    assert results[0].status_code == 200


# --- bad input: a 4xx with an OpenAI-style error body, and the server keeps serving ---------------------------------

TOO_LONG = " ".join(["the cat"] * MAX_PROMPT_TOKENS)
BAD = [
    ("post", "/v1/completions", b"{not json", 400),
    ("post", "/v1/completions", b'{"prompt": "the cat", "max_tokens": 5', 400),  # truncated
    ("post", "/v1/chat/completions", b"[1, 2", 400),
    ("post", "/api/toy/round", b"tokens=0", 400),
    ("post", "/api/live", b"", 400),
    ("post", "/v1/completions", b'{"prompt": "the", "temperature": NaN}', 400),
    ("post", "/v1/completions", b'{"prompt": "the", "top_p": Infinity}', 400),
    ("post", "/v1/completions", [1, 2], 400),
    ("post", "/v1/completions", {}, 400),
    ("post", "/v1/completions", {"prompt": 5}, 400),
    ("post", "/v1/completions", {"prompt": ["the", "cat"]}, 400),
    ("post", "/v1/completions", {"prompt": "the", "max_tokens": "10"}, 400),
    ("post", "/v1/completions", {"prompt": "the", "max_tokens": 2.5}, 400),
    ("post", "/v1/completions", {"prompt": "the", "max_tokens": True}, 400),
    ("post", "/v1/completions", {"prompt": "the", "temperature": "hot"}, 400),
    ("post", "/v1/completions", {"prompt": "the", "stream": "yes"}, 400),
    ("post", "/v1/completions", {"prompt": "the", "seed": -1}, 400),
    ("post", "/v1/completions", {"prompt": "the", "seed": 2**70}, 400),
    ("post", "/v1/completions", {"prompt": "the", "temperature": -0.5}, 400),
    ("post", "/v1/completions", {"prompt": "the", "top_p": 0}, 400),
    ("post", "/v1/completions", {"prompt": "the", "top_p": 1.5}, 400),
    ("post", "/v1/completions", {"prompt": "the", "top_p": -0.1}, 400),
    ("post", "/v1/completions", {"prompt": "the", "top_k": 0}, 400),
    ("post", "/v1/completions", {"prompt": "the", "max_tokens": 0}, 400),
    ("post", "/v1/completions", {"prompt": "the", "max_tokens": -3}, 400),
    ("post", "/v1/completions", {"prompt": "the", "max_tokens": MAX_TOKENS + 1}, 400),
    ("post", "/v1/completions", {"prompt": "the", "gamma": 0}, 400),
    ("post", "/v1/completions", {"prompt": "the", "gamma": "many"}, 400),
    ("post", "/v1/completions", {"prompt": "the", "n": 5}, 400),
    ("post", "/v1/completions", {"prompt": "the", "n": 0}, 400),
    ("post", "/v1/completions", {"prompt": "the", "stop": ["a", "b", "c", "d", "e"]}, 400),
    ("post", "/v1/completions", {"prompt": "the", "stop": [""]}, 400),
    ("post", "/v1/completions", {"prompt": "the", "stop": 3}, 400),
    ("post", "/v1/completions", {"prompt": "the", "logprobs": 6}, 400),
    ("post", "/v1/completions", {"prompt": "the", "logprobs": -1}, 400),
    ("post", "/v1/completions", {"prompt": "the", "stream": True, "stream_options": {"include_usage": "yes"}}, 400),
    ("post", "/v1/completions", {"prompt": "the", "model": "gpt-4o"}, 404),
    ("post", "/v1/completions", {"prompt": "the", "model": 7}, 400),
    ("post", "/v1/completions", {"prompt": ""}, 400),
    ("post", "/v1/completions", {"prompt": "the zebra"}, 400),
    ("post", "/v1/completions", {"prompt": TOO_LONG}, 400),
    ("post", "/v1/completions", {"prompt": "the", "stream": True, "temperature": -1}, 400),
    ("post", "/v1/completions", {"prompt": "the", "stream": True, "model": "nope"}, 404),
    ("post", "/v1/completions", {"prompt": TOO_LONG, "stream": True}, 400),
    ("post", "/v1/chat/completions", {"messages": "the cat"}, 400),
    ("post", "/v1/chat/completions", {"messages": []}, 400),
    ("post", "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "the"}]}, 400),
    ("post", "/v1/chat/completions", {"messages": [{"role": "user"}]}, 400),
    ("post", "/v1/chat/completions", {"messages": [{"role": "user", "content": 3}]}, 400),
    ("post", "/v1/chat/completions", {"messages": [{"role": "user", "content": "the"}], "top_p": 2}, 400),
    ("post", "/v1/chat/completions", {"messages": [{"role": "user", "content": "the"}], "model": "x"}, 404),
    ("post", "/v1/chat/completions", {"messages": [{"role": "user", "content": TOO_LONG}]}, 400),
    ("post", "/v1/chat/completions", {"messages": [{"role": "user", "content": "the"}], "top_logprobs": 2}, 400),
    ("post", "/v1/chat/completions", {"messages": [{"role": "user", "content": "the"}], "logprobs": True,
                                      "top_logprobs": 21}, 400),
    ("post", "/v1/chat/completions", {"messages": [{"role": "user", "content": "the"}],
                                      "max_completion_tokens": MAX_TOKENS + 1}, 400),
    ("post", "/api/live", {"prompt": ""}, 400),
    ("post", "/api/live", {"prompt": "the unicorn"}, 400),
    ("post", "/api/live", {"prompt": "the", "max_tokens": MAX_TOKENS + 1}, 400),
    ("post", "/api/live", {"prompt": "the", "temperature": -1}, 400),
    ("post", "/api/toy/round", {"tokens": [], "gamma": 3}, 400),
    ("post", "/api/toy/round", {"tokens": "the cat", "gamma": 3}, 400),
    ("post", "/api/toy/round", {"tokens": [0, 8], "gamma": 3}, 400),
    ("post", "/api/toy/round", {"tokens": [0, -1], "gamma": 3}, 400),
    ("post", "/api/toy/round", {"tokens": [0], "gamma": 0}, 400),
    ("post", "/api/toy/round", {"tokens": [0], "gamma": 9}, 400),
    ("get", "/api/draws?n=0", None, 400),
    ("get", "/api/draws?n=ten", None, 400),
    ("get", "/api/draws?seed=-4", None, 400),
    ("get", "/api/gamma?c=0.1", None, 400),
    ("get", "/api/gamma?alpha=1.5&c=0.1", None, 400),
    ("get", "/api/gamma?alpha=-0.1&c=0.1", None, 400),
    ("get", "/api/gamma?alpha=0.5&c=-1", None, 400),
    ("get", "/api/gamma?alpha=0.5&c=nan", None, 400),
    ("get", "/api/gamma?alpha=abc&c=0.1", None, 400),
    ("get", "/api/gamma?alpha=0.5&c=0.1&max_gamma=0", None, 400),
    ("get", "/api/gamma?alpha=0.5&c=0.1&c_hat=-2", None, 400),
    ("get", "/v1/nothing", None, 404),
    ("get", "/v1/completions", None, 405),
]


@pytest.mark.parametrize("method, path, body, status", BAD, ids=[f"{m} {p} {str(b)[:40]}" for m, p, b, _ in BAD])
def test_bad_input_is_a_4xx_json_error_and_the_server_keeps_serving(client, method, path, body, status):
    if isinstance(body, bytes):
        response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    elif method == "post":
        response = client.post(path, json=body)
    else:
        response = client.get(path)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"] and isinstance(error["type"], str)
    complete(client, max_tokens=4)  # the next good request still succeeds
    assert client.get("/health").json()["status"] == "ok"


def test_error_messages_say_what_is_wrong(client):
    def message(body, path="/v1/completions"):
        return client.post(path, json=body).json()["error"]

    assert message({"prompt": "the", "temperature": -1}) | {"message": ""} == {
        "message": "", "type": "invalid_request_error", "param": "temperature", "code": None}
    assert "top_p" in message({"prompt": "the", "top_p": 1.5})["message"]
    assert "at most 300" in message({"prompt": "the", "max_tokens": 301})["message"]
    unknown = message({"prompt": "the", "model": "gpt-4o"})
    assert unknown["code"] == "model_not_found" and "gpt-4o" in unknown["message"]
    assert "zebra" in message({"prompt": "the zebra"})["message"]
    assert message({"prompt": TOO_LONG})["code"] == "context_length_exceeded"
    bad_json = client.post("/v1/completions", content=b"{x", headers={"Content-Type": "application/json"})
    assert "not valid JSON" in bad_json.json()["error"]["message"]
    form = client.post("/v1/completions", content=b'{"prompt": "the"}')  # curl -d without the JSON header
    assert "Content-Type: application/json" in form.json()["error"]["message"]


def test_a_prompt_over_the_context_window_is_refused(app, client):
    model = app.state.service.load().target.model
    model.max_length = 8  # pretend the toy target has a context window of 8 tokens
    try:
        response = client.post("/v1/completions", json={"prompt": " ".join(["the"] * 8)})
        assert response.status_code == 400 and "context window" in response.json()["error"]["message"]
    finally:
        del model.max_length  # back to the class's None
    complete(client, max_tokens=3)


def test_serve_rejects_bad_arguments_in_one_line(capsys):
    assert main(["serve", "--port", "70000"]) == 2
    assert main(["serve", "--gamma", "0"]) == 2  # ("auto" is fine; "many" is argparse's error, exit status 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--port" in err[0] and "--gamma" in err[1]


# --- concurrency and disconnects ------------------------------------------------------------------------------------

class CachedTrigramLM(CausalLM):
    """A toy target whose next word depends on the last two words, one of them read from its cache: unlike the
    bigram toy, two generations interleaved on it would corrupt each other's output."""

    max_length = None

    def __init__(self, bigram):
        self.bigram, self.vocab_size, self.name, self.cache = bigram, bigram.vocab_size, "toy-trigram", []

    @property
    def length(self) -> int:
        return len(self.cache)

    def extend(self, tokens, keep=None):
        ids = tokens.tolist()
        before = ([self.cache[-1]] if self.cache else [0]) + ids[:-1]
        logits = self.bigram.log_table[tokens] + 2.0 * self.bigram.log_table[torch.tensor(before)].flip(-1)
        self.cache += ids
        return logits[-keep:] if keep else logits

    def rollback(self, length: int) -> None:
        assert 0 <= length <= len(self.cache)
        del self.cache[length:]


def test_concurrent_streams_each_get_their_own_complete_stream(app, client):
    target = app.state.service.load().target
    bigram, target.model = target.model, CachedTrigramLM(target.model)
    try:
        check_concurrent_streams(client)
    finally:
        target.model = bigram


def check_concurrent_streams(client):
    requests = [{"prompt": "the cat", "seed": 11, "max_tokens": MAX_TOKENS}, {"prompt": "the dog", "seed": 12,
                                                                              "max_tokens": MAX_TOKENS}]
    expected = [complete(client, **r)["choices"][0]["text"] for r in requests]
    streams: list[str | None] = [None, None]
    start = threading.Barrier(len(requests))

    def fetch(i):
        start.wait()
        with client.stream("POST", "/v1/completions", json={**requests[i], "stream": True}) as response:
            assert response.status_code == 200
            streams[i] = "".join(response.iter_text())

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for i, text in enumerate(streams):
        assert text is not None, f"stream {i} did not finish"
        chunks = openai_chunks(text)
        assert "".join(c["choices"][0]["text"] for c in chunks) == expected[i]
        assert chunks[-1]["usage"]["completion_tokens"] == MAX_TOKENS


def test_a_client_that_goes_away_stops_the_generation(app, client):
    service = app.state.service
    loaded = service.load()

    async def scenario():
        from specdecode.server.schemas import CompletionRequest

        job = service.job(loaded, [0, 1], CompletionRequest(prompt="the cat", max_tokens=MAX_TOKENS, seed=1))
        checks = 0

        async def gone() -> bool:
            nonlocal checks
            checks += 1
            return checks >= 4  # one look before any model work, then one after each round: it leaves after three

        rounds = await service.run(job, job.generation, gone)
        assert len(rounds) == 3 and job.generation.stats.rounds == 3
        assert len(job.generation.new_tokens) < MAX_TOKENS
        service.scheduler.release(job.lease)  # (as the app's ticket does when the request ends)

        # A consumer that stops reading mid-stream and closes it also frees the model for the next request.
        job = service.job(loaded, [0, 1], CompletionRequest(prompt="the cat", max_tokens=MAX_TOKENS, seed=1))
        async with contextlib.aclosing(service.rounds(job, job.generation)) as stream:
            async for _ in stream:
                break
        assert job.generation.stats.rounds == 1
        service.scheduler.release(job.lease)
        with anyio.fail_after(10):
            job = service.job(loaded, [0, 1], CompletionRequest(prompt="the cat", max_tokens=10))
            assert len(await service.run(job, job.generation)) >= 1
        service.scheduler.release(job.lease)

    anyio.run(scenario)
    complete(client, max_tokens=3)
