"""The EAGLE head's training: its initial parameters, then AdamW on the rollout loss for a time budget."""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm import tqdm

from ...load import Target
from ...models.eagle import default_feature_layers, eagle_config, is_eagle, load_tensors, save_eagle
from ..pipeline import evaluate
from .card import model_card
from .data import EagleBudget, batch_documents, draft_vocabulary, make_batch, split
from .loss import autocast, held_out, rollout
from .teacher import scored_documents


def initial_tensors(target: Target, config: dict, vocabulary: torch.Tensor, seed: int) -> dict[str, torch.Tensor]:
    """Layout-named fp32 parameters: fc picks the last feature (the deepest layer's stream), lm_head and the final
    norm start as the target's own rows and norm, the layer starts small and random."""
    g = torch.Generator().manual_seed(seed)
    D, inner = config["hidden_size"], config["intermediate_size"]
    H, KV = config["num_attention_heads"], config["num_key_value_heads"]
    hd = config.get("head_dim") or D // H
    model = target.model
    rand = lambda *shape, std=0.02: torch.randn(*shape, generator=g) * std  # noqa: E731
    fc = rand(D, 3 * D, std=0.002)
    fc[:, 2 * D:] += torch.eye(D)
    std_out = 0.02 / math.sqrt(2)
    t = {
        "fc.weight": fc,
        "midlayer.input_layernorm.weight": torch.ones(D), "midlayer.hidden_norm.weight": torch.ones(D),
        "midlayer.self_attn.q_proj.weight": rand(H * hd, 2 * D),
        "midlayer.self_attn.k_proj.weight": rand(KV * hd, 2 * D),
        "midlayer.self_attn.v_proj.weight": rand(KV * hd, 2 * D),
        "midlayer.self_attn.o_proj.weight": rand(D, H * hd, std=std_out),
        "midlayer.post_attention_layernorm.weight": torch.ones(D),
        "midlayer.mlp.gate_proj.weight": rand(inner, D), "midlayer.mlp.up_proj.weight": rand(inner, D),
        "midlayer.mlp.down_proj.weight": rand(D, inner, std=std_out),
        "norm.weight": model.norm.float().clone(), "lm_head.weight": model.head_weight()[vocabulary].float().clone(),
    }
    return t | vocabulary_maps(vocabulary, config["vocab_size"])


def vocabulary_maps(vocabulary: torch.Tensor, vocab_size: int) -> dict[str, torch.Tensor]:
    """d2t [Vd] (target id - draft id) and t2d [V] (is the target id in the draft vocabulary)."""
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[vocabulary] = True
    return {"d2t": vocabulary - torch.arange(len(vocabulary)), "t2d": t2d}


def _resumed(out: Path, target_config: dict) -> tuple[dict[str, torch.Tensor], dict, list[dict]]:
    """The head in `out` to go on training: its tensors, config and earlier runs. ValueError when there is none or it
    was made for a target of another shape."""
    if not is_eagle(out):
        raise ValueError(f"--resume: {str(out)!r} holds no EAGLE-3 head to go on training")
    tensors, config = load_tensors(out)
    for key in ("hidden_size", "vocab_size"):
        if config.get(key) != target_config[key]:
            raise ValueError(f"--resume: the head in {str(out)!r} has {key} {config.get(key)}, the target "
                             f"{target_config[key]}: it was trained for another target")
    history = json.loads((out / "training.json").read_text()).get("runs", [])
    return tensors, config, history


