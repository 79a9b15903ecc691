"""Context-mixing measures: how much each input token contributes to each token's representation,
layer by layer, beside raw attention weights.

Raw attention says where a head looks, not what it takes: value vectors differ in size, and the
residual path and LayerNorm mix in the token itself. The measures here:

- ``raw``: the attention weights alpha_ij (per head; heads combined by their mean), aggregated by
  rollout with the residual as 0.5 I (Abnar & Zuidema 2020).
- ``norm``: attention-norm ||alpha_ij f(x_j)|| (Kobayashi et al., EMNLP 2020), f(x) = the head's value
  vector through its slice of the output projection; per head, and ||sum_h alpha^h_ij f^h(x_j)|| for the
  layer (rows normalised to sum to 1 for the combined and aggregated views).
- ``value_zeroing``: (Mohebbi et al., EACL 2023) token j's value vector zeroed in layer l, the cosine
  distance of every token's layer output from the original, rows normalised to sum to 1.
- ``alti``: (Ferrando et al., EMNLP 2022) each layer's attention-block output decomposed exactly into
  per-input-token pieces through attention, residual and LayerNorm; contributions from L1 distances.

Every measure gives, for one input: ``weights`` (L, H, T, T) per head (H = 1 where the measure is per
layer), ``combined`` (L, T, T) per layer, ``aggregated`` (L, T, T) across layers (rollout-style: the
product of the per-layer matrices up to l), and the [CLS] row of the last aggregated layer as a token
ranking (``cls_scores``).

Interface fixed first (stub); the measures are filled in by the implementation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .results import TokenInfo

__all__ = ["MEASURES", "MEASURE_NOTES", "MixingMaps", "context_mixing", "check_measure", "supported_measures"]

MEASURES = ("raw", "norm", "value_zeroing", "alti")

# One line each: what the measure is and why it differs from raw attention (the page shows it).
MEASURE_NOTES = {
    "raw": "Raw attention weights: where each head looks, not how much it takes from there.",
    "norm": "Attention-norm (Kobayashi et al. 2020): weight x size of the transformed value vector, so a "
            "token looked at but carrying a small vector counts little.",
    "value_zeroing": "Value zeroing (Mohebbi et al. 2023): how much each token's layer output changes when "
                     "one token's value vector is zeroed; includes the residual path and feed-forward.",
    "alti": "ALTI (Ferrando et al. 2022): each layer's output split exactly into per-token pieces through "
            "attention, residual and LayerNorm; a piece counts by how close it is to the whole.",
}


@dataclass(frozen=True, eq=False)
class MixingMaps:
    """One context-mixing measure over the real tokens of one input."""

    info: TokenInfo
    measure: str
    weights: np.ndarray  # (L, H, T, T) float32; H = 1 for per-layer measures (value_zeroing, alti)
    combined: np.ndarray  # (L, T, T) per layer, heads combined; rows sum to 1
    aggregated: np.ndarray  # (L, T, T) across layers up to l; rows sum to 1
    seconds: float = 0.0

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.info.tokens

    @property
    def num_layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.weights.shape[1])

    @property
    def cls_scores(self) -> np.ndarray:
        """(T,) what the last layer's [CLS] takes from each input token, aggregated across layers."""
        return self.aggregated[-1, 0]

    def to_dict(self) -> dict:
        r = lambda a: np.round(a, 6).tolist()  # noqa: E731
        return {"tokens": list(self.tokens), "measure": self.measure, "weights": r(self.weights),
                "combined": r(self.combined), "aggregated": r(self.aggregated), "cls_scores": r(self.cls_scores),
                "seconds": round(float(self.seconds), 4)}


def supported_measures(lm) -> tuple[str, ...]:
    """The measures this model's family supports (all four for every supported family unless the
    family's layer cannot be decomposed)."""
    raise NotImplementedError


def check_measure(lm, measure: str) -> str:
    """``measure`` if known and supported for ``lm``'s family; InputError otherwise: an unknown name
    lists the valid ones, an unsupported one says why and which measures work."""
    raise NotImplementedError


def context_mixing(lm, text: str, pair: str | None = None, measure: str = "raw") -> MixingMaps:
    """The measure over one input (checked like ``attention``); kept in the model's LRU."""
    raise NotImplementedError
