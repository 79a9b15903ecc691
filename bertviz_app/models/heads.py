"""What a model answers: one small adapter per head, beside the per-family adapters.

A family (``families.py``) says where an encoder's parts are and how its layers run; a head says what the model
answers from the last hidden states. A model is one family x one head, so the two are two small tables,
``FAMILIES`` and ``HEADS``, not a product of branches: the forward pass, the predictions, the attributions
and the training read the head from here and never ask which task a model has. A head answers:

- which transformers class a family loads as for it: the family's class prefix + the head's suffix
  (``Bert`` + ``ForSequenceClassification``), and which checkpoints already carry it (``trained``);
- which positions it reads (``reads``): the first ([CLS], so the last layer may run for that query alone),
  every token, or start and end over a context;
- its logits from the last hidden states (``logits``), through the family's own modules where families differ
  (a sequence classifier: BERT's pooler, RoBERTa's dense + out_proj, DistilBERT's pre_classifier + ReLU);
- how logits decode into what ``predict`` reports (``decode``), and which scalar an attribution explains
  (``target``);
- which parameters are the head's (``parameter_prefixes``: training gives them their own learning rate);
- which metric judges it and which file trains it (``metric``, ``training_file``: what the docs and pages say).

Sequence classification is the head every model has today; token classification and question answering
(issues 32 and 33) are each one more adapter here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import AutoModelForSequenceClassification

from .families import Family

__all__ = ["Head", "HEADS", "SEQUENCE_CLASSIFICATION", "SequenceClassification", "head_of"]


@dataclass(frozen=True)
class Head:
    """One head's answers (see the module's docstring); subclasses compute its logits and decode them."""

    name: str  # what messages call it
    suffix: str  # the transformers class suffix: Bert + suffix
    reads: str  # "first" (position 0), "every" (each token) or "span" (start/end over a context)
    target: str  # what an attribution explains, in words
    metric: str  # what judges it, in words
    training_file: str  # what trains it, in words

    def class_name(self, family: Family) -> str:
        """The transformers class that ``family`` loads as with this head."""
        return family.class_prefix + self.suffix

    def trained(self, architectures) -> bool:
        """Does a checkpoint whose config lists ``architectures`` already carry this head (else a fresh one
        is added when it loads)?"""
        return any(str(a).endswith(self.suffix) for a in architectures or ())

    @property
    def auto_class(self):
        """The transformers Auto class that loads a checkpoint with this head."""
        raise NotImplementedError

    def logits(self, family: Family, model, hidden: torch.Tensor) -> torch.Tensor:
        """The head's logits from the last hidden states (B, T, D) (or (B, 1, D) where it reads the first)."""
        raise NotImplementedError

    def decode(self, logits: torch.Tensor, multi_label: bool = False, temperature: float = 1.0) -> torch.Tensor:
        """What ``predict`` reports from the logits, in float32."""
        raise NotImplementedError

    def parameter_prefixes(self, family: Family) -> tuple[str, ...]:
        """Names of the head's parameters (their prefixes) in a model of ``family``."""
        raise NotImplementedError


class SequenceClassification(Head):
    """One answer per text (or pair): class logits from the first position, through the family's head."""

    @property
    def auto_class(self):
        return AutoModelForSequenceClassification

    def logits(self, family, model, hidden):
        return family.head(model, hidden)  # (B, C): reads hidden[:, 0]

    def decode(self, logits, multi_label=False, temperature=1.0):
        """Softmax over the classes (the logits divided by ``temperature`` first), or a sigmoid per class for a
        multi-label model (whose probabilities are not rescaled)."""
        logits = logits.float()  # (B, C)
        if multi_label:
            return torch.sigmoid(logits)
        return torch.softmax(logits / temperature if temperature != 1.0 else logits, dim=-1)

    def parameter_prefixes(self, family):
        return family.head_prefixes


SEQUENCE_CLASSIFICATION = SequenceClassification(
    name="sequence classification", suffix="ForSequenceClassification", reads="first",
    target="a class's probability (or logit)", metric="accuracy and macro-F1 (with per-class F1 and calibration)",
    training_file="a CSV or JSONL table: a text column, a label column and an optional second text column")

HEADS: tuple[Head, ...] = (SEQUENCE_CLASSIFICATION,)


def head_of(model) -> Head:
    """The head of a loaded model: the one whose class it was loaded as (a model loaded by this tool is a
    sequence classifier: ``registry.load_model`` loads every checkpoint so)."""
    name = type(model).__name__
    for head in HEADS:
        if name.endswith(head.suffix):
            return head
    return SEQUENCE_CLASSIFICATION
