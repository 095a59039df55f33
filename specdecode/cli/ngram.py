"""`specdecode ngram build CORPUS -o FILE`: unigram and bigram tables from a text file, with the target's tokenizer."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from tqdm import tqdm

from ..drafts.ngram import NgramTable
from ..load import load_tokenizer
from ..models.default import DEFAULT_TARGET


def add_parser(sub) -> None:
    p = sub.add_parser("ngram", help="build unigram / bigram tables to use as drafts",
                       description="Count tokens and token pairs of a text corpus with the target's tokenizer. "
                       "Use the table with: specdecode generate --draft bigram FILE (or unigram FILE).")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(p))
    build = actions.add_parser("build", help="build a table from a text file",
                               description="Documents are separated by blank lines; pairs never cross them.")
    build.add_argument("corpus", type=Path, help="a UTF-8 text file")
    build.add_argument("-o", "--output", type=Path, required=True, help="where to write the table (.safetensors)")
    build.add_argument("--target", default=DEFAULT_TARGET, help="whose tokenizer to use (default: smollm2)")
    build.set_defaults(run=run_build)


def run_build(args: argparse.Namespace) -> int:
    if not args.corpus.is_file():
        raise ValueError(f"corpus {str(args.corpus)!r} is not a file")
    try:
        text = args.corpus.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"corpus {str(args.corpus)!r} is not UTF-8 text") from None
    documents = [d for d in re.split(r"\n\s*\n", text) if d.strip()]
    if not documents:
        raise ValueError(f"corpus {str(args.corpus)!r} is empty")
    tokenizer, vocab_size = load_tokenizer(args.target)
    encoded = (tokenizer.encode(d, chat=False) for d in tqdm(documents, desc="tokenizing", unit="doc"))
    table = NgramTable.build(encoded, vocab_size, tokenizer.fingerprint())
    args.output.parent.mkdir(parents=True, exist_ok=True)
    table.save(args.output)
    pairs = len(table.counts)
    print(f"wrote {args.output}: {int(table.unigram.sum())} tokens, {int((table.unigram > 0).sum())} distinct, "
          f"{pairs} distinct pairs")
    return 0
