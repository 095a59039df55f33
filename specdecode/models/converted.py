"""A GGUF file's weights as the native engine holds them in int4-dot8 (models/gguf_weights.py), saved once per
machine so that later loads read them back instead of converting the file again.

Converting reads the file's metadata with the `gguf` package (a 151k-token vocabulary: ~15 s), de-quantises its
finer types with numpy and packs every matrix for the kernel: ~50 s for the 1.5B and ~35 s for the 0.5B on a 2-core
EPYC; reading the saved copies back takes ~2 s for both. A copy is one safetensors file under the cache directory
(`converted/`): the dense tensors (embedding, norms, biases) as they are, each matrix as its packed parts
(`dot8.Packed`: w, sub and sup; their bits, sizes and unscale in the file's metadata) and an output head
that is not the embedding as the GGUF file stores it (for a draft's cut head: `NativeLlama.restrict_output`), so a
model loaded from it is bitwise the one converted. The real pair's copies take 3.1 GB (the float32 embeddings most
of it). A copy's name says which file (its stem and a hash of its path) and reading (a target's, finer types kept,
or a draft's, all in 4 bits), and ends in a key of the file's size and modification time and of the text of the
code that converts (this module, gguf_weights.py, dot8.py, linear.py): a change to any of them makes a new copy, and
the older copies of the same file and reading are removed. A copy that cannot be read is converted again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType

from ..errors import first_line
from .default import cache_dir
from .dot8 import Packed
from .gguf_weights import Stored, read_gguf
from .linear import Linear
from .llama import LlamaLayer, LlamaShape

__all__ = ["entry", "read"]

SOURCES = [Path(__file__).with_name(name) for name in ("converted.py", "gguf_weights.py", "dot8.py", "linear.py")]
LINEARS = ("qkv", "o", "gate_up", "down")  # a LlamaLayer's matrices
NORMS = ("attn_norm", "mlp_norm")


def entry(path: Path, keep_finer: bool) -> Path:
    """Where the converted copy of the GGUF file at path, read as a target's (keep_finer) or a draft's, lives:
    `converted/STEM-PLACE-READING-KEY.safetensors`, PLACE a hash of the file's path (copies of the same file and
    reading differ only in KEY), KEY one of its size, modification time and the converting code's text."""
    path = Path(path).resolve()
    stat = path.stat()
    key = hashlib.sha256(f"{stat.st_size}|{stat.st_mtime_ns}|".encode())
    for source in SOURCES:
        key.update(source.read_bytes())
    place = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    reading = "target" if keep_finer else "draft"
    return cache_dir() / "converted" / f"{path.stem}-{place}-{reading}-{key.hexdigest()[:16]}.safetensors"


def read(path: str | Path, fmt: str, progress: str | None = None, keep_finer: bool = True) -> dict:
    """`read_gguf`'s parts of the GGUF file at path: in int4-dot8 from its converted copy where there is one, else
    converted and saved (other formats are converted every time). progress: a progress bar's label (None: none)."""
    if fmt != "int4-dot8":
        return read_gguf(path, fmt, progress, keep_finer)
    saved = entry(Path(path), keep_finer)
    if saved.is_file():
        try:
            return _load(saved, progress)
        except Exception as error:  # a copy cut short, or written by other code: convert again
            print(f"warning: the converted copy {saved.name} cannot be read ({first_line(error)}); "
                  "converting again", file=sys.stderr)
            saved.unlink(missing_ok=True)
    parts = read_gguf(path, fmt, progress, keep_finer)
    try:
        _save(parts, saved)
    except OSError as error:  # a full or read-only disk costs the next load its time, not this one its model
        print(f"warning: could not save the converted copy of {Path(path).name}: {error}", file=sys.stderr)
    return parts


