"""specdecode: exact speculative decoding (Leviathan, Kalman & Matias, ICML 2023).

    from specdecode import generate, generate_plain, SamplingConfig
    from specdecode.toy import bigram_pair

    target, draft = bigram_pair(seed=0)
    result = generate(target, draft, [0], max_new_tokens=20, gamma=5, sampling=SamplingConfig(0.7), seed=1)
    result.new_tokens, result.stats.alpha, result.stats.tokens_per_target_call

Layers, one module each: sampling (logits -> p or q), rule (verify), engine (the loop), models (the CausalLM
protocol and its adapters), drafts (the Draft protocol and its guessers), analysis (the paper's formulas).
"""

from .cpu import force_path

force_path()  # SPECDECODE_CPU must reach torch's and oneDNN's variables before torch runs its first kernel

from .analysis import alpha_from_stats, best_gamma, beta, expected_tokens, extra_arithmetic, speedup
from .drafts import Draft, ModelDraft, Proposal
from .engine import Generation, GenerationResult, GenerationStats, Round, generate, generate_plain
from .models import CausalLM
from .rule import output_distribution, residual, verify, verify_greedy
from .sampling import GREEDY, SamplingConfig, adjust, sample
from .tokenizer import Tokenizer

__version__ = "0.1.0"

__all__ = [
    "GREEDY", "CausalLM", "Draft", "Generation", "GenerationResult", "GenerationStats", "ModelDraft", "Proposal",
    "Round", "SamplingConfig", "Tokenizer", "adjust", "alpha_from_stats", "best_gamma", "beta", "expected_tokens",
    "extra_arithmetic", "generate", "generate_plain", "output_distribution", "residual", "sample", "speedup", "verify",
    "verify_greedy",
]
