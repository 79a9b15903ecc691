"""Architecture and parameter counts by component."""

from __future__ import annotations

import torch

from ..errors import InputError
from ..results import ModelSummary
from .families import family_of
from .heads import head_of
from .registry import LoadedModel

__all__ = ["summary", "count_components"]


def _n(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def count_components(model) -> list[tuple[str, int]]:
    """(component, parameters) in model order: embeddings, each layer's attention and
    feed-forward (LayerNorms included with the sub-block they close), then the head's rows (``Head.components``:
    a sequence classifier's BERT pooler and classifier, the parts other families name, see ``families.py``; a
    token classifier's linear layer). The rows add up to the model's total (shared parameters, as in ALBERT, are
    counted once)."""
    fam = family_of(model)
    if fam is None:
        raise InputError(f"No parameter summary for model_type {model.config.model_type!r}.")
    return head_of(model).components(fam, model)


def summary(lm: LoadedModel | torch.nn.Module, name: str | None = None) -> ModelSummary:
    """Works on a loaded model, or on a bare ``*ForSequenceClassification``, ``*ForTokenClassification`` or
    ``*ForQuestionAnswering`` of a supported family
    (e.g. built from a config on the meta device, to count bert-base without allocating it)."""
    if isinstance(lm, LoadedModel):
        model, device, dtype, max_len = lm.model, lm.device_label, str(lm.dtype).replace("torch.", ""), lm.max_length
        name = name or lm.name
    else:
        model = lm
        p = next(model.parameters())
        device, dtype = p.device.type, str(p.dtype).replace("torch.", "")
        max_len = model.config.max_position_embeddings
        name = name or "model"
    cfg = model.config
    labels = tuple(str(cfg.id2label[i]) for i in range(cfg.num_labels))
    keep = (
        "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "hidden_act", "max_position_embeddings", "vocab_size", "type_vocab_size", "hidden_dropout_prob",
        "attention_probs_dropout_prob", "problem_type", "id2label",
    )
    config = {k: getattr(cfg, k, None) for k in keep}
    config["id2label"] = {str(k): str(v) for k, v in cfg.id2label.items()}
    return ModelSummary(
        name=name,
        architecture=type(model).__name__,
        components=tuple(count_components(model)),
        encoder_params=_n(family_of(model).base(model)),
        classifier_params=_n(model) - _n(family_of(model).base(model)),  # the head outside the encoder
        total_params=_n(model),
        config=config,
        labels=labels,
        device=device,
        dtype=dtype,
        num_layers=cfg.num_hidden_layers,
        num_heads=cfg.num_attention_heads,
        hidden_size=cfg.hidden_size,
        max_length=max_len,
        head=head_of(model).name,
    )
