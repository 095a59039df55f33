"""Request bodies of the HTTP API, validated by pydantic (strict types: "5" is not a number, true is not 1).

OpenAI's fields keep OpenAI's names and defaults where they exist; `top_k` and `gamma` are specdecode's extensions.
A field sent as null is unset (its default), as OpenAI's spec makes them nullable. Fields that would change the
answer in a way specdecode cannot (tools, response_format, penalties, logit_bias, ...) are refused by name
(`OpenAIRequest.unsupported`); fields that change nothing (user, store, metadata, ...) are ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

Temperature = Annotated[float, Field(ge=0, allow_inf_nan=False, description="0 = greedy")]
TopP = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]

MAX_STOP_STRINGS = 4  # as OpenAI's
MAX_CHOICES = 4  # n: the choices of one request run one after the other
MAX_LOGPROBS = 5  # completions' logprobs, as OpenAI's
MAX_TOP_LOGPROBS = 20  # chat's top_logprobs, as OpenAI's


def _unset(value: Any) -> bool:
    return value is None


def _none_or(*fine: Any) -> Callable[[Any], bool]:
    return lambda value: value is None or value in fine


# Fields the server cannot honour: name -> (whether the value sent asks nothing of it, what it cannot do). Sent
# with any other value, the request is refused naming the field (never answered as if it had not been sent).
UNSUPPORTED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "tools": (_none_or([]), "this server cannot call tools (send tool_choice: \"none\" to have them ignored)"),
    "tool_choice": (_none_or("none", "auto"), "this server cannot call tools"),
    "functions": (_none_or([]), "this server cannot call functions (send function_call: \"none\" to have them "
                  "ignored)"),
    "function_call": (_none_or("none", "auto"), "this server cannot call functions"),
    "response_format": (_none_or({"type": "text"}), "only {\"type\": \"text\"} is supported (no JSON mode or "
                        "schema)"),
    "logit_bias": (_none_or({}), "not supported"),
    "presence_penalty": (_none_or(0), "not supported (only 0)"),
    "frequency_penalty": (_none_or(0), "not supported (only 0)"),
    "repetition_penalty": (_none_or(1), "not supported (only 1)"),
    "min_p": (_none_or(0), "not supported (only 0)"),
    "min_tokens": (_none_or(0), "not supported (only 0)"),
    "ignore_eos": (_none_or(False), "not supported"),
    "best_of": (_none_or(1), "not supported (only 1: each of the n choices is one generation)"),
    "suffix": (_none_or(""), "not supported (no insertion)"),
    "audio": (_unset, "this server answers in text only"),
    "modalities": (_none_or(["text"]), "this server answers in text only"),
    "prediction": (_unset, "predicted outputs are not supported"),
    "reasoning_effort": (_unset, "the served model does not reason apart from its answer"),
    "web_search_options": (_unset, "this server cannot search the web"),
    "guided_json": (_unset, "guided decoding is not supported"),
    "guided_regex": (_unset, "guided decoding is not supported"),
    "guided_choice": (_unset, "guided decoding is not supported"),
    "guided_grammar": (_unset, "guided decoding is not supported"),
}
# Sent with tools or functions, these say how to treat them: "none" is honoured by ignoring them.
_TOOL_CHOICE = {"tools": "tool_choice", "functions": "function_call"}


class Sampling(BaseModel):
    """What every generating request shares: length, sampling, seed, drafts per round."""

    model_config = ConfigDict(strict=True, extra="ignore")

    @field_validator("*", mode="before")
    @classmethod
    def _null_is_the_default(cls, value, info: ValidationInfo):  # OpenAI's clients send null for "not set"
        field = cls.model_fields[info.field_name]
        return field.get_default(call_default_factory=True) if value is None and not field.is_required() else value

    max_tokens: int = Field(128, ge=1, description="most tokens to generate (the server caps it)")
    temperature: Temperature = 1.0
    top_p: TopP | None = None
    top_k: int | None = Field(None, ge=1, description="extension: sample from the k most likely tokens")
    seed: int | None = Field(None, ge=0, le=2**63 - 1, description="a seed makes a sampled answer reproducible")
    gamma: Annotated[int, Field(ge=1, le=32)] | Literal["auto"] | None = Field(
        None, description="extension: drafts per round, or 'auto' (chosen each round); the server's default if unset")

    @property
    def new_tokens(self) -> tuple[int, str]:
        """The most tokens to generate, and the field that said so."""
        return self.max_tokens, "max_tokens"

    @property
    def top_logprobs_wanted(self) -> int | None:
        """How many alternatives each token's logprobs list (None: no logprobs)."""
        return None


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    include_usage: bool = Field(False, description="end the stream with a chunk of no choices carrying usage")


