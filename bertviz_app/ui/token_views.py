"""Token views: which units a chart shows (tokens, or words with their pieces merged), [CLS]/[SEP]
hidden or not, matrices and scores in those units, and tokens coloured by their attribution."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import bertviz_app as core


@dataclass(frozen=True)
class TokenView:
    """Which units to show (tokens or words) and which of them are [CLS]/[SEP]."""

    labels: list[str]
    special: np.ndarray  # (N,) bool
    groups: core.WordGroups | None  # set when word pieces were merged

    def keep(self, hide_specials: bool) -> np.ndarray:
        return np.flatnonzero(~self.special) if hide_specials and (~self.special).any() else np.arange(len(self.labels))


def token_view(info: core.TokenInfo, merge: bool) -> TokenView:
    special_tok = np.array([s is None for s in info.sequence_ids], dtype=bool)
    if not merge:
        return TokenView(list(info.tokens), special_tok, None)
    groups = core.word_groups(info)
    special = np.array([len(g) == 1 and special_tok[g[0]] for g in groups.groups], dtype=bool)
    return TokenView(list(groups.words), special, groups)


def view_matrix(weights: np.ndarray, view: TokenView, keep: np.ndarray) -> np.ndarray:
    """(..., T, T) -> (..., N, N) in the view's units, restricted to ``keep``."""
    w = np.asarray(weights, dtype=np.float32)
    if view.groups is not None:
        w = core.merge_attention(w, view.groups)
    return w[..., keep[:, None], keep[None, :]] if w.ndim >= 2 else w


def view_scores(scores: np.ndarray, view: TokenView, keep: np.ndarray | None = None) -> np.ndarray:
    """(..., T) -> (..., N): attributions summed over a word's pieces."""
    s = np.asarray(scores, dtype=np.float64)
    if view.groups is not None:
        s = core.merge_scores(s, view.groups)
    return s if keep is None else s[..., keep]


# --------------------------------------------------------------------------- coloured tokens
def tokens_html(labels: list[str], scores: np.ndarray, special: np.ndarray, attr: core.Attribution,
                title: str = "", min_change: float = core.Settings.min_change) -> str:
    """Tokens coloured by their attribution on the core's absolute scale (``core.colour_scale``:
    a share of f(x) - f(baseline), the same for every text), with its warning when the change is
    too small to read. Every piece of text is escaped by the core."""
    scale = core.colour_scale(attr, min_change)
    return core.tokens_html(labels, scores, special, attr.target, scale, title,
                            core.change_warning(attr, scale, scores),
                            signed=core.is_signed(attr.method))
