"""The `specdecode` command. Each subcommand lives in its own module with `add_parser` and `run`."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from ..cpu import capability
from . import analyze, bench, generate, info, ngram, serve, train_draft

COMMANDS = (generate, analyze, bench, info, ngram, train_draft, serve)


class UserError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the usage dump
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="specdecode",
        description="Exact speculative decoding: a small draft guesses gamma tokens, the target checks them all in "
        "one pass, and the output is distributed exactly as the target's own.",
        epilog="Start with: specdecode generate --help   or   specdecode analyze --alpha 0.8 --gamma 5 --c 0.05",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser, required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def _join_two_word_drafts(argv: list[str]) -> list[str]:
    """Accept `--draft bigram FILE` (two words, FILE an existing file) as `--draft bigram:FILE`: FILE is optional,
    so a word that is not a file (the prompt, say) is never taken for one."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--draft" and argv[i + 1:i + 2] in (["bigram"], ["unigram"]) \
                and i + 2 < len(argv) and Path(argv[i + 2]).is_file():
            out += ["--draft", f"{argv[i + 1]}:{argv[i + 2]}"]
            i += 3
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_join_two_word_drafts(sys.argv[1:] if argv is None else list(argv)))
    try:
        capability()  # a SPECDECODE_CPU that names no path is bad input like any other
        return args.run(args) or 0
    except (UserError, ValueError) as error:
        print(f"specdecode {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nspecdecode: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`specdecode generate ... | head`): stop quietly, as shell tools do
        with contextlib.suppress(OSError, ValueError):  # (and let the exit's flush of stdout write nowhere)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE
