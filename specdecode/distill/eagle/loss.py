"""The rollout loss (EAGLE-3's training-time test), run through the head's own forward (`EagleHead.step`).

At inference only the first draft of a round sees target features; later drafts run on the head's own output. So
step s of the rollout feeds, at position p, the head's step s - 1 output of position p - 1 instead of target
features, and attends to what it would attend to when drafting:

    step-1 keys of positions <= p - s + 1 (made from target features), and the step-r key of position p - s + r
    for r = 2 .. s (made from its own outputs)

each step's loss weighted 0.8^(s - 1). Labels: the target's probabilities over the head's Vd tokens (mass outside
them is left out: q = 0 there is exact, only acceptance is lost). Step s's keys and values go to cache slots
(s - 1) T .. s T, so the cache of the whole rollout is [B, KV, steps T, hd] and step s reads its first s T slots.
"""

from __future__ import annotations

import torch

from ...cpu import capability
from ...models.eagle import EagleHead
from ...models.llama import rotary_tables

STEP_WEIGHT = 0.8  # of each rollout step's loss over the one before


def autocast():
    """bf16 matmuls where the CPU has native ones (about 4x fp32's training speed there), else fp32."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=capability().bf16_matmul)


def rollout_mask(T: int, s: int) -> torch.Tensor:
    """Additive mask [T, s T] of rollout step s (1-based): query p sees step-1 keys q <= p - s + 1 and the step-r key
    of position p - s + r for r = 2 .. s."""
    p = torch.arange(T)[:, None]
    q = torch.arange(T)[None, :]
    blocks = [q <= p - s + 1] + [q == p - s + r for r in range(2, s + 1)]
    allowed = torch.cat(blocks, dim=1)
    return torch.zeros(allowed.shape).masked_fill_(~allowed, -torch.inf)


def rollout(tensors: dict[str, torch.Tensor], config: dict, batch: dict[str, torch.Tensor], embed: torch.Tensor,
            steps: int) -> tuple[torch.Tensor, list[tuple[float, float, int]]]:
    """The rollout loss of one batch (data.make_batch) -> (weighted loss, [(loss, top-1 agreement, positions)] per
    step). Agreement: the head's most likely token equals the target's (what greedy acceptance tests)."""
    head = EagleHead.from_tensors(tensors, config, "fp32")
    ids, lengths, probs = batch["ids"], batch["lengths"], batch["probs"].float()
    B, T = ids.shape
    cos, sin = rotary_tables(head.shape, T)
    cos, sin = cos[None].expand(B, T, -1), sin[None].expand(B, T, -1)
    following = torch.cat([ids[:, 1:], ids[:, -1:]], dim=1)  # [B, T]: the token after each position
    embeds = embed[following].float()  # [B, T, D]
    labels = torch.cat([probs[:, 1:], probs[:, -1:]], dim=1)  # [B, T, Vd]: p at position p + 1
    target_best = torch.cat([batch["best"][:, 1:], batch["best"][:, -1:]], dim=1)  # [B, T] draft ids, or -1
    position = torch.arange(T)[None]
    has_label = position + 1 < lengths[:, None]  # [B, T]
    slots = torch.zeros(B, head.shape.kv_heads, T, head.shape.head_dim)  # one step's cache slots
    k_cache = v_cache = slots[:, :, :0]
    h = head.fuse(batch["features"].float())
    total, report, out = 0.0, [], h
    for s in range(1, steps + 1):
        if s > 1:  # position p continues from the head's own output at p - 1
            h = torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], dim=1)
        # A new cache each step (not one written in place): autograd keeps the earlier steps' keys it read.
        k_cache, v_cache = torch.cat([k_cache, slots], dim=2), torch.cat([v_cache, slots], dim=2)
        out = head.step(h, embeds, cos, sin, k_cache, v_cache, (s - 1) * T, s * T, rollout_mask(T, s))
        logq = torch.log_softmax(head.logits(out), dim=-1)  # [B, T, Vd]
        valid = has_label & (position >= s - 1)
        n = int(valid.sum())
        ce = -(labels * logq).sum(-1)  # [B, T]
        loss = (ce * valid).sum() / max(n, 1)
        total = total + STEP_WEIGHT ** (s - 1) * loss
        agree = ((logq.argmax(-1) == target_best) & valid).sum().item() / max(n, 1)
        report.append((loss.item(), agree, n))
    return total, report


def held_out(tensors: dict[str, torch.Tensor], config: dict, batches: dict[str, list[dict]], embed: torch.Tensor,
             steps: int) -> dict:
    """Loss and top-1 agreement per rollout step over the held-out batches: of all of them, and of each kind."""
    result = {kind: _held_out(tensors, config, b, embed, steps) for kind, b in batches.items() if b}
    return _held_out(tensors, config, [x for b in batches.values() for x in b], embed, steps) | result


def _held_out(tensors: dict[str, torch.Tensor], config: dict, batches: list[dict], embed: torch.Tensor,
              steps: int) -> dict:
    sums = [[0.0, 0.0, 0] for _ in range(steps)]
    with torch.no_grad(), autocast():
        for batch in batches:
            _, report = rollout(tensors, config, batch, embed, steps)
            for s, (loss, agree, n) in enumerate(report):
                sums[s][0] += loss * n
                sums[s][1] += agree * n
                sums[s][2] += n
    return {"loss": [a / max(n, 1) for a, _, n in sums], "agreement": [b / max(n, 1) for _, b, n in sums]}
