"""Merge WordPiece tokens back into the words of the original text, using character offsets.

A word is a maximal run of non-space characters of the text as the user typed it, so
"don't" stays one word, an emoji that became [UNK] maps back to the emoji, and "##ing" joins
its stem. Special tokens ([CLS], [SEP]) stay words of their own.
Rules: attributions are summed over a word's pieces; attention *to* a word is summed over its
pieces and attention *from* a word is averaged (Clark et al. 2019), so rows still sum to 1.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

import numpy as np

from ..results import TokenInfo

__all__ = ["WordGroups", "word_groups", "merge_scores", "merge_attention", "merge_rows"]

_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class WordGroups:
    words: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...]  # token indices of each word, in order

    def __len__(self) -> int:
        return len(self.words)


def word_groups(info: TokenInfo) -> WordGroups:
    spans = {0: [(m.start(), m.end()) for m in _WORD.finditer(info.text)]}
    if info.pair is not None:
        spans[1] = [(m.start(), m.end()) for m in _WORD.finditer(info.pair)]
    sources = {0: info.text, 1: info.pair or ""}
    ends = {seq: [b for _, b in sp] for seq, sp in spans.items()}
    words: list[str] = []
    groups: list[list[int]] = []
    current: tuple[int, int] | None = None  # (sequence id, word index) of the open group
    for i, (tok, (start, end), seq) in enumerate(zip(info.tokens, info.offsets, info.sequence_ids)):
        if seq is None:  # special token: its own word
            words.append(tok)
            groups.append([i])
            current = None
            continue
        # The word the token overlaps: SentencePiece tokenizers (DeBERTa-v2) start a "▁word" piece's
        # offsets on the space before the word, so a start-inside-the-word test would miss it.
        # The first word ending after the token's start, if it starts before the token's end (the
        # words are in order and do not overlap: a search, not a scan, so a long document stays fast).
        stop = max(end, start + 1)
        k = bisect.bisect_right(ends[seq], start)
        word_idx = k if k < len(spans[seq]) and spans[seq][k][0] < stop else None
        if word_idx is None:  # should not happen; keep the token on its own
            words.append(tok)
            groups.append([i])
            current = None
            continue
        if current == (seq, word_idx):
            groups[-1].append(i)
        else:
            a, b = spans[seq][word_idx]
            words.append(sources[seq][a:b])
            groups.append([i])
            current = (seq, word_idx)
    return WordGroups(tuple(words), tuple(tuple(g) for g in groups))


def merge_scores(scores: np.ndarray, groups: WordGroups) -> np.ndarray:
    """(..., T) -> (..., W): sum over each word's pieces."""
    return np.stack([scores[..., list(g)].sum(axis=-1) for g in groups.groups], axis=-1)


def merge_rows(weights: np.ndarray, groups: WordGroups) -> np.ndarray:
    """Attention to tokens (..., T) -> to words (..., W): summed over pieces."""
    return merge_scores(weights, groups)


def merge_attention(weights: np.ndarray, groups: WordGroups) -> np.ndarray:
    """(..., T, T) -> (..., W, W): columns (attended-to) summed, rows (attending) averaged."""
    to_words = merge_scores(weights, groups)  # (..., T, W)
    return np.stack([to_words[..., list(g), :].mean(axis=-2) for g in groups.groups], axis=-2)  # (..., W, W)
