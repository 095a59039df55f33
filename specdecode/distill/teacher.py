"""The target answers a batch of prompts at once, recording its top-k next-token log-probabilities at every step.

A batched forward over `NativeLlama`'s weights (the engine's own path is single-sequence): prompts are left-padded so
that every sequence writes the same cache slot at each step; rotary positions count from each sequence's first real
token, and padding slots are masked out of attention. Used only to make training data, never for decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..models.llama import Segment, rmsnorm, run_layers
from ..models.native import NativeLlama
from ..sampling import sample


@dataclass
class Answer:
    prompt: list[int]
    tokens: list[int]  # the target's answer (ends with a stop token unless cut at max_new_tokens)
    # The target's k most likely next tokens (int32) and their log-probabilities at temperature 1 (float16) at every
    # position of prompt + answer that predicts a token of it: [len(prompt) - 1 + len(tokens), k].
    top_ids: torch.Tensor
    top_logprobs: torch.Tensor


class BatchedTeacher:
    def __init__(self, model: NativeLlama):
        self.m = model
        self.s = model.shape

    @torch.inference_mode()
    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, start: int,
                 k_cache: torch.Tensor, v_cache: torch.Tensor, capture: tuple[int, ...] = ()):
        """ids, positions [B, T]; mask [B, 1, T, S] additive; writes cache slots start..start+T of k_cache, v_cache
        [layers, B, KV, S, hd] -> final hidden states [B, T, D] (normalised, ready for the output head). The same
        layers as the engine's pass (models/llama.py), over a batch. With `capture` (layer numbers, as the engine's
        feature_layers), also the residual stream entering those layers: -> (hidden, features [B, T, F])."""
        m, T = self.m, ids.shape[1]
        x = m.embed[ids]  # [B, T, D]
        cos, sin = m.cos[positions], m.sin[positions]  # [B, T, hd]
        x, features = run_layers(m.layers, x, lambda i, layer, x: layer(
            x, self.s, cos, sin, [Segment(0, T, k_cache[i], v_cache[i], start, T, start + T, mask)]), capture)
        hidden = rmsnorm(x, m.norm, self.s.rms_eps)
        return (hidden, features) if capture else hidden

    def _top(self, hidden: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """hidden [N, D] -> (logits [N, V] float32, top ids [N, k] int32, top log-probs [N, k] float16)."""
        logits = self.m.head(hidden).float()
        top = torch.log_softmax(logits, dim=-1).topk(k, dim=-1)
        return logits, top.indices.to(torch.int32), top.values.to(torch.float16)

    @torch.inference_mode()
    def prefill(self, ids: torch.Tensor, capture: tuple[int, ...] = ()):
        """One causal pass over ids [B, T] (right-padded: padding only ever follows real tokens) -> what `_forward`
        returns."""
        B, T = ids.shape
        s = self.s
        shape = (s.layers, B, s.kv_heads, T, s.head_dim)
        k_cache, v_cache = torch.zeros(shape, dtype=self.m.dtype), torch.zeros(shape, dtype=self.m.dtype)
        causal = torch.zeros(T, T, dtype=self.m.dtype).masked_fill_(torch.ones(T, T, dtype=torch.bool).triu(1),
                                                                     -torch.inf)
        return self._forward(ids, torch.arange(T).expand(B, T), causal.expand(B, 1, T, T), 0, k_cache, v_cache,
                             capture)

    @torch.inference_mode()
    def score(self, documents: list[list[int]], top_k: int = 32) -> list[Answer]:
        """Teacher forcing on existing text: the target's top-k lists at every position of each document (as
        Answers with an empty answer). Several times more positions per second than generating."""
        B, T = len(documents), max(len(d) for d in documents)
        ids = torch.zeros(B, T, dtype=torch.int64)
        for row, doc in enumerate(documents):
            ids[row, : len(doc)] = torch.tensor(doc)  # right-padded: padding only ever follows real tokens
        hidden = self.prefill(ids)
        out = []
        for row, doc in enumerate(documents):
            _, top_ids, top_lp = self._top(hidden[row, : len(doc) - 1], top_k)
            out.append(Answer(doc, [], top_ids, top_lp))
        return out

    def answer(self, prompts: list[list[int]], max_new_tokens: int, temperature: float, stop_ids: list[int],
               generator: torch.Generator, top_k: int = 32) -> list[Answer]:
        """Sample (temperature > 0) or greedily decode (temperature 0) an answer to each prompt."""
        B, P = len(prompts), max(len(p) for p in prompts)
        slots = P + max_new_tokens
        pad = torch.tensor([P - len(p) for p in prompts])  # left padding of each sequence
        ids = torch.zeros(B, P, dtype=torch.int64)
        for row, prompt in enumerate(prompts):
            ids[row, P - len(prompt):] = torch.tensor(prompt)
        slot = torch.arange(slots)
        real = slot[None, :] >= pad[:, None]  # [B, slots]: which slots hold real tokens
        s = self.s
        shape = (s.layers, B, s.kv_heads, slots, s.head_dim)
        k_cache, v_cache = torch.zeros(shape, dtype=self.m.dtype), torch.zeros(shape, dtype=self.m.dtype)

        def mask_for(start: int, length: int) -> torch.Tensor:  # [B, 1, length, start+length]
            q_slots = torch.arange(start, start + length)
            allowed = (slot[None, : start + length] <= q_slots[:, None])[None] & real[:, None, : start + length]
            return torch.zeros(allowed.shape, dtype=self.m.dtype).masked_fill_(~allowed, -torch.inf)[:, None]

        positions = (slot[None, :P] - pad[:, None]).clamp(min=0)
        hidden = self._forward(ids, positions, mask_for(0, P), 0, k_cache, v_cache)  # [B, P, D]
        # The prompt positions' lists come almost free: the prefill has already run them through every layer.
        prompt_ids, prompt_lp = [], []
        for row, prompt in enumerate(prompts):
            _, top_ids, top_lp = self._top(hidden[row, P - len(prompt): P - 1], top_k)
            prompt_ids.append(top_ids)
            prompt_lp.append(top_lp)
        logits, top_ids, top_lp = self._top(hidden[:, -1], top_k)
        stops = torch.tensor(stop_ids)
        done = torch.zeros(B, dtype=torch.bool)
        out_tokens, out_ids, out_lp = [], [], []
        for step in range(max_new_tokens):
            if temperature == 0:
                token = logits.argmax(dim=-1)
            else:
                token = sample(torch.softmax(logits / temperature, dim=-1), generator)
            out_tokens.append(token)
            out_ids.append(top_ids)
            out_lp.append(top_lp)
            done = done | torch.isin(token, stops)
            if bool(done.all()) or step == max_new_tokens - 1:
                break
            start = P + step
            hidden = self._forward(token[:, None], (start - pad)[:, None], mask_for(start, 1), start, k_cache,
                                   v_cache)
            logits, top_ids, top_lp = self._top(hidden[:, -1], top_k)
        tokens = torch.stack(out_tokens, dim=1)  # [B, steps]
        answer_ids, answer_lp = torch.stack(out_ids, dim=1), torch.stack(out_lp, dim=1)  # [B, steps, k]
        answers = []
        for row, prompt in enumerate(prompts):
            seq = tokens[row].tolist()
            n = next((i + 1 for i, t in enumerate(seq) if t in stop_ids), len(seq))
            answers.append(Answer(prompt, seq[:n], torch.cat([prompt_ids[row], answer_ids[row, :n]]),
                                  torch.cat([prompt_lp[row], answer_lp[row, :n]])))
        return answers
