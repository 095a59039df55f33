"""Causal language models behind one protocol (`CausalLM`): toy tables, transformers, the native Llama path."""

from .base import CausalLM

__all__ = ["CausalLM"]
