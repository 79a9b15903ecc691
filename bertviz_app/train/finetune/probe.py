"""The frozen-encoder probe: a logistic regression on the pooled [CLS] features, written into the
head's last linear layer, so a probe run is an ordinary ``*ForSequenceClassification`` folder.
Also fitted, unsaved, as the reference a full run is judged against."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer
from transformers import logging as hf_logging

from ...errors import CancelledError
from ...models.families import family_of
from ...models.heads import SEQUENCE_CLASSIFICATION
from ...models.registry import resolve_device
from ..data import Dataset, split_dataset
from ..training import TrainConfig, choose_max_length
from .evaluation import evaluate

__all__ = ["PROBE_REFERENCE_ROWS", "pooled_features", "probe_reference", "train_probe"]

PROBE_REFERENCE_ROWS = 5000  # training rows the probe reference of a full run is fitted on (bounds its cost)


def pooled_features(model, tokenizer, texts, pairs, max_length: int, cancel=None, batch_size: int = 64) -> np.ndarray:
    """What the head's last linear layer reads, for every text (BERT: tanh(W h_CLS + b)): (N, D)
    float32, length-sorted batches."""
    fam = family_of(model)
    order = np.argsort([len(t) for t in texts])
    out = np.empty((len(texts), model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            if cancel is not None and cancel.is_set():
                raise CancelledError("Training was cancelled; nothing was saved.")
            idx = order[start : start + batch_size]
            enc = tokenizer([texts[i] for i in idx], [pairs[i] for i in idx] if pairs else None, truncation=True,
                            max_length=max_length, padding=True, return_tensors="pt").to(model.device)
            hidden = fam.base(model)(**fam.inputs(**enc)).last_hidden_state  # (B, T, D)
            out[idx] = fam.features(model, hidden).float().cpu().numpy()  # (B, D)
    return out


def train_probe(base_path: Path, train: Dataset, config: TrainConfig, progress, cancel, device: str = "auto"):
    """Frozen encoder + logistic regression on the pooled [CLS] features (what the head's last
    linear layer reads), written into that layer (exactly the same function). The features are
    computed on ``device`` ("auto": cuda, then mps, then cpu)."""
    from sklearn.linear_model import LogisticRegression  # scikit-learn loads when a probe is fitted
    from sklearn.multiclass import OneVsRestClassifier

    started = time.time()
    names = train.label_names
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(base_path, use_fast=True, trust_remote_code=False)
    model = SEQUENCE_CLASSIFICATION.auto_class.from_pretrained(
        base_path, num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)},
        problem_type="multi_label_classification" if train.multi_label else "single_label_classification",
        ignore_mismatched_sizes=True, use_safetensors=True, trust_remote_code=False,
    ).eval()
    model.to(resolve_device(device))
    model_max = int(min(tokenizer.model_max_length if tokenizer.model_max_length < 10**6 else 512,
                        model.config.max_position_embeddings))
    max_length = config.max_length or choose_max_length(tokenizer, train.texts, train.pairs, model_max)
    if progress:
        progress({"step": 0, "max_steps": 2, "elapsed": 0.0, "eta": None, "logs": {"stage": "features"}})
    x = pooled_features(model, tokenizer, list(train.texts), list(train.pairs) if train.pairs else None, max_length,
                        cancel)
    if progress:
        progress({"step": 1, "max_steps": 2, "elapsed": time.time() - started, "eta": None,
                  "logs": {"stage": "logistic regression"}})
    if train.multi_label:
        y = train.multi_hot()  # (N, C)
        clf = OneVsRestClassifier(LogisticRegression(max_iter=2000, C=1.0, random_state=config.seed)).fit(x, y)
        w = np.stack([e.coef_[0] for e in clf.estimators_])  # (C, D)
        b = np.array([e.intercept_[0] for e in clf.estimators_])  # (C,)
    else:
        y = np.asarray(train.labels)
        clf = LogisticRegression(max_iter=2000, C=1.0, random_state=config.seed).fit(x, y)
        if len(names) == 2:  # sklearn's binary model: p(1) = sigmoid(w x + b) = softmax([0, w x + b])[1]
            w = np.vstack([np.zeros_like(clf.coef_[0]), clf.coef_[0]])  # (2, D)
            b = np.array([0.0, clf.intercept_[0]])
        else:
            w, b = clf.coef_, clf.intercept_  # (C, D), (C,)
    with torch.no_grad():
        last = family_of(model).final_linear(model)  # BERT: classifier; RoBERTa: classifier.out_proj
        last.weight.copy_(torch.as_tensor(w, dtype=last.weight.dtype))
        last.bias.copy_(torch.as_tensor(b, dtype=last.bias.dtype))
    seconds = time.time() - started
    if progress:
        progress({"step": 2, "max_steps": 2, "elapsed": seconds, "eta": 0.0, "logs": {"stage": "done"}})
    return model, tokenizer, {
        "max_length": max_length,
        "train_seconds": seconds,
        "examples_per_second": len(train) / max(seconds, 1e-9),
        "log_history": [],
        "config": {"mode": "probe", "features": "pooled [CLS] (tanh(W h + b))",
                   "classifier": "LogisticRegression(C=1.0)", "max_length": max_length, "seed": config.seed},
        "is_main_process": True,
    }


def probe_reference(base_path: Path, train: Dataset, val: Dataset, config: TrainConfig, cancel,
                    device: str = "auto") -> dict:
    """Validation accuracy and macro-F1 of the probe on this split (at most PROBE_REFERENCE_ROWS
    training rows, stratified), for judging a full run; nothing is saved."""
    if len(train) > PROBE_REFERENCE_ROWS:
        train, _, _ = split_dataset(train, val_fraction=1 - PROBE_REFERENCE_ROWS / len(train), seed=config.seed)
    model, tokenizer, info = train_probe(base_path, train, config, None, cancel, device)
    metrics, _ = evaluate(model, tokenizer, val, info["max_length"])
    return {"accuracy": metrics["accuracy"], "macro_f1": metrics["macro_f1"]}
