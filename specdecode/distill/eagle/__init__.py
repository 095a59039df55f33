"""`specdecode train-draft --kind eagle`: train the feature-level head (models/eagle.py) on the target's own passes.

    data.py     the documents (the target's answers, standard-library source), the draft vocabulary, batches
    teacher.py  the target's batched pass over each document, once: features and top-K labels (cached)
    loss.py     the rollout loss, through the head's own forward (EagleHead.step)
    loop.py     the head's initial parameters and the training loop
    card.py     the model card written beside the head

Data: documents of the target's own answers to generated training prompts (half greedy, half sampled at temperature
1) and chunks of standard-library source. The target's batched prefill (distill/teacher.py) scores each document
once, keeping the residual stream entering the head's feature layers and the target's next-token distribution at
every position; the head learns to match that distribution one position further on, over a rollout (loss.py).
"""

from .data import EagleBudget, collect_documents
from .loop import initial_tensors, train_eagle

__all__ = ["EagleBudget", "collect_documents", "initial_tensors", "train_eagle"]
