"""The classifier's forward pass as a function of the shared model, with per-call options.

A ``*ForSequenceClassification`` model reads its attention kernel from the shared config at every
forward, and computing the last layer for [CLS] alone needs a different last layer. Switching
either on the shared model per request would leak into whatever else runs on it at the same time
(an attention map needs eager attention and every layer's full output). Here the same modules are
composed by hand instead:

    embeddings -> encoder layers but the last (attention kernel of the call)
               -> last layer ([CLS] query only, or in full) -> head (BERT: pooler -> dropout -> classifier)

Where the modules are and what the head is differs by family: ``families.py`` has one adapter
each (BERT, DistilBERT, RoBERTa, XLM-RoBERTa, ALBERT, ELECTRA, DeBERTa-v2).

Nothing of the shared model (modules, config) is changed, so calls with different options can run
at the same time on one model, and the logits equal ``model(**inputs).logits`` (tests check it to
1e-6, with padding, for both kernels). The attention masks come from transformers' own
``create_bidirectional_mask`` for the chosen kernel, so padding is handled exactly as in the model.
"""

from __future__ import annotations

import torch
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import eager_attention_forward

from .families import family_of
from .heads import head_of

__all__ = ["ATTENTIONS", "classifier_logits", "hidden_at_depth", "logits_from_depth"]

# Attention kernels a call may ask for. Models load eager (the only kernel that returns attention
# maps); predictions and gradients need no maps, and SDPA is faster on long inputs.
ATTENTIONS = ("eager", "sdpa")


class _AttentionView:
    """The shared config seen with another attention kernel (read-only; the config is untouched)."""

    def __init__(self, config, attention: str):
        self._config = config
        self._attn_implementation = attention

    def __getattr__(self, name):
        return getattr(self._config, name)


def _family(model):
    """The model's family adapter where its forward can be composed for its head (``Head.composable``); None:
    run the model as is (an unknown model type, a decoder config, cross-attention)."""
    fam = family_of(model)
    return fam if fam is not None and head_of(model).composable(fam, model) else None


def _check(attention: str) -> None:
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}, got {attention!r}")


def _mask(model, hidden: torch.Tensor, attention_mask, attention: str):
    """The 4-D mask (or None) transformers builds for ``attention`` from a (B, T) padding mask."""
    return create_bidirectional_mask(config=_AttentionView(model.config, attention), inputs_embeds=hidden,
                                     attention_mask=attention_mask)


def logits_from_depth(model, hidden: torch.Tensor, depth: int, attention_mask=None, *, attention: str = "eager",
                      cls_only: bool = True) -> torch.Tensor:
    """The head's logits (sequence classification: (B, C)) from the hidden states (B, T, D) after ``depth``
    layers (0: the embeddings' output, ``hidden_states[0]``): the encoder layers above ``depth``, then the
    model's head (``heads.py``) through the family's modules. ``cls_only`` runs the last layer for the first
    position alone, where the head reads no other."""
    _check(attention)
    fam, head = family_of(model), head_of(model)
    cls_only = cls_only and head.reads == "first"
    layers = fam.layers(model)
    if depth >= len(layers):
        return head.logits(fam, model, hidden)
    if not fam.kernels:  # its own attention (DeBERTa): every layer in full, the loaded kernel
        return head.logits(fam, model, fam.run(model, hidden, depth, attention_mask))
    mask = _mask(model, hidden, attention_mask, attention)
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(attention, eager_attention_forward)
    for layer in layers[depth:-1]:
        hidden = fam.layer(layer, hidden, mask, attend)  # (B, T, D)
    if cls_only and mask is not None and mask.dim() == 4 and mask.shape[2] > 1:
        mask = mask[:, :, :1]  # (B, 1, 1, T): the [CLS] query's row
    hidden = fam.layer(layers[-1], hidden, mask, attend, cls_only=cls_only)  # (B, 1 or T, D)
    return head.logits(fam, model, hidden)  # (B, C)


def hidden_at_depth(model, input_ids, attention_mask=None, token_type_ids=None, *, depth: int,
                    attention: str = "sdpa") -> torch.Tensor:
    """``hidden_states[depth]`` (B, T, D) of the model's own forward (0: the embeddings' output), through the
    embeddings and the bottom ``depth`` layers alone: what ``logits_from_depth`` continues from. The model's
    training mode applies (dropout), so call it in eval mode for features."""
    _check(attention)
    fam = family_of(model)
    hidden = fam.embed(model, input_ids=input_ids, token_type_ids=token_type_ids if fam.token_types else None,
                       attention_mask=attention_mask)  # (B, T, D)
    if depth == 0:
        return hidden
    if not fam.kernels:  # its own attention (DeBERTa): the encoder's loop, stopped at ``depth``
        return fam.run(model, hidden, 0, attention_mask, stop=depth)
    mask = _mask(model, hidden, attention_mask, attention)
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(attention, eager_attention_forward)
    for layer in fam.layers(model)[:depth]:
        hidden = fam.layer(layer, hidden, mask, attend)  # (B, T, D)
    return hidden


def classifier_logits(model, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None, *,
                      attention: str = "eager", cls_only: bool = True) -> torch.Tensor:
    """``model(...).logits`` (B, C; a token classifier's (B, T, C)) computed with the attention kernel
    ``attention`` and, with ``cls_only``, the last layer for [CLS] alone where the head reads no other position
    (about 14% fewer FLOPs on a 6-layer model; the logits and their gradients are the same). The shared model
    is read, never changed. ``token_type_ids`` are dropped for families that take none (DistilBERT)."""
    _check(attention)
    fam = _family(model)
    if fam is None:
        kw = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                  inputs_embeds=inputs_embeds)
        known = family_of(model)
        return model(**(known.inputs(**kw) if known is not None else kw)).logits  # (B, C)
    hidden = fam.embed(model, input_ids=input_ids, token_type_ids=token_type_ids if fam.token_types else None,
                       inputs_embeds=inputs_embeds, attention_mask=attention_mask)  # (B, T, D)
    return logits_from_depth(model, hidden, 0, attention_mask, attention=attention, cls_only=cls_only)
