"""Wording shared by every floor that turns an error from a library into one line of its own."""

from __future__ import annotations


def first_line(error: BaseException) -> str:
    """The first line of an error's message, or its type's name when the message is empty (libraries raise
    multi-line errors; ours are one line)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
