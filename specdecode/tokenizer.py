"""Text <-> token ids for the command line and the server: the `Tokenizer` protocol, and `TextTokenizer`, a thin
layer over a transformers tokenizer (the toy pair's `ToyTokenizer` is the other implementation).

A token stands for bytes, not always for characters: in byte-level BPE (GPT-2's scheme, SmolLM2's, Qwen's) one
character of several UTF-8 bytes can be split over tokens. `token_bytes` is the one home for what a token stands for;
the text of an output (`decode`), stop strings, logprobs and streams all start from it. `complete` says how much of
a byte string is whole characters.

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

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        """The text of ids: their `text_bytes` as UTF-8 (a byte that is no whole character: U+FFFD)."""
        ...

    def token_bytes(self, token: int) -> bytes:
        """The bytes one token stands for (a special token: its name in UTF-8)."""
        ...

    def text_bytes(self, ids: list[int]) -> bytes:
        """The bytes of the text of ids: their `token_bytes` joined, special tokens (which the text leaves out)
        left out."""
        ...

    def piece(self, token: int) -> str:
        """One token as text, for showing rounds (special tokens shown as themselves)."""
        ...

    def fingerprint(self) -> str:
        """A short hash of the vocabulary, to check that a saved n-gram table belongs to this tokenizer."""
        ...


def complete(data: bytes) -> int:
    """How many bytes of data end on a character boundary: all of them, less an unfinished UTF-8 character at the
    end (a lead byte followed by fewer continuation bytes than it announces)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the start of the last character (or a stray byte)
            needs = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
            return len(data) - back if needs > back else len(data)
    return len(data)


def utf8(data: bytes) -> str:
    """Bytes as text, each byte that is no whole character as U+FFFD (as a tokenizer's decode writes them)."""
    return data.decode("utf-8", errors="replace")


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
        added = getattr(hf_tokenizer, "added_tokens_decoder", {})  # id -> AddedToken
        self.special_ids = frozenset(i for i, t in added.items() if t.special) | set(hf_tokenizer.all_special_ids)
        self._added = {i: t.content.encode() for i, t in added.items()}
        self._added_names = [t.content for t in added.values() if t.content]
        self._piece_of = {i: t for t, i in self.vocab.items()}
        from transformers.convert_slow_tokenizer import bytes_to_unicode  # GPT-2's byte -> character table

        byte_of = {c: b for b, c in bytes_to_unicode().items()}
        # Byte-level BPE writes every byte as one of 256 printable characters, and its decoder maps them back: such a
        # decoder over a vocabulary in that alphabet only (a word-level vocabulary of ASCII words is in the alphabet
        # too, but its decoder joins words with spaces; SentencePiece has "▁" and "<0x0A>"-style byte pieces).
        decoder = getattr(getattr(hf_tokenizer, "backend_tokenizer", None), "decoder", None)
        self.byte_level = "ByteLevel" in repr(decoder) and all(
            set(piece) <= byte_of.keys() for i, piece in self._piece_of.items() if i not in self._added)
        self._byte_of = byte_of if self.byte_level else None
        self._bytes: dict[int, bytes] = {}

    def encode(self, text: str, chat: bool = True) -> list[int]:
        """Token ids of a prompt; with chat=True (and a chat template) as one user turn awaiting the answer."""
        if chat and self.has_chat_template:
            return self.encode_chat([{"role": "user", "content": text}])
        return self.hf.encode(text, add_special_tokens=False)

    def encode_chat(self, messages: list[dict]) -> list[int]:
        """Prompt ids of chat messages. Text in a message's content is text: "<|im_end|>" written in a message is
        tokenised as those characters, not as the special token, so a message cannot forge the template's turns."""
        if not self.has_chat_template:
            return self._plain("\n".join(m["content"] for m in messages))
        if not any(name in m["content"] for m in messages for name in self._added_names):
            return self._template(messages, tokenize=True)  # (the same ids as below, in one call)
        # The template rendered with a marker in place of each content; the template's own text is tokenised with
        # its special tokens, each content as plain text.
        marks = [f"\x00specdecode-content-{i}\x00" for i in range(len(messages))]
        rendered = self._template([m | {"content": mark} for m, mark in zip(messages, marks, strict=True)])
        ids, rest = [], rendered
        for message, mark in zip(messages, marks, strict=True):
            before, found, rest = rest.partition(mark)
            if not found or mark in rest:
                raise ValueError("a message contains the text of a special token, and this chat template does not "
                                 "keep message contents apart to tokenise them as plain text")
            ids += self.hf.encode(before, add_special_tokens=False) + self._plain(message["content"])
        return ids + self.hf.encode(rest, add_special_tokens=False)

    def _template(self, messages: list[dict], tokenize: bool = False) -> list[int] | str:
        out = self.hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=tokenize)
        if hasattr(out, "keys"):  # some versions return a BatchEncoding
            out = out["input_ids"]
        return list(out) if tokenize else out

    def _plain(self, text: str) -> list[int]:
        """Ids of text in which special-token names are plain text."""
        return self.hf.encode(text, add_special_tokens=False, split_special_tokens=True) if text else []

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        if not self.byte_level:
            return self.hf.decode(ids, skip_special_tokens=skip_special_tokens)
        return utf8(self.text_bytes(ids) if skip_special_tokens else b"".join(map(self.token_bytes, ids)))

    def token_bytes(self, token: int) -> bytes:
        """The bytes of a byte-level piece; of a SentencePiece piece ("▁" a space, "<0xE3>" one byte); else the
        token decoded alone, in UTF-8."""
        data = self._bytes.get(token)
        if data is None:
            piece = self._piece_of.get(token)
            if token in self._added or piece is None:
                data = self._added.get(token) or self.hf.decode([token]).encode()
            elif self._byte_of is not None:
                data = bytes(self._byte_of[c] for c in piece)
            elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                data = bytes([int(piece[3:5], 16)])
            else:
                data = piece.replace("\u2581", " ").encode()
            self._bytes[token] = data
        return data

    def text_bytes(self, ids: list[int]) -> bytes:
        if not self.byte_level:  # (pieces that are not bytes, such as whole words, need the decoder to join them)
            return self.hf.decode(ids, skip_special_tokens=True).encode()
        return b"".join(self.token_bytes(t) for t in ids if t not in self.special_ids)

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
    if draft is target:  # one tokenizer: the same ids
        return
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
