"""`specdecode train-draft --kind eagle`: train the feature-level head (models/eagle.py) on the target's own passes.

Data: documents of the target's own answers to generated training prompts (half greedy, half sampled at temperature
1) and chunks of standard-library source. Each training step runs the target's batched prefill over a batch of
documents (distill/teacher.py), keeping the residual stream entering the head's feature layers and the target's
next-token distribution at every position; the head learns to match that distribution one position further on.

Rollout loss (EAGLE-3's training-time test): at inference only the first draft of a round sees target features;
later drafts run on the head's own output. So step s of the rollout feeds, at position p, the head's step s - 1
output of position p - 1 instead of target features, and attends to what it would attend to when drafting:

    step-1 keys of positions <= p - s + 1 (made from target features), and the step-r key of position p - s + r
    for r = 2 .. s (made from its own outputs)

each step's loss weighted 0.8^(s - 1). Labels: the target's probabilities over the head's Vd tokens (mass outside
them is left out: q = 0 there is exact, only acceptance is lost).
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from ..cpu import capability
from ..load import Target
from ..models.eagle import EagleHead, default_feature_layers, eagle_config, is_eagle, load_tensors, save_eagle
from ..models.llama import rotary_tables
from .pipeline import Budget, collect_answers, evaluate, stdlib_documents
from .prompts import training_prompts
from .teacher import BatchedTeacher


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


def collect_documents(target: Target, budget: EagleBudget, seed: int) -> dict[str, list[list[int]]]:
    """Token-id documents, each cut to seq_len (the end kept): "answers" (prompt + the target's answer) and "text"
    (standard-library source)."""
    prompts = training_prompts(budget.prompts, seed)
    answer_budget = Budget(prompts=budget.prompts, answer_tokens=budget.answer_tokens, batch=budget.answer_batch)
    answers = collect_answers(target, prompts, answer_budget, seed)
    return {"answers": [(a.prompt + a.tokens)[-budget.seq_len:] for a in answers],
            "text": stdlib_documents(target.tokenizer, budget.text_positions, seed, budget.seq_len)}


def draft_vocabulary(documents: list[list[int]], vocab_size: int, size: int) -> torch.Tensor:
    """The `size` most frequent token ids of the documents (ties and unseen ids by id), sorted -> [Vd] int64."""
    counts = torch.zeros(vocab_size, dtype=torch.int64)
    for doc in documents:
        counts += torch.bincount(torch.tensor(doc), minlength=vocab_size)
    order = torch.argsort(counts, descending=True, stable=True)
    return order[: min(size, vocab_size)].sort().values


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


@dataclass
class Scored:
    """One document as the target saw it: what training needs of it, computed once."""

    ids: torch.Tensor  # [L] int64
    features: torch.Tensor  # [L, F] bf16: the residual stream entering the feature layers
    top_ids: torch.Tensor  # [L, K] int16: the target's K most likely draft-vocabulary tokens (draft ids)
    top_probs: torch.Tensor  # [L, K] bf16: their probabilities under the target (temperature 1)
    best: torch.Tensor  # [L] int16: the target's most likely token as a draft id, -1 when outside the vocabulary


class Teacher:
    """The target's batched pass over documents -> `Scored` documents."""

    def __init__(self, target: Target, feature_layers: tuple[int, ...], vocabulary: torch.Tensor, top_k: int = 32):
        self.teacher, self.layers, self.vocabulary = BatchedTeacher(target.model), feature_layers, vocabulary
        self.head, self.top_k = target.model.head, min(top_k, len(vocabulary))
        self.in_draft = torch.full((target.model.vocab_size,), -1, dtype=torch.int64)
        self.in_draft[vocabulary] = torch.arange(len(vocabulary))

    @torch.inference_mode()
    def __call__(self, documents: list[list[int]]) -> list[Scored]:
        B, T = len(documents), max(len(d) for d in documents)
        ids = torch.zeros(B, T, dtype=torch.int64)
        for row, doc in enumerate(documents):
            ids[row, : len(doc)] = torch.tensor(doc)
        hidden, features = self.teacher.prefill(ids, self.layers)
        flat = hidden.reshape(B * T, -1)
        top_ids, top_probs, best = [], [], []
        for start in range(0, B * T, 512):  # the full-vocabulary rows only a chunk at a time
            logp = torch.log_softmax(self.head(flat[start: start + 512]).float(), dim=-1)  # [n, V]
            top = logp[:, self.vocabulary].topk(self.top_k, dim=-1)
            top_ids.append(top.indices.to(torch.int16))
            top_probs.append(top.values.exp().to(torch.bfloat16))
            best.append(self.in_draft[logp.argmax(dim=-1)].to(torch.int16))
        top_ids, top_probs = torch.cat(top_ids).view(B, T, -1), torch.cat(top_probs).view(B, T, -1)
        best = torch.cat(best).view(B, T)
        return [Scored(ids[r, :n], features[r, :n].clone(), top_ids[r, :n].clone(), top_probs[r, :n].clone(),
                       best[r, :n].clone()) for r, n in enumerate(len(d) for d in documents)]

    def score_all(self, documents: list[list[int]], batch: int, desc: str, progress: bool = True) -> list[Scored]:
        """Every document, in batches of similar length, returned in the input order."""
        order = sorted(range(len(documents)), key=lambda i: len(documents[i]))
        scored: list[Scored | None] = [None] * len(documents)
        for start in tqdm(range(0, len(order), batch), desc=desc, unit="batch", disable=not progress):
            chunk = order[start: start + batch]
            for i, doc in zip(chunk, self([documents[i] for i in chunk]), strict=True):
                scored[i] = doc
        return scored


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
    """The rollout loss of one batch -> (weighted loss, [(loss, top-1 agreement, positions)] per step).

    Agreement: the head's most likely token equals the target's (what greedy acceptance tests)."""
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
    h = head.fuse(batch["features"].float())
    keys, values, total, report, out = [], [], 0.0, [], h
    for s in range(1, steps + 1):
        if s > 1:  # position p continues from the head's own output at p - 1
            h = torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], dim=1)
        q, k, v = head.layer.project(head.inputs(h, embeds), head.shape, cos, sin)
        keys.append(k)
        values.append(v)
        attended = head.layer.attend(q, torch.cat(keys, dim=2), torch.cat(values, dim=2), rollout_mask(T, s))
        out = head.finish(h, attended)
        logq = torch.log_softmax(head.logits(out), dim=-1)  # [B, T, Vd]
        valid = has_label & (position >= s - 1)
        n = int(valid.sum())
        ce = -(labels * logq).sum(-1)  # [B, T]
        loss = (ce * valid).sum() / max(n, 1)
        total = total + 0.8 ** (s - 1) * loss
        agree = ((logq.argmax(-1) == target_best) & valid).sum().item() / max(n, 1)
        report.append((loss.item(), agree, n))
    return total, report


