"""One console for every command: rich output, never hard-wrapped, tables at full width when piped."""

import sys

from rich.console import Console


def make_console() -> Console:
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
