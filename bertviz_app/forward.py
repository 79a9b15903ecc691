"""The classifier's forward pass as a function of the shared model, with per-call options.

``BertForSequenceClassification`` reads its attention kernel from the shared config at every
forward, and computing the last layer for [CLS] alone needs a different last layer. Switching
either on the shared model per request would leak into whatever else runs on it at the same time
(an attention map needs eager attention and every layer's full output). Here the same modules are
composed by hand instead:

    embeddings -> encoder layers but the last (attention kernel of the call)
               -> last layer ([CLS] query only, or in full) -> pooler -> dropout -> classifier

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
from transformers.pytorch_utils import apply_chunking_to_forward

__all__ = ["ATTENTIONS", "classifier_logits", "logits_from_depth"]

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


def _supported(model) -> bool:
    """Encoder-only BERT classifiers; anything else (a decoder config, cross-attention) runs as is."""
    bert = getattr(model, "bert", None)
    cfg = getattr(model, "config", None)
    return (bert is not None and hasattr(bert, "encoder") and getattr(bert, "pooler", None) is not None
            and cfg is not None and not cfg.is_decoder and not getattr(cfg, "add_cross_attention", False))


def _layer(layer, hidden: torch.Tensor, mask, attend, cls_only: bool = False) -> torch.Tensor:
    """One ``BertLayer`` with the attention function ``attend``: hidden (B, T, D) -> (B, T, D),
    or (B, 1, D) for the [CLS] position alone when ``cls_only`` (keys and values still come from
    every token; the query, attention output and feed-forward block run for [CLS] only)."""
    sa = layer.attention.self
    b, t, _ = hidden.shape
    head = sa.attention_head_size
    x = hidden[:, :1] if cls_only else hidden  # (B, Q, D), Q = 1 or T
    q_len = x.shape[1]
    q = sa.query(x).view(b, q_len, -1, head).transpose(1, 2)  # (B, H, Q, d)
    k = sa.key(hidden).view(b, t, -1, head).transpose(1, 2)  # (B, H, T, d)
    v = sa.value(hidden).view(b, t, -1, head).transpose(1, 2)  # (B, H, T, d)
    if cls_only and mask is not None and mask.dim() == 4 and mask.shape[2] > 1:
        mask = mask[:, :, :1]  # (B, 1, 1, T): the [CLS] query's row
    out, _ = attend(sa, q, k, v, mask, dropout=sa.dropout.p if sa.training else 0.0, scaling=sa.scaling)  # (B, Q, H, d)
    out = layer.attention.output(out.reshape(b, q_len, -1).contiguous(), x)  # (B, Q, D)
    return apply_chunking_to_forward(layer.feed_forward_chunk, layer.chunk_size_feed_forward, layer.seq_len_dim, out)


def _check(attention: str) -> None:
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}, got {attention!r}")


def _mask(model, hidden: torch.Tensor, attention_mask, attention: str):
    """The 4-D mask (or None) transformers builds for ``attention`` from a (B, T) padding mask."""
    return create_bidirectional_mask(config=_AttentionView(model.config, attention), inputs_embeds=hidden,
                                     attention_mask=attention_mask)


def _head(model, hidden: torch.Tensor) -> torch.Tensor:
    pooled = model.bert.pooler(hidden)  # (B, D): tanh(W h_CLS + b)
    return model.classifier(model.dropout(pooled))  # (B, C)


def logits_from_depth(model, hidden: torch.Tensor, depth: int, attention_mask=None, *, attention: str = "eager",
                      cls_only: bool = True) -> torch.Tensor:
    """Logits (B, C) from the hidden states (B, T, D) after ``depth`` layers (0: the embeddings'
    output): the encoder layers above ``depth``, pooler, dropout and classifier."""
    _check(attention)
    layers = model.bert.encoder.layer
    if depth >= len(layers):
        return _head(model, hidden)
    mask = _mask(model, hidden, attention_mask, attention)
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(attention, eager_attention_forward)
    for layer in layers[depth:-1]:
        hidden = _layer(layer, hidden, mask, attend)  # (B, T, D)
    hidden = _layer(layers[-1], hidden, mask, attend, cls_only=cls_only)  # (B, 1 or T, D)
    return _head(model, hidden)


def classifier_logits(model, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None, *,
                      attention: str = "eager", cls_only: bool = True) -> torch.Tensor:
    """``model(...).logits`` (B, C) computed with the attention kernel ``attention`` and, with
    ``cls_only``, the last layer for [CLS] alone (about 14% fewer FLOPs on a 6-layer model; the
    logits and their gradients are the same). The shared model is read, never changed."""
    _check(attention)
    if not _supported(model):
        return model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                     inputs_embeds=inputs_embeds).logits  # (B, C)
    hidden = model.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids,
                                   inputs_embeds=inputs_embeds)  # (B, T, D)
    return logits_from_depth(model, hidden, 0, attention_mask, attention=attention, cls_only=cls_only)
