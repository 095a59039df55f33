"""The model card (README.md) written beside a trained EAGLE-3 head, from its training.json summary."""

from __future__ import annotations


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