class OpenAIRequest(Sampling):
    model_config = ConfigDict(strict=True, extra="allow")  # other fields are kept, for `unsupported` to look at

    model: str | None = Field(None, description="the served target's name, or 'default'")
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=MAX_CHOICES, description="choices, each its own generation (seeded: seed + index)")
    stop: str | list[str] | None = Field(None, description="up to 4 stop strings: the text ends before the first")
    cache_prompt: bool = Field(True, description="llama.cpp's field: reuse the cells of the prompt's start that the "
                               "serving sequence still holds from its last request (bitwise a fresh prefill's); "
                               "false: prefill the whole prompt (a cold start, as benchmarks want)")

    def unsupported(self) -> tuple[str, str] | None:
        """(the field, why) of the first field sent that the server cannot honour, or None."""
        sent = self.model_extra or {}
        for name, (fine, why) in UNSUPPORTED.items():  # (in the table's order: tools before tool_choice)
            if name in sent and not fine(sent[name]) and not (name in _TOOL_CHOICE and
                                                               sent.get(_TOOL_CHOICE[name]) == "none"):
                return name, f"{name}: {why}"
        return None


class CompletionRequest(OpenAIRequest):
    prompt: str = Field(description="the text to continue, sent as is (no chat template)")
    max_tokens: int = Field(128, ge=0, description="most tokens to generate (the server caps it; 0 with echo)")
    echo: bool = Field(False, description="answer with the prompt before the completion (and its logprobs)")
    logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS,
                                 description="report each token's logprob and this many most likely alternatives")

    @property
    def top_logprobs_wanted(self) -> int | None:
        return self.logprobs


class TextPart(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    type: Literal["text"]
    text: str


class Message(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")  # (tool_calls and such: see ChatRequest.unsupported)

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart] | None = None

    @field_validator("content")
    @classmethod
    def _only_an_assistant_may_say_nothing(cls, value, info: ValidationInfo):
        if value is None and info.data.get("role") != "assistant":
            raise ValueError("content is required (only an assistant message may have content: null)")
        return value

    def text(self) -> str:
        if self.content is None:
            return ""
        return self.content if isinstance(self.content, str) else "".join(part.text for part in self.content)


class ChatRequest(OpenAIRequest):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1, description="the newer name of max_tokens (wins over it)")
    logprobs: bool = Field(False, description="report each token's logprob")
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS,
                                     description="and this many most likely alternatives (needs logprobs)")

    @field_validator("top_logprobs")
    @classmethod
    def _needs_logprobs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs: true")
        return value

    def unsupported(self) -> tuple[str, str] | None:
        for i, message in enumerate(self.messages):
            for name in ("tool_calls", "function_call", "audio"):
                if (message.model_extra or {}).get(name) not in (None, []):
                    return f"messages.{i}.{name}", f"messages.{i}.{name}: this server cannot call tools or " \
                        "functions, nor take their history"
        return super().unsupported()

    @property
    def new_tokens(self) -> tuple[int, str]:
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens, "max_completion_tokens"
        return self.max_tokens, "max_tokens"

    @property
    def top_logprobs_wanted(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None


class LiveRequest(Sampling):
    """The page's live figure: one user prompt through the chat template, greedy unless told otherwise."""

    prompt: str = Field(min_length=1, max_length=20_000)
    max_tokens: int = Field(64, ge=1)
    temperature: Temperature = 0.0


class ToyRoundRequest(BaseModel):
    """One round of the toy pair after `tokens` (the text so far, as ids of the eight-word vocabulary)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    tokens: list[int] = Field(min_length=1, max_length=4096)
    gamma: int = Field(4, ge=1, le=8)
    temperature: Temperature = 1.0
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
