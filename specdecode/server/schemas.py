"""Request bodies of the HTTP API, validated by pydantic (strict types: "5" is not a number, true is not 1).

OpenAI's fields keep OpenAI's names and defaults where they exist; `top_k` and `gamma` are specdecode's extensions.
Fields OpenAI clients send that specdecode has no use for (user, penalties, ...) are ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

Temperature = Annotated[float, Field(ge=0, allow_inf_nan=False, description="0 = greedy")]
TopP = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]

MAX_STOP_STRINGS = 4  # as OpenAI's
MAX_CHOICES = 4  # n: the choices of one request run one after the other
MAX_LOGPROBS = 5  # completions' logprobs, as OpenAI's
MAX_TOP_LOGPROBS = 20  # chat's top_logprobs, as OpenAI's


class Sampling(BaseModel):
    """What every generating request shares: length, sampling, seed, drafts per round."""

    model_config = ConfigDict(strict=True, extra="ignore")

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
    model: str | None = Field(None, description="the served target's name, or 'default'")
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=MAX_CHOICES, description="choices, each its own generation (seeded: seed + index)")
    stop: str | list[str] | None = Field(None, description="up to 4 stop strings: the text ends before the first")

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _null_is_the_default(cls, value):  # OpenAI's clients send null for "not set"
        return cls.model_fields["max_tokens"].default if value is None else value


class CompletionRequest(OpenAIRequest):
    prompt: str = Field(description="the text to continue, sent as is (no chat template)")
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
    model_config = ConfigDict(strict=True, extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]

    def text(self) -> str:
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