def train_eagle(target: Target, out: Path, budget: EagleBudget, documents: dict[str, list[list[int]]], seed: int = 0,
                resume: bool = False, progress: bool = True, command: str = "specdecode train-draft --kind eagle",
                evaluate_after: bool = True, max_steps: int | None = None, data_seconds: float = 0.0,
                scored_cache: Path | None = None) -> dict:
    """Train (or, with resume, go on training the head in `out`) for budget.train_seconds (or max_steps) on the
    documents; write the head to `out` with training.json and a model card. data_seconds: what making the documents
    took (counted in the model card's CPU hours). scored_cache: a file to keep the target's scoring of the documents
    in (about 3.6 kB a position for SmolLM2), reused by later runs on the same documents and target."""
    if target.engine != "native":
        raise ValueError("train-draft --kind eagle needs a target the native engine runs (a Llama-family checkpoint)")
    started = time.perf_counter() - data_seconds
    torch.manual_seed(seed)
    train_docs, held_docs = split(documents, seed)
    target_config = json.loads((target.source / "config.json").read_text())
    history: list[dict] = []
    if resume:
        tensors, config, history = _resumed(out, target_config)
        vocabulary = torch.arange(len(tensors["d2t"])) + tensors["d2t"]
    else:
        vocabulary = draft_vocabulary([d for docs in train_docs.values() for d in docs], target_config["vocab_size"],
                                      budget.draft_vocab)
        config = eagle_config(target_config, len(vocabulary), target.name)
        tensors = initial_tensors(target, config, vocabulary, seed)
    feature_layers = tuple(config["specdecode"]["feature_layers"])
    if feature_layers != default_feature_layers(target_config["num_hidden_layers"]):
        raise ValueError(f"the head reads target layers {list(feature_layers)}, not the default "
                         f"{list(default_feature_layers(target_config['num_hidden_layers']))} for this target")
    params = {k: v.requires_grad_(True) for k, v in tensors.items() if k not in ("d2t", "t2d")}
    optimizer = torch.optim.AdamW(params.values(), lr=budget.lr, betas=(0.9, 0.95), weight_decay=0.0)
    scored_train, scored_held = scored_documents(target, train_docs, held_docs, feature_layers, vocabulary,
                                                 budget.batch, scored_cache, progress)
    scored_at = time.perf_counter()
    embed, Vd = target.model.embed, len(vocabulary)
    rng = random.Random(seed + len(history))
    held_batches = {kind: [make_batch(docs[i: i + budget.batch], Vd) for i in range(0, len(docs), budget.batch)]
                    for kind, docs in scored_held.items()}
    before = held_out(tensors, config, held_batches, embed, budget.rollout)

    steps, positions, curve = 0, 0, []
    train_started = time.perf_counter()
    bar = tqdm(total=int(budget.train_seconds), desc="training the eagle head", unit="s", disable=not progress)
    warmup = 0 if resume else 50
    while (elapsed := time.perf_counter() - train_started) < budget.train_seconds and steps != max_steps:
        frac = max(elapsed / budget.train_seconds, steps / max_steps if max_steps else 0.0)
        ramp = min(1.0, (steps + 1) / warmup) if warmup else 1.0
        lr = budget.lr * ramp * (0.1 + 0.45 * (1 + math.cos(math.pi * frac)))  # warm-up, then cosine to 10%
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = make_batch(batch_documents(scored_train, budget, rng), Vd)
        with autocast():
            loss, report = rollout(tensors, config, batch, embed, budget.rollout)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 0.5)
        optimizer.step()
        steps += 1
        positions += report[0][2]
        if steps % 10 == 0:
            curve.append({"step": steps, "seconds": round(time.perf_counter() - train_started, 1),
                          "loss": [round(r[0], 4) for r in report], "agreement": [round(r[1], 4) for r in report]})
            bar.set_postfix(loss=f"{report[0][0]:.3f}", agree="/".join(f"{r[1]:.2f}" for r in report))
        bar.update(int(time.perf_counter() - train_started) - bar.n)
    bar.close()
    train_seconds = time.perf_counter() - train_started
    after = held_out(tensors, config, held_batches, embed, budget.rollout)
    save_eagle(out, tensors, config)
    run = {"command": command, "seed": seed, "budget": asdict(budget), "steps": steps, "positions": positions,
           "scoring_seconds": scored_at - started - data_seconds,
           "train_seconds": train_seconds, "total_seconds": time.perf_counter() - started,
           "held_out_before": before, "held_out_after": after, "threads": torch.get_num_threads(),
           "loss_curve": curve}
    history.append(run)
    summary = {"target": target.name, "documents": {k: len(v) for k, v in documents.items()},
               "train_documents": sum(len(v) for v in train_docs.values()),
               "held_out_documents": {k: len(v) for k, v in held_docs.items()}, "draft_vocabulary": len(vocabulary),
               "parameters": sum(v.numel() for k, v in tensors.items() if k not in ("d2t", "t2d")),
               "cpu_hours": sum(r["total_seconds"] * r["threads"] for r in history) / 3600, "runs": history}
    if evaluate_after:
        summary["evaluation"] = evaluate(target, out, budget.eval_prompts, budget.eval_tokens, seed)
    (out / "training.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "README.md").write_text(model_card(summary, config, command))
    return summary
