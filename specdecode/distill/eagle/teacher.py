"""The target's pass over the training documents, once per document: what the EAGLE trainer needs of each position.

The pass is distill/teacher.py's batched prefill; here it is reduced to the head's labels (the target's top-K over the
draft vocabulary) and kept, in memory and optionally in a cache file keyed by a hash of the documents and the target.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from ...load import Target
from ...models.native import NativeLlama
from ..teacher import BatchedTeacher

TOP_K = 32  # of the target's most likely draft-vocabulary tokens kept per position


@dataclass
class Scored:
    """One document as the target saw it: what training needs of it, computed once."""

    ids: torch.Tensor  # [L] int64
    features: torch.Tensor  # [L, F] bf16: the residual stream entering the feature layers
    top_ids: torch.Tensor  # [L, K] int16: the target's K most likely draft-vocabulary tokens (draft ids)
    top_probs: torch.Tensor  # [L, K] bf16: their probabilities under the target (temperature 1)
    best: torch.Tensor  # [L] int16: the target's most likely token as a draft id, -1 when outside the vocabulary


@torch.inference_mode()
def score_batch(model: NativeLlama, documents: list[list[int]], feature_layers: tuple[int, ...],
                vocabulary: torch.Tensor, in_draft: torch.Tensor) -> list[Scored]:
    """One batched prefill over documents -> one Scored each. vocabulary [Vd]: the draft's target ids; in_draft [V]:
    each target id's draft id, or -1."""
    B, T = len(documents), max(len(d) for d in documents)
    ids = torch.zeros(B, T, dtype=torch.int64)
    for row, doc in enumerate(documents):
        ids[row, : len(doc)] = torch.tensor(doc)
    hidden, features = BatchedTeacher(model).prefill(ids, feature_layers)
    flat = hidden.reshape(B * T, -1)
    top_k = min(TOP_K, len(vocabulary))
    top_ids, top_probs, best = [], [], []
    for start in range(0, B * T, 512):  # the full-vocabulary rows only a chunk at a time
        logp = torch.log_softmax(model.head(flat[start: start + 512]).float(), dim=-1)  # [n, V]
        top = logp[:, vocabulary].topk(top_k, dim=-1)
        top_ids.append(top.indices.to(torch.int16))
        top_probs.append(top.values.exp().to(torch.bfloat16))
        best.append(in_draft[logp.argmax(dim=-1)].to(torch.int16))
    top_ids, top_probs = torch.cat(top_ids).view(B, T, -1), torch.cat(top_probs).view(B, T, -1)
    best = torch.cat(best).view(B, T)
    return [Scored(ids[r, :n], features[r, :n].clone(), top_ids[r, :n].clone(), top_probs[r, :n].clone(),
                   best[r, :n].clone()) for r, n in enumerate(len(d) for d in documents)]


def score_all(target: Target, documents: list[list[int]], feature_layers: tuple[int, ...], vocabulary: torch.Tensor,
              batch: int, desc: str, progress: bool = True) -> list[Scored]:
    """Every document, in batches of similar length, returned in the input order."""
    in_draft = torch.full((target.model.vocab_size,), -1, dtype=torch.int64)
    in_draft[vocabulary] = torch.arange(len(vocabulary))
    order = sorted(range(len(documents)), key=lambda i: len(documents[i]))
    scored: list[Scored | None] = [None] * len(documents)
    for start in tqdm(range(0, len(order), batch), desc=desc, unit="batch", disable=not progress):
        chunk = order[start: start + batch]
        for i, doc in zip(chunk, score_batch(target.model, [documents[i] for i in chunk], feature_layers, vocabulary,
                                             in_draft), strict=True):
            scored[i] = doc
    return scored


def scoring_key(target: Target, parts: tuple[dict, ...], feature_layers: tuple[int, ...],
                vocabulary: torch.Tensor) -> str:
    """sha256 of everything the scoring depends on: the documents (by part and kind, in order), the target (name,
    checkpoint, weight format), the feature layers, the draft vocabulary and K."""
    digest = hashlib.sha256()
    digest.update(repr((target.name, str(target.source), target.precision, feature_layers, TOP_K)).encode())
    digest.update(vocabulary.numpy().tobytes())
    for part in parts:
        for kind, docs in sorted(part.items()):
            digest.update(f"|{kind}:{len(docs)}".encode())
            for doc in docs:
                digest.update(torch.tensor(doc, dtype=torch.int64).numpy().tobytes() + b";")
    return digest.hexdigest()


def scored_documents(target: Target, train: dict, held: dict, feature_layers: tuple[int, ...],
                     vocabulary: torch.Tensor, batch: int, cache: Path | None, progress: bool) -> tuple[dict, dict]:
    """The target's scoring of every training and held-out document, by kind: from `cache` when it was made from
    the same documents, target and vocabulary (the same key), else computed (and written to `cache`)."""
    key = scoring_key(target, (train, held), feature_layers, vocabulary)
    if cache is not None and cache.is_file():
        saved = torch.load(cache, weights_only=False)
        if saved.get("key") == key:
            print(f"reusing the target's scoring of the documents cached in {cache}")
            return saved["train"], saved["held"]
    scored = [{kind: score_all(target, docs, feature_layers, vocabulary, batch, f"target scores {part} {kind}",
                               progress) for kind, docs in split.items()}
              for part, split in (("training", train), ("held-out", held))]
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"key": key, "train": scored[0], "held": scored[1]}, cache)
    return scored[0], scored[1]
