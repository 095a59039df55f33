"""The HTTP API as applications use it: the official `openai` client against `serve --target toy` on loopback.

Stop strings, logprobs, n, max_completion_tokens and usage in streams, streamed and not, and errors surfacing as
the client's own exception types. Answers are checked against the library on the same seed, not against constants.
"""

from __future__ import annotations

import math

import openai
import pytest
from serving import openai_client

from specdecode import SamplingConfig, generate_plain
from specdecode.server import create_app
from specdecode.toy import ToyTokenizer, bigram_pair

MAX_TOKENS = 200
TOKENIZER = ToyTokenizer()


@pytest.fixture(scope="module")
def client():
    """A real uvicorn server in a thread, on a free loopback port, and an OpenAI client pointed at it."""
    with openai_client(create_app(target="toy", max_prompt_tokens=64, max_tokens=MAX_TOKENS)) as client:
        yield client


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
    return generate_plain(target, [0], max_new_tokens=n, sampling=SamplingConfig(0), logprobs=top, tokenizer=TOKENIZER)


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


# --- nullable fields, temperatures, seeds, the model object ---------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("kind", ["text", "chat"])
def test_null_fields_are_unset(client, kind):
    """OpenAI's spec makes these nullable; the client sends None as null."""
    create = complete if kind == "text" else chat
    nulls = {"temperature": None, "n": None, "stream": None, "top_p": None, "seed": None, "stop": None,
             "max_tokens": None, "logprobs": None, "presence_penalty": None, "frequency_penalty": None,
             "logit_bias": None, "stream_options": None, "user": None}
    if kind == "chat":
        nulls |= {"top_logprobs": None, "max_completion_tokens": None, "tools": None, "tool_choice": None,
                  "response_format": None}
    answer = create(client, **nulls)
    assert len(answer.choices) == 1 and answer.usage.completion_tokens == 128  # max_tokens' default


def test_requests_that_ask_nothing_unsupported_are_served(client):
    chat(client, tools=[TOOL], tool_choice="none")  # the tools are not to be called: honoured by ignoring them
    chat(client, response_format={"type": "text"}, presence_penalty=0, logit_bias={})
    answer = chat(client, messages=[{"role": "user", "content": "the"}, {"role": "assistant", "content": None},
                                    {"role": "user", "content": "cat"}])
    assert answer.choices[0].finish_reason == "length"


def test_a_small_temperature_is_served_nearly_greedy(client):
    cold = complete(client, temperature=0.001, seed=3, logprobs=1)
    greedy = complete(client, temperature=0, logprobs=1)
    assert cold.choices[0].text == greedy.choices[0].text


def test_every_bit_of_the_seed_counts(client):
    texts = {seed: complete(client, seed=seed, max_tokens=60).choices[0].text for seed in (5, 2**32 + 5, 2**63 - 1)}
    assert len(set(texts.values())) == 3  # (5 and 2^32 + 5 drew the same numbers when only 32 bits were used)
    assert complete(client, seed=2**32 + 5, max_tokens=60).choices[0].text == texts[2**32 + 5]
    with pytest.raises(openai.BadRequestError) as caught:
        complete(client, seed=2**63)
    assert caught.value.param == "seed"


def test_the_model_object_is_served_by_name(client):
    assert client.models.retrieve("toy").id == "toy" == client.models.retrieve("default").id
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("gpt-4o")
    assert caught.value.code == "model_not_found" and caught.value.param == "model"


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
    # the field as the client sent it, not pydantic's path through a union ("stop.str", "gamma.constrained-int")
    ("text", {"stop": 5}, "stop"),
    ("text", {"extra_body": {"gamma": 0}}, "gamma"),
    ("chat", {"messages": [{"role": "user", "content": "the"}, {"role": "user", "content": None}]},
     "messages.1.content"),
    ("chat", {"temperature": 1e-39}, "temperature"),
    ("text", {"max_tokens": 0}, "max_tokens"),  # (0 only with echo)
    # what the server cannot honour is refused by name, never answered as something else
    ("chat", {"tools": [TOOL], "tool_choice": "required"}, "tools"),
    ("chat", {"tools": [TOOL]}, "tools"),
    ("chat", {"tool_choice": "required"}, "tool_choice"),
    ("chat", {"functions": [TOOL["function"]]}, "functions"),
    ("chat", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
     "response_format"),
    ("chat", {"response_format": {"type": "json_object"}, "stream": True}, "response_format"),
    ("chat", {"logit_bias": {"1": 5}}, "logit_bias"),
    ("chat", {"presence_penalty": 0.5}, "presence_penalty"),
    ("text", {"frequency_penalty": 1}, "frequency_penalty"),
    ("text", {"suffix": " mat"}, "suffix"),
    ("text", {"best_of": 2}, "best_of"),
    ("chat", {"messages": [{"role": "user", "content": "the"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}, "messages.1.tool_calls"),
])
def test_bad_options_are_bad_request_errors(client, kind, kwargs, param):
    create = complete if kind == "text" else chat
    with pytest.raises(openai.BadRequestError) as caught:
        create(client, **kwargs)
    assert caught.value.status_code == 400 and caught.value.param == param
    assert param.split(".")[-1] in caught.value.message and "\n" not in caught.value.message


@pytest.mark.parametrize("stream", [False, True])
def test_an_unknown_model_is_not_found(client, stream):
    with pytest.raises(openai.NotFoundError) as caught:
        complete(client, model="gpt-4o", stream=stream)
    assert caught.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        chat(client, model="gpt-4o", stream=stream)
    assert [m.id for m in client.models.list()] == ["toy"]
