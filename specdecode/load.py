"""From names on a command line (or in an API request) to a ready target, tokenizer and draft.

    target: "smollm2" (the embedded default), "toy" (the eight-word bigram pair), a transformers directory, or a hub
            id already in the local cache
    draft:  "prompt-lookup", "bigram FILE", "unigram FILE", "none", "toy", or a transformers directory / cached id
"""

from __future__ import annotations

from dataclasses import dataclass

from .drafts.base import Draft
from .drafts.model import ModelDraft
from .drafts.ngram import NgramDraft, NgramTable
from .drafts.prompt_lookup import PromptLookupDraft
from .models.base import CausalLM
from .models.default import DEFAULT_TARGET, default_model_dir
from .models.hf import HFCausalLM, load_hf_model, parse_dtype
from .tokenizer import TextTokenizer, check_compatible
from .toy import ToyTokenizer, bigram_pair

ENGINES = ("auto", "transformers")
DRAFT_KINDS = ("prompt-lookup", "bigram FILE (or bigram:FILE)", "unigram FILE", "none", "toy", "a model directory")


@dataclass
class Target:
    model: CausalLM
    tokenizer: TextTokenizer | ToyTokenizer
    engine: str  # which implementation runs it: "toy" or "transformers"
    name: str


def load_target(name: str = DEFAULT_TARGET, dtype: str = "bfloat16", engine: str = "auto") -> Target:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    torch_dtype = parse_dtype(dtype)
    if name == "toy":
        return Target(bigram_pair()[0], ToyTokenizer(), "toy", "toy")
    path = default_model_dir() if name == DEFAULT_TARGET else name
    model, hf_tokenizer = load_hf_model(path, torch_dtype)
    tokenizer = TextTokenizer(hf_tokenizer, getattr(model.generation_config, "eos_token_id", None))
    display = "SmolLM2-135M-Instruct" if name == DEFAULT_TARGET else name
    return Target(HFCausalLM(model, display), tokenizer, "transformers", display)


def load_tokenizer(name: str = DEFAULT_TARGET) -> tuple[TextTokenizer, int]:
    """(tokenizer, vocabulary size) of a target, without loading its weights."""
    from transformers import AutoConfig, AutoTokenizer

    path = default_model_dir() if name == DEFAULT_TARGET else name
    try:
        hf = AutoTokenizer.from_pretrained(path, local_files_only=True)
        vocab_size = AutoConfig.from_pretrained(path, local_files_only=True).vocab_size
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot load the tokenizer of {str(name)!r}: {str(error).strip().splitlines()[0]}") from None
    return TextTokenizer(hf), max(vocab_size, len(hf))


def default_draft(target: Target) -> str:
    return "toy" if target.engine == "toy" else "prompt-lookup"


def load_draft(spec: str | list[str], target: Target, dtype: str = "bfloat16", lookup_ngram: int = 3) -> Draft | None:
    """The draft named by spec ("kind", "kind:FILE" or [kind, FILE]); None for plain decoding."""
    if isinstance(spec, str):
        head, sep, rest = spec.partition(":")
        parts = [head, rest] if sep and head in ("bigram", "unigram") else [spec]
    else:
        parts = list(spec)
    if not parts or len(parts) > 2:
        raise ValueError(f"--draft takes one of: {', '.join(DRAFT_KINDS)}")
    kind, arg = parts[0], (parts[1] if len(parts) == 2 else None)
    vocab_size = target.model.vocab_size
    if kind in ("unigram", "bigram"):
        if arg is None:
            raise ValueError(f"--draft {kind} needs the table file: --draft {kind} FILE")
        table = NgramTable.load(arg)
        if isinstance(target.tokenizer, TextTokenizer) and table.tokenizer != target.tokenizer.fingerprint():
            raise ValueError(f"the n-gram table {arg!r} was built with a different tokenizer than the target's")
        return NgramDraft(table, 1 if kind == "unigram" else 2, vocab_size)
    if arg is not None:
        raise ValueError(f"--draft {kind} takes no file argument")
    if kind == "none":
        return None
    if kind == "prompt-lookup":
        return PromptLookupDraft(vocab_size, max_ngram=lookup_ngram)
    if kind == "toy":
        if target.engine != "toy":
            raise ValueError("the toy draft only fits the toy target (--target toy)")
        return ModelDraft(bigram_pair()[1])
    if target.engine == "toy":
        raise ValueError("the toy target takes the drafts toy, prompt-lookup or none")
    model, hf_tokenizer = load_hf_model(kind, parse_dtype(dtype))
    draft = HFCausalLM(model, kind)
    check_compatible(target.tokenizer, TextTokenizer(hf_tokenizer), vocab_size, draft.vocab_size)
    return ModelDraft(draft, vocab_size=vocab_size, name=kind)
