"""The HTTP API as applications use it: the official `openai` client against `serve --target toy` on loopback.

Stop strings, logprobs, n, max_completion_tokens and usage in streams, streamed and not, and errors surfacing as
the client's own exception types. Answers are checked against the library on the same seed, not against constants.
"""

from __future__ import annotations

import math
import socket
import threading
import time

import openai
import pytest
import uvicorn

from specdecode import SamplingConfig, generate_plain
from specdecode.server import create_app
from specdecode.toy import ToyTokenizer, bigram_pair

MAX_TOKENS = 200
TOKENIZER = ToyTokenizer()


@pytest.fixture(scope="module")
def client():
    """A real uvicorn server in a thread, on a free loopback port, and an OpenAI client pointed at it."""
    app = create_app(target="toy", max_prompt_tokens=64, max_tokens=MAX_TOKENS)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    port = sock.getsockname()[1]
    yield openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
    server.should_exit = True
    thread.join(10)
    sock.close()


def complete(client, **kwargs):
    return client.completions.create(**{"model": "toy", "prompt": "the", "max_tokens": 60, **kwargs})


def chat(client, **kwargs):
    return client.chat.completions.create(**{"model": "toy", "messages": [{"role": "user", "content": "the"}],
                                             "max_tokens": 60, **kwargs})


def streamed_text(chunks) -> tuple[dict[int, str], dict[int, str], list]:
    """(text per choice index, finish_reason per index, the chunks) of a completions or chat stream."""
    texts, reasons, seen = {}, {}, []
    for chunk in chunks:
        seen.append(chunk)
        for choice in chunk.choices:
            piece = choice.text if hasattr(choice, "text") else choice.delta.content
            texts[choice.index] = texts.get(choice.index, "") + (piece or "")
            if choice.finish_reason:
                reasons[choice.index] = choice.finish_reason
    return texts, reasons, seen


# --- stop -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stop", ["mat", ["the mat", "dog ran"], ["on the fish", "cat sat", "x", "ran on mat"]])
def test_stop_ends_the_text_before_the_first_match_streamed_or_not(client, stop):
    """The same seed without stop, cut at the first match, is the answer with stop; the stream sends exactly that
    text (a possible start of a stop string is held back, never sent and taken back)."""
    stops = [stop] if isinstance(stop, str) else stop
    stopped = 0
    for seed in range(3):
        full = complete(client, seed=seed, max_tokens=100).choices[0].text
        starts = [full.find(s) for s in stops if s in full]
        answer = complete(client, seed=seed, max_tokens=100, stop=stop)
        texts, reasons, _ = streamed_text(complete(client, seed=seed, max_tokens=100, stop=stop, stream=True))
        if not starts:
            assert answer.choices[0].finish_reason == "length" and answer.choices[0].text == full
            continue
        stopped += 1
        expected = full[: min(starts)]
        assert answer.choices[0].text == expected and answer.choices[0].finish_reason == "stop"
        assert texts == {0: expected} and reasons == {0: "stop"}
        assert answer.usage.completion_tokens < 100  # generation halted at the match
    assert stopped >= 2


def test_stop_in_chat_streamed_or_not(client):
    full = chat(client, seed=3, max_tokens=MAX_TOKENS).choices[0].message.content
    assert "on the" in full
    answer = chat(client, seed=3, max_tokens=MAX_TOKENS, stop=["on the"])
    assert answer.choices[0].message.content == full[: full.find("on the")]
    assert answer.choices[0].finish_reason == "stop"
    texts, reasons, _ = streamed_text(chat(client, seed=3, max_tokens=MAX_TOKENS, stop="on the", stream=True))
    assert texts == {0: full[: full.find("on the")]} and reasons == {0: "stop"}


# --- logprobs -------------------------------------------------------------------------------------------------------

def plain_greedy(n: int, top: int):
    """Plain decoding of the toy target after "the", greedy, with logprobs: what the server must report."""
    target, _ = bigram_pair()
    return generate_plain(target, [0], n, sampling=SamplingConfig(0), logprobs=top, tokenizer=TOKENIZER)


def test_completion_logprobs_equal_plain_decodings_exactly(client):
    plain = plain_greedy(30, 3)
    for stream in (False, True):
        kwargs = {"temperature": 0, "max_tokens": 30, "logprobs": 3}
        if stream:
            tokens, values, tops, offsets = [], [], [], []
            for chunk in complete(client, stream=True, **kwargs):
                lp = chunk.choices[0].logprobs
                if lp is not None:
                    tokens += lp.tokens
                    values += lp.token_logprobs
                    tops += lp.top_logprobs
                    offsets += lp.text_offset
        else:
            lp = complete(client, **kwargs).choices[0].logprobs
            tokens, values, tops, offsets = lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset
        assert tokens == [TOKENIZER.piece(s.token) for s in plain.logprobs]
        assert values == [s.logprob for s in plain.logprobs]  # exactly: floats survive JSON
        assert tops == [{TOKENIZER.piece(t): v for t, v in s.top} for s in plain.logprobs]
        assert offsets == [len(TOKENIZER.decode(plain.new_tokens[:i])) for i in range(30)]


