"""Making a draft model for a target by distillation: prompts, the target's own answers, training, evaluation."""
