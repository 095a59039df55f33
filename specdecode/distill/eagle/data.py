"""The EAGLE trainer's data: documents of token ids, the draft vocabulary, the held-out split, padded batches."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from ...load import Target
from ..pipeline import collect_answers, stdlib_documents
from ..prompts import training_prompts
from .teacher import Scored


@dataclass
class EagleBudget:
    prompts: int = 480  # training prompts the target answers (about 8 minutes at 128 tokens)
    answer_tokens: int = 128
    answer_batch: int = 32
    text_positions: int = 400_000  # positions of standard-library source
    draft_vocab: int = 8192  # Vd: the most frequent tokens of the documents
    seq_len: int = 256  # positions per training document
    batch: int = 8  # documents per step
    rollout: int = 3  # steps of the rollout loss
    answer_share: float = 0.5  # of each batch's documents drawn from the target's answers (the rest: source text)
    lr: float = 1e-3
    train_seconds: float = 3600.0  # this run's training time
    eval_prompts: int = 12
    eval_tokens: int = 96


MIN_LENGTH = 8  # shorter documents are dropped: too few positions to roll out over


def collect_documents(target: Target, budget: EagleBudget, seed: int) -> dict[str, list[list[int]]]:
    """Token-id documents, each cut to seq_len (the end kept): "answers" (prompt + the target's answer) and "text"
    (standard-library source)."""
    prompts = training_prompts(budget.prompts, seed)
    answers = collect_answers(target, prompts, budget.answer_tokens, budget.answer_batch, seed)
    return {"answers": [(a.prompt + a.tokens)[-budget.seq_len:] for a in answers],
            "text": stdlib_documents(target.tokenizer, budget.text_positions, seed, budget.seq_len)}


def draft_vocabulary(documents: list[list[int]], vocab_size: int, size: int) -> torch.Tensor:
    """The `size` most frequent token ids of the documents (ties and unseen ids by id), sorted -> [Vd] int64."""
    counts = torch.zeros(vocab_size, dtype=torch.int64)
    for doc in documents:
        counts += torch.bincount(torch.tensor(doc), minlength=vocab_size)
    order = torch.argsort(counts, descending=True, stable=True)
    return order[: min(size, vocab_size)].sort().values


def split(documents: dict[str, list[list[int]]], seed: int) -> tuple[dict, dict]:
    """-> (training documents, held-out documents), by kind: 1 in 25 of each kind held out (at most 32); documents
    shorter than MIN_LENGTH dropped. ValueError when no document is left to train on."""
    train, held = {}, {}
    for kind, docs in documents.items():
        docs = [d for d in docs if len(d) >= MIN_LENGTH]
        order = list(range(len(docs)))
        random.Random(seed).shuffle(order)
        n_held = min(32, max(1, len(order) // 25)) if len(order) > 1 else 0
        train[kind] = [docs[i] for i in order[n_held:]]
        held[kind] = [docs[i] for i in order[:n_held]]
    if not any(train.values()):
        raise ValueError(f"no training document of {MIN_LENGTH} tokens or more")
    return train, held


def batch_documents(train: dict[str, list], budget: EagleBudget, rng: random.Random) -> list:
    """budget.batch documents: answer_share of them from the answers, the rest from the text (or all from one kind
    when the other is empty)."""
    answers, text = train.get("answers", []), train.get("text", [])
    n_answers = round(budget.batch * budget.answer_share) if answers and text else (budget.batch if answers else 0)
    return [rng.choice(answers) for _ in range(n_answers)] + [rng.choice(text) for _ in range(budget.batch - n_answers)]


def make_batch(docs: list[Scored], draft_vocab: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors of a batch: ids, best [B, T]; lengths [B]; features [B, T, F]; probs [B, T, Vd] (the
    target's top-K probabilities, zero elsewhere)."""
    B, T = len(docs), max(len(d.ids) for d in docs)
    F, K = docs[0].features.shape[1], docs[0].top_ids.shape[1]
    ids, best = torch.zeros(B, T, dtype=torch.int64), torch.full((B, T), -1, dtype=torch.int64)
    features = torch.zeros(B, T, F, dtype=torch.bfloat16)
    top_ids, top_probs = torch.zeros(B, T, K, dtype=torch.int64), torch.zeros(B, T, K)
    for r, d in enumerate(docs):
        n = len(d.ids)
        ids[r, :n], best[r, :n], features[r, :n] = d.ids, d.best.long(), d.features
        top_ids[r, :n], top_probs[r, :n] = d.top_ids.long(), d.top_probs.float()
    probs = torch.zeros(B, T, draft_vocab).scatter_(2, top_ids, top_probs)
    return {"ids": ids, "lengths": torch.tensor([len(d.ids) for d in docs]), "features": features, "probs": probs,
            "best": best}