def test_chat_logprobs_and_top_logprobs_equal_plain_decodings_exactly(client):
    plain = plain_greedy(25, 5)
    answer = chat(client, temperature=0, max_tokens=25, logprobs=True, top_logprobs=5)
    streamed = [entry for chunk in chat(client, temperature=0, max_tokens=25, logprobs=True, top_logprobs=5,
                                        stream=True)
                if chunk.choices and chunk.choices[0].logprobs for entry in chunk.choices[0].logprobs.content]
    for content in (answer.choices[0].logprobs.content, streamed):
        assert [(e.token, e.logprob) for e in content] == [(TOKENIZER.piece(s.token), s.logprob)
                                                           for s in plain.logprobs]
        assert [[(t.token, t.logprob) for t in e.top_logprobs] for e in content] == \
            [[(TOKENIZER.piece(t), v) for t, v in s.top] for s in plain.logprobs]
        assert all(e.bytes == list(e.token.encode()) for e in content)
    without_top = chat(client, temperature=0, max_tokens=5, logprobs=True).choices[0].logprobs.content
    assert [e.logprob for e in without_top] == [s.logprob for s in plain.logprobs[:5]]
    assert all(e.top_logprobs == [] for e in without_top)
    assert chat(client, max_tokens=5).choices[0].logprobs is None


def test_sampled_logprobs_are_the_adjusted_list_of_each_position(client):
    """At temperature 0.7 and top-k 3 every reported token is among its position's 3 alternatives, those carry
    the whole (renormalised) mass, and the token's logprob is its alternative's."""
    lp = complete(client, temperature=0.7, max_tokens=40, seed=5, logprobs=5, extra_body={"top_k": 3}
                  ).choices[0].logprobs
    assert len(lp.tokens) == 40
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert len(top) <= 3 and top[token] == value
        assert sum(math.exp(v) for v in top.values()) == pytest.approx(1.0, abs=1e-5)


# --- n, max_completion_tokens, usage in streams ---------------------------------------------------------------------

def test_n_choices_are_each_their_own_seeded_stream(client):
    answer = complete(client, n=3, seed=10, max_tokens=20, temperature=1)
    singles = [complete(client, seed=10 + i, max_tokens=20, temperature=1).choices[0].text for i in range(3)]
    assert [c.index for c in answer.choices] == [0, 1, 2]
    assert [c.text for c in answer.choices] == singles and len(set(singles)) > 1
    assert answer.usage.completion_tokens == 60
    texts, reasons, _ = streamed_text(complete(client, n=3, seed=10, max_tokens=20, temperature=1, stream=True))
    assert texts == dict(enumerate(singles)) and reasons == {0: "length", 1: "length", 2: "length"}
    spec = answer.model_extra["speculative"]
    assert sum(spec["accepted_per_round"]) + spec["target_calls"] == 60  # rounds of all three choices

    chats = chat(client, n=2, seed=4, max_tokens=10, stop="mat")
    single = [chat(client, seed=4 + i, max_tokens=10, stop="mat").choices[0].message.content for i in range(2)]
    assert [c.message.content for c in chats.choices] == single


def test_max_completion_tokens_is_chats_newer_max_tokens(client):
    answer = chat(client, max_completion_tokens=7, max_tokens=None, seed=1)
    assert answer.usage.completion_tokens == 7 and answer.choices[0].finish_reason == "length"
    assert chat(client, max_completion_tokens=3, max_tokens=50).usage.completion_tokens == 3


@pytest.mark.parametrize("kind", ["text", "chat"])
def test_include_usage_ends_the_stream_with_a_usage_chunk(client, kind):
    create = complete if kind == "text" else chat
    answer = create(client, seed=2, max_tokens=15, n=2, temperature=1)
    texts, reasons, chunks = streamed_text(create(client, seed=2, max_tokens=15, n=2, temperature=1, stream=True,
                                                  stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == 30 == answer.usage.completion_tokens
    assert last.usage.prompt_tokens == answer.usage.prompt_tokens and "speculative" in last.model_extra
    assert all(chunk.usage is None for chunk in chunks[:-1])
    got = [c.text if kind == "text" else c.message.content for c in answer.choices]
    assert texts == dict(enumerate(got)) and reasons == {0: "length", 1: "length"}
    _, _, plain = streamed_text(create(client, seed=2, max_tokens=15, stream=True))
    assert plain[-1].usage.completion_tokens == 15 and plain[-1].choices[0].finish_reason == "length"


# --- errors as the client's own exceptions --------------------------------------------------------------------------

@pytest.mark.parametrize("kind, kwargs, param", [
    ("text", {"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ("text", {"stop": [""]}, "stop"),
    ("text", {"logprobs": 6}, "logprobs"),
    ("text", {"n": 5}, "n"),
    ("text", {"n": 5, "stream": True}, "n"),
    ("text", {"max_tokens": MAX_TOKENS + 1}, "max_tokens"),
    ("chat", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("chat", {"top_logprobs": 2}, "top_logprobs"),
    ("chat", {"max_completion_tokens": MAX_TOKENS + 1}, "max_completion_tokens"),
    ("chat", {"stop": ["a"] * 5, "stream": True}, "stop"),
])
def test_bad_options_are_bad_request_errors(client, kind, kwargs, param):
    create = complete if kind == "text" else chat
    with pytest.raises(openai.BadRequestError) as caught:
        create(client, **kwargs)
    assert caught.value.status_code == 400 and caught.value.param == param and param in caught.value.message


@pytest.mark.parametrize("stream", [False, True])
def test_an_unknown_model_is_not_found(client, stream):
    with pytest.raises(openai.NotFoundError) as caught:
        complete(client, model="gpt-4o", stream=stream)
    assert caught.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        chat(client, model="gpt-4o", stream=stream)
    assert [m.id for m in client.models.list()] == ["toy"]
