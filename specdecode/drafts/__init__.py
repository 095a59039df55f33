"""Drafts: every guesser behind one protocol (`Draft.propose`)."""

from .base import Draft, Proposal
from .model import ModelDraft

__all__ = ["Draft", "ModelDraft", "Proposal"]
