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

Three heads are registered: sequence classification (one class per text), token classification (one label per
word-piece; ``tagging.py`` merges them into words and entities) and extractive question answering (a start and an end
logit per word-piece; ``answering.py`` decodes them into answer spans of the context). ``registry.load_model`` opens a
checkpoint with the head its config's ``architectures`` name.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .families import Family

__all__ = ["Head", "HEADS", "SEQUENCE_CLASSIFICATION", "SequenceClassification", "TOKEN_CLASSIFICATION",
           "TokenClassification", "QUESTION_ANSWERING", "QuestionAnswering", "head_of", "head_for", "parameters"]


def parameters(module: torch.nn.Module | None) -> int:
    """How many parameters ``module`` holds (0 for None)."""
    return 0 if module is None else sum(p.numel() for p in module.parameters())


@dataclass(frozen=True)
class Head:
    """One head's answers (see the module's docstring); subclasses compute its logits and decode them."""

    name: str  # what messages call it
    suffix: str  # the transformers class suffix: Bert + suffix
    reads: str  # "first" (position 0), "every" (each token) or "span" (start/end over a context)
    target: str  # what an attribution explains, in words
    metric: str  # what judges it, in words
    training_file: str  # what trains it, in words
    doors: str = ""  # where a model with this head is used, in words (what a refusal tells the user to use)

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

    def composable(self, family: Family, model) -> bool:
        """Can the forward pass be composed from ``model``'s modules for this head (``forward.py``)? Else the
        model's own forward runs."""
        return family.composable(model)

    def components(self, family: Family, model) -> list[tuple[str, int]]:
        """(component, parameters) in model order, the head's own rows last; they add up to the model's total."""
        return family.components(model)


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
    training_file="a CSV or JSONL table: a text column, a label column and an optional second text column",
    doors="predict, explain and the page's classifier tabs (bertviz-app predict, POST /v1/predict)")


class PoolerlessHead(Head):
    """A head over every position's last hidden state, with no pooler (token classification, question answering)."""

    def composable(self, family, model):
        """The family's check of its encoder. BERT's and ALBERT's checks also ask for the pooler their sequence
        head reads, which a head over every position has not (``add_pooling_layer=False``): for the families whose
        layers are composed here (``kernels``) the base check is the encoder's."""
        return Family.composable(family, model) if family.kernels else family.composable(model)


class TokenClassification(PoolerlessHead):
    """One answer per word-piece: label logits at every position, dropout -> ``classifier`` (a linear layer) over
    the last hidden states, the same in each of the seven families' ``*ForTokenClassification`` (no pooler, no
    dense layer before it)."""

    @property
    def auto_class(self):
        return AutoModelForTokenClassification

    def logits(self, family, model, hidden):
        return model.classifier(model.dropout(hidden))  # (B, T, C)

    def decode(self, logits, multi_label=False, temperature=1.0):
        """Softmax over the labels at each position (B, T, C), the logits divided by ``temperature`` first (a
        tagger run's calibration.json: it rescales the scores, never the labels)."""
        logits = logits.float()
        return torch.softmax(logits / temperature if temperature != 1.0 else logits, dim=-1)

    def parameter_prefixes(self, family):
        return ("classifier.",)

    def components(self, family, model):
        """The encoder's rows (embeddings, each layer; a layer shared by several calls says how many: ALBERT), what
        else the encoder holds (DeBERTa's relative position embeddings and convolution), then the classifier."""
        return _encoder_rows(family, model, "token classifier", model.classifier)


def _encoder_rows(family, model, head_name: str, head_module) -> list[tuple[str, int]]:
    """A model without a pooler (a head over every position): the encoder's rows, then ``head_name``'s, then what
    is left ("other")."""
    rows = [("embeddings", family.embedding_params(model))]
    unique = family.unique_layers(model)
    uses = len(family.layers(model)) // max(1, len(unique))
    for i, layer in enumerate(unique, start=1):
        rows += [(f"{name} (used {uses}x)" if uses > 1 else name, n) for name, n in family.layer_rows(i, layer)]
    rest = parameters(family.base(model)) - sum(n for _, n in rows)
    if rest:
        rows.append(("other encoder parts", rest))
    rows.append((head_name, parameters(head_module)))
    other = parameters(model) - sum(n for _, n in rows)
    return rows + ([("other", other)] if other else [])


TOKEN_CLASSIFICATION = TokenClassification(
    name="token classification", suffix="ForTokenClassification", reads="every",
    target="a label's probability at an entity's word-pieces",
    metric="entity-level precision, recall and F1 (seqeval), and per-token accuracy",
    training_file="a CoNLL-style file: one word and its BIO/IOB2 (or IO) tag per line, a blank line between sentences",
    doors="tag (bertviz-app tag, POST /v1/tag, bertviz_app.tag)")


class QuestionAnswering(PoolerlessHead):
    """Extractive question answering: a start and an end logit at every position, ``qa_outputs`` (a linear layer to
    2) over the last hidden states, the same in each of the seven families' ``*ForQuestionAnswering`` (DistilBERT's
    dropout before it is the identity at inference; no pooler). The answer is a span of the context, scored
    p(start) x p(end) over the context's positions (``answering.py``)."""

    @property
    def auto_class(self):
        return AutoModelForQuestionAnswering

    def logits(self, family, model, hidden):
        if getattr(model, "dropout", None) is not None:  # DistilBERT's (identity in eval mode)
            hidden = model.dropout(hidden)
        return model.qa_outputs(hidden)  # (B, T, 2): start, end

    def decode(self, logits, multi_label=False, temperature=1.0):
        """(B, T, 2) logits -> the softmax over positions of the start and of the end logits, unmasked (B, T, 2);
        ``answering.py`` masks the question and the special tokens before its own softmax."""
        return torch.softmax(logits.float(), dim=1)

    def parameter_prefixes(self, family):
        return ("qa_outputs.",)

    def components(self, family, model):
        return _encoder_rows(family, model, "span head (qa_outputs)", model.qa_outputs)


QUESTION_ANSWERING = QuestionAnswering(
    name="question answering", suffix="ForQuestionAnswering", reads="span",
    target="an answer span's log p(start) + log p(end) (its start's and end's, or p(start) x p(end))",
    metric="SQuAD exact match and F1 (the best of the gold answers)",
    training_file="a SQuAD-style JSON file: contexts, their questions and answers with character starts",
    doors="answer (bertviz-app answer, POST /v1/answer, bertviz_app.answer), and explain_answer for why (bertviz-app "
          "explain --question Q --context C)")

HEADS: tuple[Head, ...] = (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION, QUESTION_ANSWERING)


def head_of(model) -> Head:
    """The head of a loaded model: the one whose class it was loaded as (``registry.load_model`` loads a checkpoint
    with the head its config names, ``head_for``); a class of no known head reads as a sequence classifier."""
    name = type(model).__name__
    for head in HEADS:
        if name.endswith(head.suffix):
            return head
    return SEQUENCE_CLASSIFICATION


def head_for(architectures) -> Head | None:
    """The head a checkpoint whose config lists ``architectures`` was saved with; None: none of ours (a bare
    encoder, a masked-LM checkpoint: it loads as a sequence classifier with a fresh head)."""
    for head in HEADS:
        if head.trained(architectures):
            return head
    return None
