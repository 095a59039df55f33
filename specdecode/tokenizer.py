"""Text <-> token ids for the command line and the server: the `Tokenizer` protocol, and `TextTokenizer`, a thin
layer over a transformers tokenizer (the toy pair's `ToyTokenizer` is the other implementation).

Also the compatibility check a draft model must pass: the same token for the same id wherever both vocabularies
have it, and no draft id the target lacks.
"""

from __future__ import annotations

import hashlib
from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """What the command line, the server and the drafts need of a target's tokenizer."""

    stop_token_ids: list[int]  # generation ends after any of these

    def encode(self, text: str, chat: bool = True) -> list[int]:
        """Prompt ids of text; with chat=True as one user turn through the chat template, where there is one."""
        ...

    def encode_chat(self, messages: list[dict]) -> list[int]:
        """Prompt ids of chat messages ({"role", "content"}), awaiting the assistant's answer."""
        ...

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str: ...

    def piece(self, token: int) -> str:
        """One token as text, for showing rounds (special tokens shown as themselves)."""
        ...

    def fingerprint(self) -> str:
        """A short hash of the vocabulary, to check that a saved n-gram table belongs to this tokenizer."""
        ...


def vocabulary_fingerprint(vocab: dict[str, int]) -> str:
    """A short hash of a vocabulary (token string -> id)."""
    items = sorted(vocab.items(), key=lambda kv: kv[1])
    return hashlib.sha256("\n".join(f"{i}\t{t}" for t, i in items).encode()).hexdigest()[:16]


class TextTokenizer:
    """A `Tokenizer` over a transformers tokenizer: prompt encoding (with the chat template), decoding, stop tokens."""

    def __init__(self, hf_tokenizer, generation_eos: int | list[int] | None = None):
        self.hf = hf_tokenizer
        self.vocab = hf_tokenizer.get_vocab()  # token string -> id
        self.has_chat_template = bool(getattr(hf_tokenizer, "chat_template", None))
        stops = {hf_tokenizer.eos_token_id}
        if isinstance(generation_eos, int):
            stops.add(generation_eos)
        elif generation_eos:
            stops.update(generation_eos)
        for name in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>"):
            if name in self.vocab:
                stops.add(self.vocab[name])
        self.stop_token_ids = sorted(t for t in stops if t is not None)

    def encode(self, text: str, chat: bool = True) -> list[int]:
        """Token ids of a prompt; with chat=True (and a chat template) as one user turn awaiting the answer."""
        if chat and self.has_chat_template:
            return self.encode_chat([{"role": "user", "content": text}])
        return self.hf.encode(text, add_special_tokens=False)

    def encode_chat(self, messages: list[dict]) -> list[int]:
        if not self.has_chat_template:
            return self.hf.encode("\n".join(m["content"] for m in messages), add_special_tokens=False)
        ids = self.hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):  # some versions return a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.hf.decode(ids, skip_special_tokens=skip_special_tokens)

    def piece(self, token: int) -> str:
        """One token as text, for showing rounds (special tokens shown as themselves)."""
        return self.hf.decode([token], skip_special_tokens=False)

    def fingerprint(self) -> str:
        return vocabulary_fingerprint(self.vocab)


def check_compatible(target: TextTokenizer, draft: TextTokenizer, target_vocab_size: int,
                     draft_vocab_size: int) -> None:
    """Raise ValueError naming the first difference if the draft cannot share the target's token ids."""
    if draft_vocab_size > target_vocab_size:
        raise ValueError(f"the draft's vocabulary ({draft_vocab_size}) is larger than the target's "
                         f"({target_vocab_size})")
    target_by_id = {i: t for t, i in target.vocab.items()}
    for token, i in sorted(draft.vocab.items(), key=lambda kv: kv[1]):
        if i >= target_vocab_size:
            raise ValueError(f"the draft's token {token!r} has id {i}, outside the target's vocabulary "
                             f"({target_vocab_size})")
        if target_by_id.get(i) != token:
            raise ValueError(f"the tokenizers differ: id {i} is {token!r} for the draft but "
                             f"{target_by_id.get(i)!r} for the target")
    if target.hf.eos_token_id != draft.hf.eos_token_id:
        raise ValueError(f"the tokenizers differ in their end token: target {target.hf.eos_token!r}, "
                         f"draft {draft.hf.eos_token!r}")
