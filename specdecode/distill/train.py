"""Distilling a small Llama draft from the target (nanoGPT-sized: model, data and loop in one screen).

    draft   a Llama with the target's vocabulary and tokenizer, tied embeddings initialised from the target's own
            embedding matrix projected onto its top principal directions
    data    prompts + the target's answers, with the target's top-k log-probabilities at every answer position
    loss    cross-entropy of the draft against the target's (top-k) distribution = KL(p || q) up to a constant:
            it raises sum_x min(p, q), the acceptance rate, at every temperature at once
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

import torch
from tqdm import tqdm

from .teacher import Answer


@dataclass(frozen=True)
class DraftShape:
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 384
    max_positions: int = 2048


def make_draft(target_config: dict, target_embedding: torch.Tensor, shape: DraftShape, seed: int = 0):
    """A transformers LlamaForCausalLM draft sharing the target's vocabulary, its embedding a PCA of the target's."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=target_config["vocab_size"], hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.max_positions, rms_norm_eps=target_config.get("rms_norm_eps", 1e-5),
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=True,
        bos_token_id=target_config.get("bos_token_id"), eos_token_id=target_config.get("eos_token_id"),
        pad_token_id=target_config.get("pad_token_id"),
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        emb = target_embedding.float()
        centred = emb - emb.mean(dim=0)
        _, _, basis = torch.pca_lowrank(centred, q=shape.hidden, center=False, niter=4)  # [D_target, hidden]
        projected = centred @ basis
        model.model.embed_tokens.weight.copy_(projected / projected.std() * config.initializer_range * 2)
    return model


PROMPT_WEIGHT = 0.5  # prompt and text positions teach language and copying; answers are what the draft will face


@dataclass
class Example:
    ids: torch.Tensor  # [T] prompt + answer
    top_ids: torch.Tensor  # [T - 1, k] the target's top tokens at every position that predicts a next token
    top_probs: torch.Tensor  # [T - 1, k] their probabilities, renormalised over the top k
    weights: torch.Tensor  # [T - 1] PROMPT_WEIGHT at prompt positions, 1 at answer positions


def examples_from(answers: list[Answer], max_len: int) -> list[Example]:
    out = []
    for a in answers:  # an Answer with no answer tokens is teacher-scored text: every position weighs PROMPT_WEIGHT
        ids = (a.prompt + a.tokens)[:max_len]
        if len(ids) < 2:
            continue
        n = len(ids) - 1
        probs = a.top_logprobs[:n].float().exp()
        weights = torch.ones(n)
        weights[: len(a.prompt) - 1] = PROMPT_WEIGHT
        out.append(Example(torch.tensor(ids), a.top_ids[:n].long(), probs / probs.sum(-1, keepdim=True), weights))
    return out


def output_vocabulary(examples: list[Example], vocab_size: int, mass: float = 0.995,
                      limit: int = 12288) -> torch.Tensor:
    """The tokens that carry `mass` of the target's probability over the training positions (at most `limit`),
    sorted: the softmax most training steps are computed over (49k-way output layers cost 88% of a step)."""
    weight = torch.zeros(vocab_size, dtype=torch.float64)
    for e in examples:
        weight.index_add_(0, e.top_ids.reshape(-1), e.top_probs.reshape(-1).double())
    order = weight.argsort(descending=True)
    cumulative = weight[order].cumsum(0) / weight.sum()
    n = min(int((cumulative < mass).sum()) + 1, limit)
    return order[:n].sort().values


