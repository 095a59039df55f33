"""bench/accuracy.py: agreement of next-token distributions between readings of a model, on the toy bigram pair,
whose every distribution is a row of a table, so the expected figures are computed from the tables directly."""

import pytest
import torch

from specdecode.bench.accuracy import agreement, agreements
from specdecode.toy import bigram_pair

TEXTS = [[0, 3, 5, 1, 1, 7], [2, 2, 6, 4], [7, 0]]


def expected(ours: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """(top-1 agreement, mean KL(reference || ours)) over every text's tokens after its first, from the tables."""
    rows = torch.tensor([t for text in TEXTS for t in text[1:]])
    p, q = reference[rows], ours[rows]
    kl = (p * (p.log() - q.log())).sum(-1)
    return (p.argmax(-1) == q.argmax(-1)).double().mean().item(), kl.mean().item()


def test_each_pair_is_compared_from_one_pass_of_each_model():
    target, draft = bigram_pair(seed=3)
    _, other = bigram_pair(seed=4)
    results = agreements({"target": target, "draft": draft, "other": other},
                         [("draft", "target"), ("other", "target"), ("target", "target")], TEXTS, progress=False)
    assert set(results) == {("draft", "target"), ("other", "target"), ("target", "target")}
    for name, model in (("draft", draft), ("other", other)):
        top1, kl = expected(model.table, target.table)
        got = results[(name, "target")]
        assert got["positions"] == 9 and got["texts"] == 3
        assert got["top1_agreement"] == pytest.approx(top1) and got["mean_kl"] == pytest.approx(kl, rel=1e-5)
        assert kl > 0
    assert results[("target", "target")]["top1_agreement"] == 1.0
    assert results[("target", "target")]["mean_kl"] == pytest.approx(0.0, abs=1e-12)


def test_one_pair_is_the_same_figure():
    target, draft = bigram_pair(seed=3)
    both = agreements({"target": target, "draft": draft}, [("draft", "target")], TEXTS, progress=False)
    assert agreement(draft, target, TEXTS, progress=False) == both[("draft", "target")]
