"""Request bodies of the HTTP API, validated by pydantic (strict types: "5" is not a number, true is not 1).

OpenAI's fields keep OpenAI's names and defaults where they exist; `top_k` and `gamma` are specdecode's extensions.
Fields OpenAI clients send that specdecode has no use for (user, logprobs, penalties, ...) are ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Temperature = Annotated[float, Field(ge=0, allow_inf_nan=False, description="0 = greedy")]
TopP = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


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


class OpenAIRequest(Sampling):
    model: str | None = Field(None, description="the served target's name, or 'default'")
    stream: bool = False
    n: int = Field(1, ge=1, le=1, description="one answer per request")
    stop: str | list[str] | None = Field(None, description="not supported: only null or an empty list")


class CompletionRequest(OpenAIRequest):
    prompt: str = Field(description="the text to continue, sent as is (no chat template)")


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