def soft_loss(model, batch: list[Example], answers_only: bool = False,
              vocabulary: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
    """Weighted mean cross-entropy of the draft against the target's top-k lists over a batch's positions.

    vocabulary: compute the softmax over these token ids only (the target's lists renormalised onto them).
    """
    length = max(len(e.ids) for e in batch)
    ids = torch.zeros(len(batch), length, dtype=torch.int64)
    mask = torch.zeros(len(batch), length, dtype=torch.int64)
    for row, e in enumerate(batch):
        ids[row, : len(e.ids)] = e.ids
        mask[row, : len(e.ids)] = 1
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state  # [B, T, hidden]
    weights = torch.cat([e.weights for e in batch])
    keep = weights == 1 if answers_only else weights > 0
    rows = torch.cat([torch.full((len(e.top_ids),), r) for r, e in enumerate(batch)])[keep]
    cols = torch.cat([torch.arange(len(e.top_ids)) for e in batch])[keep]
    top_ids = torch.cat([e.top_ids for e in batch])[keep]
    top_probs = torch.cat([e.top_probs for e in batch])[keep]
    w = weights[keep]
    h = hidden[rows, cols]
    if vocabulary is None:
        logq = torch.log_softmax(model.lm_head(h).float(), dim=-1)  # [N, V]
    else:
        logq = torch.log_softmax((h @ model.lm_head.weight[vocabulary].T).float(), dim=-1)  # [N, |vocabulary|]
        where = torch.full((model.config.vocab_size,), -1, dtype=torch.int64)
        where[vocabulary] = torch.arange(len(vocabulary))
        top_ids = where[top_ids]
        top_probs = top_probs * (top_ids >= 0)
        top_probs = top_probs / top_probs.sum(-1, keepdim=True).clamp_min(1e-9)
        top_ids = top_ids.clamp_min(0)
    loss = -((top_probs * logq.gather(-1, top_ids)).sum(-1) * w).sum() / w.sum()
    return loss, len(rows)


def train(model, train_set: list[Example], held_out: list[Example], seconds: float, lr: float = 3e-3,
          batch_positions: int = 1024, seed: int = 0, progress: bool = True, vocabulary: torch.Tensor | None = None,
          calibrate: float = 0.15) -> dict:
    """AdamW with warm-up and cosine decay, for a wall-clock budget. Returns the loss curve and held-out losses.

    With a vocabulary, the softmax runs over it until the last `calibrate` fraction of the time, which uses the
    full output layer so that the tokens outside it end up with low probability too."""
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.95))
    batches = _batches(train_set, batch_positions)
    held_batches = _batches(held_out, batch_positions)
    history = {"step": [], "loss": [], "held_out": []}
    held_before = _held_out_loss(model, held_batches)
    start, step, ema = time.perf_counter(), 0, None
    bar = tqdm(total=int(seconds), desc="training draft", unit="s", disable=not progress)
    while (elapsed := time.perf_counter() - start) < seconds:
        fraction = elapsed / seconds
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * fraction)))
        batch = rng.choice(batches)
        model.train()
        loss, _ = soft_loss(model, batch, vocabulary=vocabulary if fraction < 1 - calibrate else None)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        step += 1
        if step % 25 == 0:
            history["step"].append(step)
            history["loss"].append(ema)
        bar.set_postfix(loss=f"{ema:.3f}", step=step)
        bar.update(int(time.perf_counter() - start) - bar.n)
    bar.close()
    return {"steps": step, "loss_curve": history, "held_out_before": held_before,
            "held_out_after": _held_out_loss(model, held_batches), "seconds": time.perf_counter() - start}


def _batches(examples: list[Example], batch_positions: int) -> list[list[Example]]:
    """Examples of similar length grouped so that each batch has about batch_positions answer positions."""
    ordered = sorted(examples, key=lambda e: len(e.ids))
    batches, current, count = [], [], 0
    for e in ordered:
        current.append(e)
        count += len(e.top_ids)
        if count >= batch_positions:
            batches.append(current)
            current, count = [], 0
    if current:
        batches.append(current)
    return batches


@torch.no_grad()
def _held_out_loss(model, batches: list[list[Example]]) -> float:
    model.eval()
    total, count = 0.0, 0
    for batch in batches:
        loss, n = soft_loss(model, batch, answers_only=True)  # held-out loss: answer positions only
        total += loss.item() * n
        count += n
    return total / max(count, 1)
