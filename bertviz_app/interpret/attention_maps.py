"""Attention weights of every layer and head, and the usual summaries of them."""

from __future__ import annotations

import numpy as np
import torch

from ..models.encoding import encode
from ..models.registry import LoadedModel
from ..results import AttentionMaps

__all__ = ["attention", "mean_heads", "cls_rows", "rollout"]


def attention(lm: LoadedModel, text: str, pair: str | None = None) -> AttentionMaps:
    """Attention maps (layers, heads, T, T) over the real tokens of one input (no padding)."""
    inputs, info = encode(lm, text, pair)
    with lm.run_lock, torch.inference_mode():
        out = lm.model(**inputs, output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise RuntimeError("The model returned no attention maps; it must be loaded with attn_implementation='eager'.")
    weights = torch.stack([a[0] for a in out.attentions])  # (L, H, T, T)
    weights = weights.float().cpu().numpy()
    return AttentionMaps(info=info, weights=weights)


def mean_heads(maps: AttentionMaps | np.ndarray) -> np.ndarray:
    """Mean over heads: (L, H, T, T) -> (L, T, T). Rows still sum to 1."""
    w = np.asarray(getattr(maps, "weights", maps))  # AttentionMaps, MixingMaps or the (L, H, T, T) array
    return w.mean(axis=1)


def cls_rows(maps: AttentionMaps | np.ndarray, head: int | None = None) -> np.ndarray:
    """Where [CLS] looks in each layer: (L, T), for one head or the mean of heads."""
    w = np.asarray(getattr(maps, "weights", maps))  # AttentionMaps, MixingMaps or the (L, H, T, T) array
    rows = w[:, :, 0, :]  # (L, H, T)
    return rows.mean(axis=1) if head is None else rows[:, head, :]


def rollout(maps: AttentionMaps | np.ndarray, residual: bool = True) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): (L, T, T), entry l = attention flow from the
    input tokens to the outputs of layer l. With ``residual`` each layer's head-mean attention is
    mixed with the identity, A' = 0.5 A + 0.5 I, and re-normalised, to account for skip connections."""
    a = mean_heads(maps).astype(np.float64)  # (L, T, T)
    n_layers, t, _ = a.shape
    if residual:
        a = 0.5 * a + 0.5 * np.eye(t)[None]  # (L, T, T)
        a = a / a.sum(axis=-1, keepdims=True)
    out = np.empty_like(a)
    joint = np.eye(t)
    for layer in range(n_layers):
        joint = a[layer] @ joint  # (T, T)
        out[layer] = joint
    return out.astype(np.float32)
