"""SQuAD's exact match and token F1 with bootstrap intervals: ``train.answer_metrics``, named here too.

The metric lives on the train floor (as ``train.entity_metrics`` does for the tagger) because fine-tuning a reader
judges it by the same numbers (``train.answer_training``), and the train floor may not import this one."""

from __future__ import annotations

from ..train.answer_metrics import (
    BOOTSTRAP_SAMPLES,
    answer_scores,
    answer_tokens,
    exact_match,
    gold_answers,
    mean_intervals,
    normalize_answer,
    score_answer,
    token_f1,
)

__all__ = ["normalize_answer", "answer_tokens", "exact_match", "token_f1", "gold_answers", "score_answer",
           "answer_scores", "mean_intervals", "BOOTSTRAP_SAMPLES"]