def _scored(teacher: Teacher, train: dict, held: dict, vocabulary: torch.Tensor, budget: EagleBudget,
            cache: Path | None, progress: bool) -> tuple[dict, dict]:
    """The target's scoring of every training and held-out document, by kind (from `cache` when it holds the same
    documents scored over the same vocabulary)."""
    if cache is not None and cache.is_file():
        saved = torch.load(cache, weights_only=False)
        same = torch.equal(saved["vocabulary"], vocabulary) and all(
            len(saved["train"].get(k, [])) == len(v) for k, v in train.items())
        if same:
            print(f"reusing the target's scoring of the documents cached in {cache}")
            return saved["train"], saved["held"]
    scored = [{kind: teacher.score_all(docs, budget.batch, f"target scores {part} {kind}", progress)
               for kind, docs in split.items()} for part, split in (("training", train), ("held-out", held))]
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"vocabulary": vocabulary, "train": scored[0], "held": scored[1]}, cache)
    return scored[0], scored[1]


def _autocast():
    """bf16 matmuls where the CPU has native ones (about 4x fp32's training speed there), else fp32."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=capability().bf16_matmul)


def _split(documents: dict[str, list[list[int]]], seed: int) -> tuple[dict, dict]:
    """-> (training documents, held-out documents), by kind: 1 in 25 of each kind held out (at most 32)."""
    train, held = {}, {}
    for kind, docs in documents.items():
        docs = [d for d in docs if len(d) >= 8]
        order = list(range(len(docs)))
        random.Random(seed).shuffle(order)
        n_held = min(32, max(1, len(order) // 25)) if len(order) > 1 else 0
        train[kind] = [docs[i] for i in order[n_held:]]
        held[kind] = [docs[i] for i in order[:n_held]]
    return train, held


def _batch_documents(train: dict[str, list], budget: EagleBudget, rng: random.Random) -> list:
    """budget.batch documents: answer_share of them from the answers, the rest from the text (or all from one kind
    when the other is empty)."""
    answers, text = train.get("answers", []), train.get("text", [])
    n_answers = round(budget.batch * budget.answer_share) if answers and text else (budget.batch if answers else 0)
    return [rng.choice(answers) for _ in range(n_answers)] + [rng.choice(text) for _ in range(budget.batch - n_answers)]


def held_out(tensors: dict[str, torch.Tensor], config: dict, batches: dict[str, list[dict]], embed: torch.Tensor,
             steps: int) -> dict:
    """Loss and top-1 agreement per rollout step over the held-out batches: of all of them, and of each kind."""
    result = {kind: _held_out(tensors, config, b, embed, steps) for kind, b in batches.items() if b}
    return _held_out(tensors, config, [x for b in batches.values() for x in b], embed, steps) | result


def _held_out(tensors: dict[str, torch.Tensor], config: dict, batches: list[dict], embed: torch.Tensor,
              steps: int) -> dict:
    sums = [[0.0, 0.0, 0] for _ in range(steps)]
    with torch.no_grad(), _autocast():
        for batch in batches:
            _, report = rollout(tensors, config, batch, embed, steps)
            for s, (loss, agree, n) in enumerate(report):
                sums[s][0] += loss * n
                sums[s][1] += agree * n
                sums[s][2] += n
    return {"loss": [a / max(n, 1) for a, _, n in sums], "agreement": [b / max(n, 1) for _, b, n in sums]}


def train_eagle(target: Target, out: Path, budget: EagleBudget, documents: dict[str, list[list[int]]], seed: int = 0,
                resume: bool = False, progress: bool = True, command: str = "specdecode train-draft --kind eagle",
                evaluate_after: bool = True, max_steps: int | None = None, data_seconds: float = 0.0,
                scored_cache: Path | None = None) -> dict:
    """Train (or, with resume, go on training the head in `out`) for budget.train_seconds (or max_steps) on the
    documents; write the head to `out` with training.json and a model card. data_seconds: what making the documents
    took (counted in the model card's CPU hours). scored_cache: a file to keep the target's scoring of the documents
    in (about 3.6 kB a position for SmolLM2), reused by later runs on the same documents."""
    if target.engine != "native":
        raise ValueError("train-draft --kind eagle needs a target the native engine runs (a Llama-family checkpoint)")
    started = time.perf_counter() - data_seconds
    torch.manual_seed(seed)
    train_docs, held_docs = _split(documents, seed)
    target_config = json.loads((target.source / "config.json").read_text())
    history: list[dict] = []
    if resume:
        if not is_eagle(out):
            raise ValueError(f"--resume: {str(out)!r} holds no EAGLE-3 head to go on training")
        tensors, config = load_tensors(out)
        history = json.loads((out / "training.json").read_text()).get("runs", [])
        vocabulary = torch.arange(len(tensors["d2t"])) + tensors["d2t"]
    else:
        vocabulary = draft_vocabulary([d for docs in train_docs.values() for d in docs], target_config["vocab_size"],
                                      budget.draft_vocab)
        config = eagle_config(target_config, len(vocabulary), target.name)
        tensors = initial_tensors(target, config, vocabulary, seed)
    feature_layers = tuple(config["specdecode"]["feature_layers"])
    assert feature_layers == default_feature_layers(target_config["num_hidden_layers"])
    params = {k: v.requires_grad_(True) for k, v in tensors.items() if k not in ("d2t", "t2d")}
    optimizer = torch.optim.AdamW(params.values(), lr=budget.lr, betas=(0.9, 0.95), weight_decay=0.0)
    scored_train, scored_held = _scored(Teacher(target, feature_layers, vocabulary), train_docs, held_docs,
                                        vocabulary, budget, scored_cache, progress)
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
        batch = make_batch(_batch_documents(scored_train, budget, rng), Vd)
        with _autocast():
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


def model_card(summary: dict, config: dict, command: str) -> str:
    last = summary["runs"][-1]
    agreement = " / ".join(f"{a:.2f}" for a in last["held_out_after"]["agreement"])
    evaluation = summary.get("evaluation", {})
    alpha = ""
    if evaluation:
        e0, e1 = evaluation["temperature_0"], evaluation["temperature_1"]
        alpha = (f"- Held-out bench prompts (split \"test\"), gamma 4: alpha {e0['alpha']:.2f} greedy, "
                 f"{e1['alpha']:.2f} at temperature 1; c = {e0['c']:.3f}.\n")
    runs = len(summary["runs"])
    commands = "\n".join(f"    {r.get('command', command)}" for r in summary["runs"])
    return f"""# An EAGLE-3 draft head for {summary['target']}

One Llama decoder layer at the target's width ({config['hidden_size']}; {config['num_attention_heads']} heads,
{config['num_key_value_heads']} key/value heads, MLP {config['intermediate_size']}) that drafts from the target's own
hidden states: the residual stream entering target layers {config['specdecode']['feature_layers']} (fused by `fc`),
the embedding of the next token, and after the first draft its own output. Its softmax covers the
{summary['draft_vocabulary']} most frequent tokens of the training documents (`d2t` / `t2d` map them to the target's
vocabulary; q = 0 elsewhere, which keeps speculative decoding exact). {summary['parameters'] / 1e6:.1f}M parameters
in bfloat16. The layout is EAGLE-3's (architectures `{config['architectures'][0]}`; tensor names `fc`, `midlayer.*`,
`norm`, `lm_head`, `d2t`, `t2d`; the target's embedding is not stored), which vLLM and SGLang load as an `eagle3`
speculative model; in specdecode it is the `eagle` draft on the native engine.

## How it was made

{commands}

- Data, made offline by the target: {summary['train_documents']} training documents (answers of the target to
  generated prompts, half greedy and half sampled at temperature 1, and chunks of standard-library source), each
  scored once by the target's batched prefill (its features and top-32 next-token lists at every position).
- Loss: cross-entropy against the target's distribution one position ahead, over a
  {len(last['held_out_after']['loss'])}-step rollout (training-time test: later steps run on the head's own
  outputs), weights 0.8^(step - 1).
- {runs} training run(s), {sum(r['steps'] for r in summary['runs'])} AdamW steps in all,
  {summary['cpu_hours']:.2f} CPU core-hours (data generation included).
- Held-out documents: top-1 agreement with the target by rollout step {agreement} (loss
  {' / '.join(f'{x:.2f}' for x in last['held_out_after']['loss'])}).
{alpha}"""
