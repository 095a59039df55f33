"""Stop sequences: where an output's decoded text ends, and how much of it a stream may already show.

The text of an output is its tokens decoded together (a token's text can depend on its neighbours). It ends before
the first match of any stop string; the output keeps the tokens up to the one that completed that match, and no
more are generated. While the output grows, a tail of the text that could still become the start of a stop string
is held back, so a stream never shows text that a later token turns into a stop sequence.

Stop strings match whole characters only: while the last character of the output is unfinished (its first bytes
came in a token, the rest have yet to), it is not part of the text matched, so a stop string never ends inside it
(not even "\ufffd", the replacement character a decoder writes for it).
"""

from __future__ import annotations

from collections.abc import Sequence

from .tokenizer import Tokenizer, complete, utf8


def check_stop(stop: str | Sequence[str] | None, limit: int | None = None) -> list[str]:
    """A stop string or several (at most `limit`) -> the list (None or [] -> []); ValueError if malformed."""
    if stop is None:
        return []
    strings = [stop] if isinstance(stop, str) else list(stop)
    if not all(isinstance(s, str) for s in strings):
        raise ValueError("stop must be a string or a list of strings")
    if limit is not None and len(strings) > limit:
        raise ValueError(f"stop takes at most {limit} strings, got {len(strings)}")
    if any(not s for s in strings):
        raise ValueError("a stop string must not be empty")
    return strings


class StopStrings:
    """Stop strings matched on the decoded text of an output (token ids -> text through the tokenizer's
    `text_bytes`)."""

    def __init__(self, tokenizer: Tokenizer, stop: str | Sequence[str]):
        self.tokenizer = tokenizer
        self.strings = check_stop(stop)

    def _first_match(self, text: str) -> int | None:
        """The start of the earliest match of any stop string in text, or None."""
        starts = [i for i in (text.find(s) for s in self.strings) if i >= 0]
        return min(starts) if starts else None

    def end(self, tokens: list[int], start: int) -> int | None:
        """If the tokens from `start` on complete a stop string: how many tokens the output keeps (through the one
        that completed the first match); else None. One decode when nothing matches."""
        if not self.strings or self._first_match(self._whole(tokens)) is None:
            return None
        for k in range(start + 1, len(tokens) + 1):
            if self._first_match(self._whole(tokens[:k])) is not None:
                return k
        return len(tokens)  # (the tokens matched only together with ones before start: a re-spelling)

    def _whole(self, tokens: list[int]) -> str:
        """The text of tokens without an unfinished last character."""
        data = self.tokenizer.text_bytes(tokens)
        return utf8(data[: complete(data)])

    def text(self, tokens: list[int], final: bool = True) -> str:
        """The decoded text, cut before the first match. Not final (the output may still grow): without an
        unfinished last character, and holding back any tail that is the start of a stop string."""
        whole = self._whole(tokens)  # a prefix of the decoded text
        cut = self._first_match(whole)
        if cut is not None:
            return whole[:cut]
        if final:
            return self.tokenizer.decode(tokens)
        whole = whole.rstrip("\ufffd")  # (a tokenizer whose text_bytes hold characters it could not finish yet)
        return whole[: len(whole) - self._partial_tail(whole)]

    def _partial_tail(self, text: str) -> int:
        """Length of the longest tail of text that is a proper prefix of a stop string."""
        longest = 0
        for s in self.strings:
            for n in range(min(len(s) - 1, len(text)), longest, -1):
                if text.endswith(s[:n]):
                    longest = n
                    break
        return longest
