"""`specdecode train-draft` end to end: prompts -> the target's answers -> a trained draft -> held-out evaluation."""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from ..drafts.ngram import NgramTable
from ..engine import GenerationStats, generate
from ..load import OUTPUT_VOCABULARY, Target, load_draft
from ..prompts import load_prompts
from ..sampling import SamplingConfig
from .prompts import training_prompts
from .teacher import Answer, BatchedTeacher
from .train import DraftShape, examples_from, make_draft, output_vocabulary, train


@dataclass
class Budget:
    prompts: int = 1600  # training prompts answered by the target (~26 min)
    answer_tokens: int = 128  # longest answer per prompt
    batch: int = 32  # prompts answered at once
    text_positions: int = 120_000  # positions of standard-library text the target scores (~5 min)
    train_seconds: float = 1320.0
    eval_prompts: int = 12  # held-out bench prompts (split "test") for the final alpha
    eval_tokens: int = 96


def stdlib_documents(tokenizer, positions: int, seed: int, length: int = 256) -> list[list[int]]:
    """Chunks of `length` tokens of standard-library source (code and docstrings), `positions` in all."""
    import sysconfig

    files = sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
    random.Random(seed + 1).shuffle(files)
    chunks: list[list[int]] = []
    for path in files:
        if "test" in path.parts or len(chunks) * length >= positions:
            continue
        try:
            ids = tokenizer.encode(path.read_text(encoding="utf-8"), chat=False)
        except (UnicodeDecodeError, OSError):
            continue
        chunks += [ids[i: i + length] for i in range(0, len(ids) - length // 2, length)]
    return chunks[: positions // length]


def score_text(target: Target, documents: list[list[int]], batch: int = 16) -> list[Answer]:
    teacher = BatchedTeacher(target.model)
    scored: list[Answer] = []
    for start in tqdm(range(0, len(documents), batch), desc="target scores text", unit="batch"):
        scored += teacher.score(documents[start: start + batch])
    return scored


def cached(path: Path | None, make):
    """make(), saved to / reused from `path` (the target's answers take most of train-draft's time)."""
    if path is not None and path.is_file():
        print(f"reusing the target's answers and scores cached in {path}")
        return torch.load(path, weights_only=False)
    value = make()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(value, path)
    return value


def collect_answers(target: Target, prompts: list[str], answer_tokens: int, batch: int, seed: int) -> list[Answer]:
    """The target's answers (at most answer_tokens each): half greedy, half sampled at temperature 1, in batches of
    `batch` prompts of similar length."""
    teacher = BatchedTeacher(target.model)
    encoded = [target.tokenizer.encode(p) for p in prompts]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    generator = torch.Generator().manual_seed(seed)
    answers: list[Answer] = []
    bar = tqdm(total=len(encoded), desc="target answers", unit="prompt")
    for n, start in enumerate(range(0, len(order), batch)):
        chunk = [encoded[i] for i in order[start: start + batch]]
        temperature = 0.0 if n % 2 == 0 else 1.0
        answers += teacher.answer(chunk, answer_tokens, temperature, target.tokenizer.stop_token_ids,
                                  generator)
        bar.update(len(chunk))
        bar.set_postfix(tokens=sum(len(a.tokens) for a in answers))
    bar.close()
    return answers


def evaluate(target: Target, draft_dir: Path, n_prompts: int, max_new_tokens: int, seed: int = 0) -> dict:
    """alpha at temperature 0 and 1 on held-out bench prompts, and the measured cost ratio c of the draft."""
    draft = load_draft(str(draft_dir), target)
    prompts = load_prompts("test")
    prompts = prompts[:: max(1, len(prompts) // n_prompts)][:n_prompts]
    result = {}
    for name, sampling in (("temperature_0", SamplingConfig(0)), ("temperature_1", SamplingConfig(1.0))):
        bar = tqdm(prompts, desc=f"held-out alpha ({name.replace('_', ' ')})", unit="prompt")
        runs = [generate(target.model, draft, target.tokenizer.encode(p.prompt), max_new_tokens=max_new_tokens,
                         gamma=4, sampling=sampling, seed=seed + i,
                         stop_token_ids=target.tokenizer.stop_token_ids).stats for i, p in enumerate(bar)]
        total = GenerationStats.total(runs)
        result[name] = {"alpha": total.alpha or 0.0, "prompts": len(prompts), "c": total.draft_cost}
    return result


def ngram_path(out: Path) -> Path:
    """Where train-draft writes the n-gram tables of the target's answers: beside the draft directory."""
    return out.with_name(out.name + "-ngram.safetensors")


def train_draft(target: Target, out: Path, budget: Budget, shape: DraftShape, seed: int = 0,
                progress: bool = True, data_cache: Path | None = None, command: str = "specdecode train-draft") -> dict:
    if target.engine != "native":
        raise ValueError("train-draft needs a target the native engine runs (a Llama-family checkpoint)")
    started = time.perf_counter()
    torch.manual_seed(seed)
    prompts = training_prompts(budget.prompts, seed)
    answers, scored = cached(data_cache, lambda: (
        collect_answers(target, prompts, budget.answer_tokens, budget.batch, seed),
        score_text(target, stdlib_documents(target.tokenizer, budget.text_positions, seed))))
    generated_at = time.perf_counter()
    examples = examples_from(answers, shape.max_positions)
    random.Random(seed).shuffle(examples)
    n_held = max(1, len(examples) // 20)  # held out: answers to training prompts never trained on
    held_out, train_set = examples[:n_held], examples[n_held:] + examples_from(scored, shape.max_positions)

    config = json.loads((target.source / "config.json").read_text())
    model = make_draft(config, target.model.embed.float(), shape, seed)
    vocabulary = output_vocabulary(train_set, config["vocab_size"])
    report = train(model, train_set, held_out, budget.train_seconds, seed=seed, progress=progress,
                   vocabulary=vocabulary)

    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.to(torch.bfloat16).save_pretrained(partial)
    target.tokenizer.hf.save_pretrained(partial)
    # The tokens the softmax was trained over: specdecode's native engine computes the draft's q over these only
    # (q = 0 elsewhere: still exact, and the output head costs a fraction). transformers ignores the file.
    save_file({"token_ids": vocabulary}, str(partial / OUTPUT_VOCABULARY))
    for extra in ("chat_template.jinja", "chat_template.json"):  # the draft never needs the chat template
        (partial / extra).unlink(missing_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    # The same answers as unigram / bigram tables: the model-free drafts of paper 3.6, for the same target.
    NgramTable.build([a.prompt + a.tokens for a in answers], config["vocab_size"],
                     target.tokenizer.fingerprint()).save(ngram_path(out))

    evaluation = evaluate(target, out, budget.eval_prompts, budget.eval_tokens, seed)
    summary = {
        "target": target.name, "seed": seed, "budget": asdict(budget), "shape": asdict(shape),
        "parameters": sum(p.numel() for p in model.parameters()),
        "training_prompts": len(prompts), "answer_tokens": sum(len(a.tokens) for a in answers),
        "scored_text_positions": sum(len(a.top_ids) for a in scored), "output_vocabulary": len(vocabulary),
        "train_positions": sum(len(e.top_ids) for e in train_set), "held_out_positions":
        sum(len(e.top_ids) for e in held_out), "generation_seconds": generated_at - started,
        "training": {k: v for k, v in report.items() if k != "loss_curve"}, "loss_curve": report["loss_curve"],
        "evaluation": evaluation, "total_seconds": time.perf_counter() - started,
    }
    (out / "training.json").write_text(json.dumps(summary, indent=1))
    (out / "README.md").write_text(model_card(summary, command))
    return summary


def model_card(summary: dict, command: str) -> str:
    """README.md of a trained draft, from its training.json."""
    s, b, t, e = summary["shape"], summary["budget"], summary["training"], summary["evaluation"]
    return f"""# A distilled draft for {summary['target']}

A {s['layers']}-layer Llama ({s['hidden']} wide, {s['heads']} attention heads, {s['kv_heads']} key/value heads, MLP
{s['intermediate']}, tied embeddings), {summary['parameters'] / 1e6:.1f}M parameters, stored in bf16 as a standard
transformers checkpoint with the target's tokenizer: it works as a draft in `specdecode` (the default draft of
`specdecode generate`) and as `assistant_model=` in transformers' `generate()`.

## How it was made

    {command}

- Data, all made offline by the target itself: {summary['training_prompts']} generated training prompts (templates
  over topics, tasks and arithmetic, and standard-library functions and docstrings to explain, comment, rename or
  summarise; none of them in the bench set) answered by the target, half greedily and half sampled at temperature 1
  ({summary['answer_tokens']} answer tokens, at most {b['answer_tokens']} per answer), plus
  {summary['scored_text_positions']} positions of standard-library source scored by the target.
- Labels: the target's 32 most likely next tokens and their probabilities at every position (prompt, answer, text).
- Loss: cross-entropy against those lists (KL(p || q) up to a constant), weight 1 on answer positions and 0.5 on
  prompt and text positions; the embedding starts from the target's own, projected onto its top principal
  directions. The softmax runs over the {summary['output_vocabulary']} tokens carrying the most of the target's
  probability (99.5% of it, or at most 12288 tokens), then over the full vocabulary for the last 15% of the time.
  `output_vocabulary.safetensors` lists those tokens: specdecode's native engine computes the draft's q over them
  only (q = 0 elsewhere, which the rule allows: the output stays exact), so its output head reads a fraction of the
  rows; transformers ignores the file.
- {t['steps']} AdamW steps in {t['seconds'] / 60:.0f} minutes; held-out loss (answers to training prompts never
  trained on) {t['held_out_before']:.2f} -> {t['held_out_after']:.2f}. Total time
  {summary['total_seconds'] / 60:.0f} minutes on a 2-core CPU, seed {summary['seed']}.

## Measured (held-out bench prompts of the "test" split, never trained on)

| sampling | alpha | c (draft pass / target pass) |
| --- | --- | --- |
| temperature 0 | {e['temperature_0']['alpha']:.2f} | {e['temperature_0']['c']:.3f} |
| temperature 1 | {e['temperature_1']['alpha']:.2f} | {e['temperature_1']['c']:.3f} |

{e['temperature_0']['prompts']} prompts, {b['eval_tokens']} new tokens each, gamma 4. End-to-end speed-ups are in
`docs/bench/report.md`.
"""
