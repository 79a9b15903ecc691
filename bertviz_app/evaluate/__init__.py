"""Evaluation: a model on a labelled file, its stored runs, two models compared and [CLS] geometry by layer.

Metrics with intervals, slices, calibration and the misclassified rows (``evaluation.py``), the run folder
written and read back, the Evaluate tab's stored evaluations, McNemar's test between two models, and where in
the encoder the classes become separable. A tagger (token classifier) on a tagged file: strict IOB2 entity
scores per type with bootstrap intervals, slices, its wrong sentences and two taggers compared with a paired
bootstrap (``tagger_evaluation.py``). A question answering model (a span reader) on a SQuAD-format file:
SQuAD's exact match and token F1 with bootstrap intervals, the answered and unanswerable questions apart, slices
by question word and length, its wrong answers (``answer_evaluation.py``; the metric in
``train/answer_metrics.py``, which fine-tuning judges by too).
Imports interpret/, train/, models/ and the shared kernel only.
"""
