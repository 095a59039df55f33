"""The project's prompt set: 60 prompts in six kinds (chat, code writing, code editing, summarisation, question
answering, arithmetic), written for specdecode. Split "dev" (tuning) and "test" (held out: no draft trains on it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

KINDS = ("chat", "code_write", "code_edit", "summarize", "qa", "math")


@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str
    split: str
    prompt: str


def load_prompts(split: str | None = None, kinds: tuple[str, ...] | None = None) -> list[Prompt]:
    text = resources.files("specdecode.data").joinpath("prompts.jsonl").read_text(encoding="utf-8")
    prompts = [Prompt(**json.loads(line)) for line in text.splitlines() if line.strip()]
    return [p for p in prompts if (split is None or p.split == split) and (kinds is None or p.kind in kinds)]
