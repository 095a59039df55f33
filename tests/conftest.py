"""Shared helpers for the statistical tests."""

from __future__ import annotations

import numpy as np
from scipy import stats


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "same_on_every_cpu: checks nothing the CPU path changes (Python-side packing, the CLI, draft "
        "bookkeeping, torch's own model code): the forced-AVX2 rerun in tests/test_cpu_paths.py leaves it out")


# Every statistical test runs at a fixed seed and fails when its p-value falls below this level.
SIGNIFICANCE = 1e-3


def chi_square_pvalue(observed: np.ndarray, expected_probs: np.ndarray, min_expected: float = 5.0) -> float:
    """Pearson chi-square goodness of fit; cells with expected count < min_expected are pooled into one.

    A cell with expected probability 0 that was observed makes the p-value 0 (an impossible outcome happened).
    """
    observed = np.asarray(observed, dtype=np.float64).ravel()
    expected = np.asarray(expected_probs, dtype=np.float64).ravel() * observed.sum()
    if np.any((expected == 0) & (observed > 0)):
        return 0.0
    small = expected < min_expected
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    if len(obs) < 2:
        return 1.0
    exp = exp * obs.sum() / exp.sum()  # remove float drift so the totals agree exactly
    return float(stats.chisquare(obs, exp).pvalue)


# --- the real default model (SmolLM2-135M-Instruct), loaded once per session ---------------------------------------

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smollm2_fp32():
    """The default target on the transformers engine in float32 (its logits barely move with the pass size)."""
    from specdecode.load import load_target

    return load_target(dtype="float32", engine="transformers")


@pytest.fixture(scope="session")
def smollm2():
    """The default target as users get it: the engine and weight format `auto` picks on this CPU (llama.cpp where it
    is built; every engine path is batch invariant, so greedy identity is bitwise)."""
    from specdecode.load import load_target

    return load_target()


@pytest.fixture(scope="session")
def smollm2_native():
    """The default target on the native engine, in the weight format this CPU runs best (bf16 or int8)."""
    from specdecode.load import load_target

    return load_target(engine="native")


@pytest.fixture(scope="session")
def python_corpus(tmp_path_factory):
    """A text corpus every machine has: the first modules of the Python standard library."""
    import sysconfig
    from pathlib import Path

    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:25]
    path = tmp_path_factory.mktemp("corpus") / "stdlib.txt"
    path.write_text("\n\n".join(f.read_text(encoding="utf-8", errors="ignore") for f in files), encoding="utf-8")
    return path