def _save(parts: dict, saved: Path) -> None:
    from safetensors.torch import save_file

    tensors = {"embed": parts["embed"], "norm": parts["norm"]}
    linears = {}
    for i, layer in enumerate(parts["layers"]):
        for name in NORMS:
            tensors[f"layers.{i}.{name}"] = getattr(layer, name)
        for name in LINEARS:
            linears[f"layers.{i}.{name}"] = _put(tensors, f"layers.{i}.{name}", getattr(layer, name))
    linears["head"] = _put(tensors, "head", parts["head"])
    metadata = {"shape": json.dumps(dataclasses.asdict(parts["shape"])), "linears": json.dumps(linears)}
    if not parts["shape"].tied_embeddings:  # the head's own values, for restrict_output (else: the embedding's)
        head: Stored = parts["head_weight"]
        tensors["head_weight"] = torch.from_numpy(np.array(head.data).view(np.uint8).reshape(-1))
        metadata["head_weight"] = json.dumps({"kind": head.kind.name, "shape": head.shape,
                                              "dtype": str(head.dtype).removeprefix("torch."),
                                              "data": [str(head.data.dtype), list(head.data.shape)]})
    saved.parent.mkdir(parents=True, exist_ok=True)
    partial = saved.with_name(f"{saved.name}.partial-{os.getpid()}")
    try:
        save_file({name: t.contiguous() for name, t in tensors.items()}, str(partial), metadata)
        partial.replace(saved)  # whole or absent
    finally:
        partial.unlink(missing_ok=True)
    same = saved.name.rsplit("-", 1)[0] + "-"  # the same file and reading: older keys
    for older in saved.parent.iterdir():
        if older.name.startswith(same) and older.suffix == ".safetensors" and older != saved:
            older.unlink(missing_ok=True)


def _put(tensors: dict[str, torch.Tensor], prefix: str, linear: Linear) -> dict:
    """linear's tensors into tensors (under prefix), its scalars returned (for the metadata)."""
    if linear.format != "int4-dot8":
        raise ValueError(f"only int4-dot8 matrices are saved, not {linear.format}")
    if linear.bias is not None:
        tensors[f"{prefix}.bias"] = linear.bias
    for j, part in enumerate(linear.parts):
        for name in ("w", "sub", "sup"):
            tensors[f"{prefix}.{j}.{name}"] = getattr(part, name)
    return {"bias": linear.bias is not None, "parts": [
        {"bits": p.bits, "out": p.out_features, "in": p.in_features, "unscale": p.unscale}
        for p in linear.parts]}


def _load(saved: Path, progress: str | None) -> dict:
    from safetensors import safe_open
    from tqdm import tqdm

    with safe_open(str(saved), framework="pt") as f:
        metadata = f.metadata()
        shape = LlamaShape(**json.loads(metadata["shape"]))
        linears = json.loads(metadata["linears"])

        def linear(prefix: str) -> Linear:
            info = linears[prefix]
            parts = [Packed.from_layout(*(f.get_tensor(f"{prefix}.{j}.{name}") for name in ("w", "sub", "sup")),
                                        p["bits"], p["out"], p["in"], p["unscale"])
                     for j, p in enumerate(info["parts"])]
            return Linear.from_packed(parts, f.get_tensor(f"{prefix}.bias") if info["bias"] else None)

        layers = [LlamaLayer(**{name: f.get_tensor(f"layers.{i}.{name}") for name in NORMS},
                             **{name: linear(f"layers.{i}.{name}") for name in LINEARS})
                  for i in tqdm(range(shape.layers), desc=progress, unit="layer", file=sys.stderr, leave=False,
                                disable=progress is None)]
        embed = f.get_tensor("embed")
        parts = {"shape": shape, "embed": embed, "layers": layers, "norm": f.get_tensor("norm"),
                 "head": linear("head")}
        if shape.tied_embeddings:
            parts["head_weight"] = lambda: embed  # (what `read_gguf` de-quantizes for both: the same values)
        else:
            head = json.loads(metadata["head_weight"])
            data = f.get_tensor("head_weight").numpy().view(np.dtype(head["data"][0])).reshape(head["data"][1])
            parts["head_weight"] = Stored(data, GGMLQuantizationType[head["kind"]], tuple(head["shape"]),
                                          getattr(torch, head["dtype"]))
    return parts
