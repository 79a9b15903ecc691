"""One training engine for every fine-tune (the default model's build and user runs), built on
the Hugging Face ``Trainer``: distribution comes from ``accelerate launch``/``torchrun`` with no
code of ours. Batches are grouped by length and padded per batch (about 2x the examples/s of
random order on a 2-core CPU), and the model folder is written to a temporary folder and renamed
into place, so a crash or kill never leaves a half-written model or touches earlier ones."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import (
    AutoTokenizer,
    DataCollatorWithPadding,
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from transformers import logging as hf_logging

from ..errors import InputError, TrainingError
from ..models.eta import RateEta
from ..models.families import SUPPORTED_MODEL_TYPES, family_of
from ..models.forward import logits_from_depth
from ..models.heads import SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION, head_of
from .frozen_features import FEATURE_BUDGET, frozen_run

__all__ = ["TrainConfig", "TrainResult", "train_classifier", "atomic_save", "evaluate_predictions",
           "calibration_metrics", "expected_calibration_error", "check_trainable", "choose_max_length",
           "metrics_tables", "ECE_BINS", "SAVE_STEPS", "BestKeeper", "ProgressReporter", "ScaledLrTrainer",
           "training_arguments", "fit_and_evaluate", "run_info", "default_eval_every",
           "leave_process_group", "train_keeping_best", "family_type", "trained_labels", "fresh_linear", "layer_of",
           "layer_count", "quiet_hub_logs", "longest_input", "RowsDataset", "load_for_training", "configure_model"]

log = logging.getLogger(__name__)
Progress = Callable[[dict], None]
STOP_RULES = ("metric_or_loss", "metric")  # TrainConfig.stop_on
ECE_BINS = 15
SAVE_STEPS = 2  # a model folder's save, in training steps for the ETA (it writes the weights once; a step reads them)
WARMUP_STEPS = 1  # the first step (the longest batch, kernels and allocator warming up) is kept out of the ETA's rate
LOSS_REL_DELTA = 1e-3  # a validation loss falling by less than 0.1% of its lowest has not fallen (early stopping)


@dataclass
class TrainConfig:
    epochs: float = field(default=1.0, metadata={"help": "Passes over the training data."})
    learning_rate: float = field(default=5e-5, metadata={"help": "Peak AdamW learning rate."})
    batch_size: int = field(default=32, metadata={"help": "Examples per optimisation step (per process)."})
    max_length: int | None = field(
        default=None, metadata={"help": "Tokens kept per text; None = the data's 99th percentile, at most the model's."}
    )
    warmup_ratio: float = field(default=0.06, metadata={"help": "Fraction of steps with linear warm-up."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    seed: int = field(default=42, metadata={"help": "Seed for initialisation, shuffling and dropout."})
    eval_every: int = field(default=0, metadata={"help": "Evaluate every N steps (0 = once per epoch)."})
    logging_steps: int = field(default=10, metadata={"help": "Report the training loss every N steps."})
    bf16: bool | None = field(
        default=None, metadata={"help": "bf16 mixed precision; None = on when the GPU supports it."})
    early_stopping_patience: int = field(
        default=2, metadata={"help": "Stop after this many evaluations without a rise of the validation metric, or "
                             "without a fall of the validation loss (0 = never)."}
    )
    metric: str = field(
        default="macro_f1",
        metadata={"help": "Validation metric that picks the best checkpoint: macro_f1 or accuracy."})
    stop_on: str = field(
        default="metric_or_loss",
        metadata={"help": "What stops training early: 'metric_or_loss' = patience evaluations "
                          "without the validation metric rising by more than min_delta, or patience "
                          "evaluations without the validation loss falling, whichever comes first; "
                          "'metric' = the metric alone (the rule before issue 22)."})
    min_delta: float = field(
        default=0.0,
        metadata={"help": "How much the validation metric must rise to count as a rise for early stopping; "
                          "0 = any rise (with the loss stop, 0.01 stopped the bench's run too early: "
                          "bench/finetune_defaults_results.md)."})
    freeze_word_embeddings: bool = field(
        default=False,
        metadata={"help": "Keep the word-embedding matrix (about half of a small BERT's parameters) fixed: "
                          "fewer optimizer updates, and words absent from the training data keep their "
                          "pre-trained meaning."})
    freeze_layers: int = field(
        default=0,
        metadata={"help": "Keep the embeddings and the bottom N encoder layers fixed: no backward pass through "
                          "them, so each step is faster; a classifier or a tagger computes their output once per "
                          "text and trains the layers above on it (0 = train everything)."})
    head_lr_scale: float = field(
        default=1.0,
        metadata={"help": "Learning-rate multiplier for the pooler and classifier "
                          "(the layers the task trains from scratch)."})
    label_smoothing: float = field(
        default=0.0, metadata={"help": "Label smoothing of the cross-entropy loss, 0 to <0.5."})
    dropout: float | None = field(
        default=None,
        metadata={"help": "Dropout probability of every dropout layer (hidden, attention, classifier) while "
                          "training; None = the model's own (0.1 for most BERTs)."})
    layer_lr_decay: float = field(
        default=1.0,
        metadata={"help": "Layer-wise learning-rate decay: the top encoder layer trains at the full rate, each "
                          "layer below at this times the one above, the embeddings below the first; 1 = no decay."})

    def __post_init__(self) -> None:
        checks = {  # name: (ok, what is allowed)
            "epochs": (0 < self.epochs <= 100, "more than 0, at most 100"),
            "learning_rate": (0 < self.learning_rate < 1, "between 0 and 1, e.g. 5e-5"),
            "batch_size": (1 <= self.batch_size <= 4096, "a whole number from 1 to 4096"),
            "warmup_ratio": (0 <= self.warmup_ratio < 1, "from 0 to below 1, e.g. 0.1"),
            "weight_decay": (0 <= self.weight_decay < 1, "from 0 to below 1"),
            "logging_steps": (self.logging_steps >= 1, "at least 1"),
            "eval_every": (self.eval_every >= 0, "0 or more"),
            "early_stopping_patience": (self.early_stopping_patience >= 0, "0 (never stop early) or more"),
            "metric": (self.metric in ("macro_f1", "accuracy"), "macro_f1 or accuracy"),
            "stop_on": (self.stop_on in STOP_RULES, " or ".join(STOP_RULES)),
            "min_delta": (0 <= self.min_delta < 1, "from 0 to below 1"),
            "max_length": (self.max_length is None or 8 <= self.max_length <= 4096,
                           "from 8 to 4096 tokens, or automatic"),
            "head_lr_scale": (0 < self.head_lr_scale <= 1000, "more than 0, at most 1000"),
            "label_smoothing": (0 <= self.label_smoothing < 0.5, "from 0 to below 0.5"),
            "freeze_layers": (isinstance(self.freeze_layers, int) and 0 <= self.freeze_layers <= 100,
                              "a whole number from 0 to the model's layers minus one"),
            "dropout": (self.dropout is None or 0 <= self.dropout < 1, "from 0 to below 1, or automatic"),
            "layer_lr_decay": (0 < self.layer_lr_decay <= 1, "more than 0, at most 1"),
        }
        bad = [name for name, (ok, _) in checks.items() if not ok]
        if bad:
            helps = {f: TrainConfig.__dataclass_fields__[f].metadata["help"] for f in bad}
            raise InputError("Invalid training settings: " + "; ".join(
                f"{k}={getattr(self, k)!r} must be {checks[k][1]} ({h})" for k, h in helps.items()))


@dataclass
class TrainResult:
    path: Path
    metrics: dict
    log_history: list[dict]
    seconds: float
    train_examples: int
    examples_per_second: float


class RowsDataset(torch.utils.data.Dataset):
    """Examples already encoded, one dict a row (a tagger's sentences, a reader's windows): what the Trainer reads."""

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return self.rows[i]


class _ListDataset(torch.utils.data.Dataset):
    def __init__(self, encodings: dict, labels: Sequence):
        self.encodings = encodings
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        item = {k: v[i] for k, v in self.encodings.items()}
        item["labels"] = self.labels[i]
        return item


class ProgressReporter(TrainerCallback):
    """Forwards progress to the caller and stops within one step when cancelled. The event's "eta"
    (seconds) is None until the steps' rate is measured, then it is the time to the end of the
    caller's work (``eta.RateEta``): the steps left at the recent rate (the first step, several times
    a later one, left out), the evaluations still to come at their measured length (timed apart from
    the steps), and what the caller does after training: ``after_evals`` evaluations' worth (the final
    evaluation, a probe's features) and ``after_steps`` steps' worth (an evaluation without a
    validation set during training, the save). "rate" is the recent rate in steps per second."""

    def __init__(self, progress: Progress | None, cancel: threading.Event | None, started: float, *,
                 after_evals: float = 0.0, after_steps: float = 0.0, clock: Callable[[], float] = time.monotonic):
        self.progress, self.cancel, self.started = progress, cancel, started
        self.after_evals, self.after_steps = float(after_evals), float(after_steps)
        self.cancelled = False
        self.steps = RateEta(skip_units=WARMUP_STEPS, clock=clock)
        self.evals_done = 0

    @staticmethod
    def evals_planned(args, max_steps: int) -> int:
        """Evaluations during training: every ``eval_steps`` and, unless the last step is one of
        them, one after it (``train_classifier``: the final weights compete with the best)."""
        strategy = getattr(getattr(args, "eval_strategy", None), "value", getattr(args, "eval_strategy", None))
        every = getattr(args, "eval_steps", None)
        if strategy != "steps" or not every or every < 1:
            return 0
        every = int(every)
        return max_steps // every + (1 if max_steps % every else 0)

    def _emit(self, args, state, **extra) -> None:
        if self.progress is None:
            return
        elapsed = time.time() - self.started
        evals_left = max(0, self.evals_planned(args, state.max_steps) - self.evals_done)
        eta = self.steps.left(state.max_steps, pauses=evals_left + self.after_evals, after_units=self.after_steps)
        self.progress({"step": state.global_step, "max_steps": state.max_steps, "epoch": state.epoch,
                       "elapsed": elapsed, "eta": eta, "rate": self.steps.rate, **extra})

    def on_step_end(self, args, state, control, **kw):
        self.steps.update(state.global_step)
        if self.cancel is not None and self.cancel.is_set():
            self.cancelled = True
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kw):
        logs = dict(logs or {})
        if any(k.startswith("eval_") for k in logs):  # an evaluation's metrics: it ran since the last step
            self.steps.pause()  # timed apart, out of the steps' rate
            self.evals_done += 1
        self._emit(args, state, logs=logs)


class BestKeeper(TrainerCallback):
    """Keeps the weights of the best evaluation in memory (no checkpoint files), restored at the
    end of training, and stops early when validation says so.

    Best: the highest validation metric; with ``stop_on="metric_or_loss"`` an exact tie goes to the
    lower validation loss (on 100-odd validation rows macro-F1 moves in steps of one row, so ties
    are common, and the lower loss is the less over-confident model).
    Stop: after ``patience`` evaluations in which the metric did not rise more than ``min_delta``
    above its best so far, or (``metric_or_loss``) after ``patience`` evaluations in which the
    validation loss did not fall below its lowest by more than LOSS_REL_DELTA of it, whichever
    comes first. Measured on 480 rows (bench/finetune_defaults_results.md, 2026-11-25), requiring
    both to stall never fired: macro-F1 on 120 rows still jumps a row or two late in training
    (0.816 -> 0.826 while the loss rose 0.41 -> 0.66), so only the loss said "overfitting" in time;
    a min_delta of 0.01 made the macro-F1 side stop the 5-epoch run at step 105 with 0.777
    instead of 0.808 at step 120, hence 0 by default.
    ``stop_on="metric", min_delta=0`` is the rule before issue 22."""

    def __init__(self, metric: str, patience: int, stop_on: str = "metric_or_loss", min_delta: float = 0.0):
        self.key = f"eval_{metric}"
        self.patience = patience
        self.use_loss = stop_on == "metric_or_loss"
        self.min_delta = float(min_delta)
        self.best: float | None = None
        self.best_loss: float | None = None  # validation loss of the kept evaluation
        self.lowest_loss: float | None = None
        self.best_step: int | None = None
        self.best_state: dict | None = None
        self.bad_evals = 0  # evaluations since the metric last rose by more than min_delta
        self.bad_loss_evals = 0  # evaluations since the validation loss last fell
        self.stopped_by: str | None = None  # "metric" or "loss"
        self.last_step: int | None = None  # the step of the latest evaluation

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kw):
        value = (metrics or {}).get(self.key)
        if value is None:
            return control
        self.last_step = state.global_step
        value = float(value)
        loss = (metrics or {}).get("eval_loss")
        loss = float(loss) if self.use_loss and loss is not None and math.isfinite(float(loss)) else None
        first = self.best is None
        better = first or value > self.best or (
            self.use_loss and value == self.best and loss is not None
            and (self.best_loss is None or loss < self.best_loss))
        self.bad_evals = 0 if first or value > self.best + self.min_delta else self.bad_evals + 1
        if loss is not None:
            fell = self.lowest_loss is None or loss < self.lowest_loss * (1 - LOSS_REL_DELTA)
            self.bad_loss_evals = 0 if fell else self.bad_loss_evals + 1
            self.lowest_loss = loss if self.lowest_loss is None else min(self.lowest_loss, loss)
        if better:
            self.best, self.best_loss, self.best_step = value, loss, state.global_step
            self.best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        if self.patience and self.stopped_by is None:
            if self.bad_evals >= self.patience:
                self.stopped_by = "metric"
            elif self.bad_loss_evals >= self.patience:
                self.stopped_by = "loss"
        if self.stopped_by is not None:
            control.should_training_stop = True
        return control


_LAYER_INDEX = re.compile(r"\.layer\.(\d+)\.")  # encoder layer i's parameters in every family but ALBERT (shared)


def layer_count(model) -> int:
    return int(getattr(model.config, "num_hidden_layers", 0) or 0)


def layer_of(name: str) -> int | None:
    """The encoder layer a parameter belongs to, -1 for the embeddings, None for anything else. DeBERTa's encoder
    holds two more: the LayerNorm of its relative-position embeddings (every layer reads them: -1) and the
    convolution it applies to layer 0's output (0)."""
    m = _LAYER_INDEX.search(name)
    if m is not None:
        return int(m.group(1))
    if "embeddings" in name or ".encoder.LayerNorm." in name:
        return -1
    return 0 if ".encoder.conv." in name else None


class ScaledLrTrainer(Trainer):
    """The Hugging Face Trainer, with per-parameter learning-rate scales: the pooler and classifier
    (trained from scratch) at ``head_lr_scale`` times the rate, and the encoder layers decaying by
    ``layer_lr_decay`` per layer downwards (their own optimizer groups; the schedule scales every group alike)."""

    HEAD_PREFIXES = ("bert.pooler.", "classifier.")  # BERT's; other families' from their head adapter

    def __init__(self, *args, head_lr_scale: float = 1.0, layer_lr_decay: float = 1.0, feature_depth: int = 0,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.head_lr_scale, self.layer_lr_decay = head_lr_scale, layer_lr_decay
        self.feature_depth = feature_depth  # > 0: batches hold ``hidden_states[feature_depth]`` (frozen_features.py)
        fam = family_of(self.model)
        if fam is not None:
            self.HEAD_PREFIXES = head_of(self.model).parameter_prefixes(fam)

    def lr_scale(self, name: str, n_layers: int) -> float:
        if name.startswith(self.HEAD_PREFIXES):
            return self.head_lr_scale
        if self.layer_lr_decay == 1.0:
            return 1.0
        layer = layer_of(name)
        return 1.0 if layer is None else self.layer_lr_decay ** (n_layers - 1 - layer)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The Trainer's loss, or, for batches of features (``hidden``: the frozen bottom's output), the model's own
        from the layers above it: the head's logits (a classifier's last layer for [CLS] alone), then the model's
        loss: a multi-label classifier's binary cross-entropy, else the cross-entropy over the rows (a tagger's:
        positions) whose label is not -100, their mean, or the Trainer's label smoothing."""
        if "hidden" not in inputs:
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        logits = logits_from_depth(model, inputs["hidden"], self.feature_depth, inputs["attention_mask"],
                                   attention="sdpa")  # (DeBERTa runs its own attention whatever is asked)
        outputs = {"logits": logits}  # (B, C), a tagger's (B, T, C)
        labels = inputs.get("labels")
        loss = None
        if labels is not None and model.config.problem_type == "multi_label_classification":
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), labels.float())
        elif labels is not None and self.label_smoother is not None:
            loss = self.label_smoother(outputs, labels)
        elif labels is not None:
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                                                     ignore_index=-100)
        outputs["loss"] = loss
        return (loss, outputs) if return_outputs else loss

    def create_optimizer(self, model=None):
        fresh = self.optimizer is None
        optimizer = super().create_optimizer(model)
        if not fresh or (self.head_lr_scale == 1.0 and self.layer_lr_decay == 1.0):
            return optimizer
        model = model or self.model
        n_layers = layer_count(model)
        scale = {id(p): self.lr_scale(n, n_layers) for n, p in model.named_parameters()}
        groups = optimizer.param_groups
        optimizer.param_groups = []
        for g in groups:
            by_scale: dict[float, list] = {}
            for p in g["params"]:
                by_scale.setdefault(scale.get(id(p), 1.0), []).append(p)
            for factor, params in sorted(by_scale.items()):
                optimizer.add_param_group({**{k: v for k, v in g.items() if k != "params"}, "params": params,
                                           "lr": g["lr"] * factor})
        return optimizer


def _tokenize(tokenizer, texts: Sequence[str], pairs: Sequence[str] | None, max_length: int) -> dict:
    enc = tokenizer(list(texts), list(pairs) if pairs is not None else None, truncation=True, max_length=max_length)
    return {k: list(v) for k, v in enc.items()}


def choose_max_length(tokenizer, texts: Sequence[str], pairs: Sequence[str] | None, model_max: int) -> int:
    """The data's 99th-percentile token length (rounded up to a multiple of 8), within [16, model_max]."""
    sample = list(texts[:5000])
    enc = tokenizer(sample, list(pairs[:5000]) if pairs is not None else None, truncation=True, max_length=model_max)
    lengths = [len(x) for x in enc["input_ids"]]
    p99 = int(np.percentile(lengths, 99)) if lengths else model_max
    return int(min(model_max, max(16, math.ceil(p99 / 8) * 8)))


def evaluate_predictions(y_true, y_pred, labels: Sequence[str]) -> dict:
    """Accuracy, macro-F1, per-class precision/recall/F1 and the confusion matrix. Multi-label
    input (multi-hot arrays (N, C)): subset accuracy, macro-F1 over classes, no confusion matrix."""
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

    if np.ndim(y_true) == 2:
        y_true, y_pred = np.asarray(y_true).astype(int), np.asarray(y_pred).astype(int)  # (N, C)
        p, r, f, s = precision_recall_fscore_support(y_true, y_pred, zero_division=0)
        return {
            "accuracy": float(accuracy_score(y_true, y_pred)),
            "macro_f1": float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
            "per_class": {labels[i]: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                                      "support": int(s[i])} for i in range(len(labels))},
            "confusion_matrix": None,
            "n": int(len(y_true)),
        }

    idx = list(range(len(labels)))
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=idx, zero_division=0)
    return {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "macro_f1": float(f1_score(y_true, y_pred, labels=idx, average="macro", zero_division=0)),
        "per_class": {labels[i]: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                                  "support": int(s[i])} for i in idx},
        "confusion_matrix": confusion_matrix(y_true, y_pred, labels=idx).tolist(),
        "n": int(len(y_true)),
    }


def expected_calibration_error(confidence, correct, bins: int = ECE_BINS) -> float | None:
    """Expected calibration error (Guo et al. 2017): the predictions are put into ``bins`` equal-width
    bins of their confidence on [0, 1] (a bin holds (lower, upper]), and ECE is the sum over bins of
    (share of the rows in the bin) x |accuracy in the bin - mean confidence in the bin|. None
    without rows."""
    conf = np.asarray(confidence, dtype=np.float64).ravel()  # (N,)
    ok = np.asarray(correct, dtype=np.float64).ravel()  # (N,) 1 = right
    if conf.size == 0:
        return None
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.searchsorted(edges[1:-1], conf, side="left")  # (N,) bin b holds edges[b] < conf <= edges[b+1]
    ece = 0.0
    for b in np.unique(idx):
        inside = idx == b
        ece += inside.mean() * abs(ok[inside].mean() - conf[inside].mean())
    return float(ece)


def calibration_metrics(logits, targets, multi_label: bool = False, bins: int = ECE_BINS) -> dict:
    """``val_nll``: the mean cross-entropy of the true labels (single-label: -log softmax(logits)[y];
    multi-label: the binary cross-entropy averaged over rows and classes, as the training loss).
    ``ece``: expected calibration error of the top probability (multi-label: of every class's
    yes/no decision, confidence max(p, 1 - p)), ``bins`` equal-width bins."""
    z = np.asarray(logits, dtype=np.float64)  # (N, C)
    if z.size == 0:
        return {"val_nll": None, "ece": None}
    if multi_label:
        y = np.asarray(targets, dtype=np.float64)  # (N, C) multi-hot
        # -log sigmoid, -log(1 - sigmoid)
        nll = float(np.mean(y * np.logaddexp(0.0, -z) + (1 - y) * np.logaddexp(0.0, z)))
        p = 1.0 / (1.0 + np.exp(-z))  # (N, C)
        conf, correct = np.maximum(p, 1 - p), (p >= 0.5) == (y >= 0.5)
    else:
        y = np.asarray(targets, dtype=np.int64)  # (N,)
        logp = z - np.logaddexp.reduce(z, axis=-1, keepdims=True)  # (N, C) log softmax
        nll = float(-logp[np.arange(len(y)), y].mean())
        p = np.exp(logp)
        conf, correct = p.max(-1), p.argmax(-1) == y
    return {"val_nll": nll, "ece": expected_calibration_error(conf, correct, bins)}


def train_classifier(
    base_path: str | Path,
    labels: Sequence[str],
    train_texts: Sequence[str],
    train_labels: Sequence,
    val_texts: Sequence[str] | None = None,
    val_labels: Sequence | None = None,
    train_pairs: Sequence[str] | None = None,
    val_pairs: Sequence[str] | None = None,
    config: TrainConfig | None = None,
    multi_label: bool = False,
    work_dir: str | Path | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    world_size: int = 1,
    after_evals: float = 0.0,
    after_steps: float = 0.0,
    feature_budget: int = FEATURE_BUDGET,
):
    """Fine-tune every parameter of a BERT encoder (folder with safetensors) as a
    ``*ForSequenceClassification`` of its family (``families.py``) with these labels.

    Labels are class indices, or multi-hot rows when ``multi_label``. With validation data the
    model is evaluated during training (about five times per run unless ``eval_every`` says),
    the best evaluation's weights are restored at the end, and training stops early after
    ``early_stopping_patience`` evaluations without improvement. A cancel (``cancel.set()``)
    stops within one step and also restores the best weights so far (the current ones are
    evaluated first when no evaluation has run yet). ``world_size``: processes training together
    (``accelerate launch``/torchrun; the caller knows it), for the default evaluation interval.
    ``after_evals``/``after_steps``: the caller's work after training, in validation passes and in
    training steps, which the progress events' ETA includes (``ProgressReporter``).
    Checkpoints go to ``work_dir`` (default: a fresh folder in the system's temporary folder).

    Returns (model, tokenizer, info); saving is the caller's (see ``atomic_save``). Under
    ``accelerate launch`` every process runs this; ``info["is_main_process"]`` says who saves.
    With ``config.freeze_layers`` the frozen bottom's output is computed once per text and the layers above train on
    it (``frozen_features.py``; at most ``feature_budget`` bytes of it); ``info["frozen_features"]`` says whether.
    """
    config = config or TrainConfig()
    if len(train_texts) != len(train_labels):
        raise InputError("train_texts and train_labels differ in length.")
    base_path = Path(base_path)
    tokenizer, model, id2label = _load(base_path, labels, config, multi_label)
    model_max = longest_input(tokenizer, model)
    max_length = config.max_length or choose_max_length(tokenizer, train_texts, train_pairs, model_max)
    train_ds = _encoded(tokenizer, train_texts, train_pairs, train_labels, max_length, multi_label)
    eval_ds = None
    if val_texts is not None and len(val_texts):
        eval_ds = _encoded(tokenizer, val_texts, val_pairs, val_labels, max_length, multi_label)
    rows = [[ds[i] for i in range(len(ds))] if config.freeze_layers and ds is not None else []
            for ds in (train_ds, eval_ds)]  # (only read with frozen layers)
    run = frozen_run(model, tokenizer, config.freeze_layers, *rows, world_size=world_size, budget=feature_budget,
                     per_token=False)
    if run.depth:  # the frozen bottom's output once per text (frozen_features.py)
        train_ds, eval_ds = RowsDataset(run.train), RowsDataset(run.eval) if run.eval else None
    compute_metrics = _metrics_of(multi_label, [id2label[i] for i in range(len(labels))])
    info = train_keeping_best(model, tokenizer, config, train_ds, eval_ds, compute_metrics, metric=config.metric,
                              progress=progress, cancel=cancel, after_evals=after_evals, after_steps=after_steps,
                              max_length=max_length, work_dir=work_dir, work_name="bertviz-train",
                              world_size=world_size, multi_label=multi_label, collator=run.collator,
                              feature_depth=run.depth)
    info["frozen_features"] = {"depth": run.depth, "why": run.why}
    return model, tokenizer, info


def train_keeping_best(model, tokenizer, config: TrainConfig, train_ds, eval_ds, compute_metrics, *, metric: str,
                       progress: Progress | None, cancel: threading.Event | None, after_evals: float,
                       after_steps: float, max_length: int, work_dir: str | Path | None, work_name: str,
                       world_size: int, multi_label: bool = False, collator=None, feature_depth: int = 0) -> dict:
    """The run every trainer shares: its set-up (bf16 where ``config`` says or the GPU supports it, the Trainer's
    ``training_arguments``, an evaluation every ``config.eval_every`` steps or ``default_eval_every``'s, the
    checkpoints in ``work_dir`` or a fresh ``<work_name>-<8 hex digits>`` folder in the system's temporary folder),
    progress and cancel, the best evaluation by ``metric`` kept and restored, early stopping, the work folder
    removed, the model left in eval mode; returns ``run_info``'s record. ``feature_depth`` > 0: the datasets' rows
    hold the frozen bottom's output (``frozen_features.py``), batched by ``collator``."""
    bf16 = (config.bf16 if config.bf16 is not None
            else bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported()))
    tmp_out = Path(work_dir) if work_dir else Path(tempfile.gettempdir()) / f"{work_name}-{uuid.uuid4().hex[:8]}"
    eval_every = config.eval_every or default_eval_every(len(train_ds), config, world_size)
    args = training_arguments(config, tmp_out, eval_ds is not None, eval_every, bf16, multi_label,
                              features=feature_depth > 0)
    started = time.time()
    reporter = ProgressReporter(progress, cancel, started, after_evals=after_evals, after_steps=after_steps)
    keeper = BestKeeper(metric, config.early_stopping_patience, config.stop_on, config.min_delta)
    trainer, out = fit_and_evaluate(model, tokenizer, args, config, train_ds, eval_ds,
                                    compute_metrics if eval_ds is not None else None, reporter, keeper, tmp_out,
                                    collator=collator, feature_depth=feature_depth)
    seconds = time.time() - started
    shutil.rmtree(tmp_out, ignore_errors=True)
    if keeper.best_state is not None:
        model.load_state_dict(keeper.best_state)
    model.eval()
    info = run_info(trainer, out, args, reporter, keeper, config, n_train=len(train_ds), seconds=seconds,
                    max_length=max_length, bf16=bf16, eval_every=eval_every)
    leave_process_group(args)
    return info


def _load(base_path: Path, labels: Sequence[str], config: TrainConfig, multi_label: bool):
    """(tokenizer, model, id2label): the base's tokenizer and its classifier for ``labels``, seeded and set up
    as ``config`` says."""
    torch.manual_seed(config.seed)
    check_trainable(base_path)
    tokenizer = AutoTokenizer.from_pretrained(base_path, use_fast=True, trust_remote_code=False)
    id2label = {i: str(lab) for i, lab in enumerate(labels)}
    model = load_for_training(
        SEQUENCE_CLASSIFICATION, base_path, num_labels=len(id2label), id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
        problem_type="multi_label_classification" if multi_label else "single_label_classification",
        ignore_mismatched_sizes=True)
    configure_model(model, config)
    if _other_head(base_path, id2label):
        fresh_linear(model, family_of(model).final_linear(model))  # a head trained for other classes would mislead
    return tokenizer, model, id2label


def load_for_training(head, base_path: Path, **options):
    """The base loaded as ``head``'s model class (``heads.py``: the family's ``*ForSequenceClassification``,
    ``*ForTokenClassification`` or ``*ForQuestionAnswering``) with ``options`` (its labels...), quietly, from
    safetensors, no remote code."""
    with quiet_hub_logs():
        return head.auto_class.from_pretrained(
            base_path,
            **options,
            use_safetensors=True,
            trust_remote_code=False,
            # SDPA is fastest for training (the explorer reloads it as eager); DeBERTa has its own attention
            attn_implementation="sdpa" if family_type(base_path) != "deberta-v2" else "eager",
        )


@contextlib.contextmanager
def quiet_hub_logs():
    """transformers' loading warnings (the fresh head's "newly initialized" weights: expected here) and progress
    bars off while a base loads for training."""
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


def configure_model(model, config: TrainConfig, *, freeze_layers: bool = True) -> None:
    """Frozen parameters and dropout as ``config`` says: the word embeddings, the bottom ``config.freeze_layers``
    encoder layers with the embeddings (unless ``freeze_layers`` is False) and every dropout layer's probability."""
    if config.freeze_word_embeddings:
        family_of(model).word_embeddings(model).weight.requires_grad_(False)  # (V, E) stays as pre-trained
    if freeze_layers and config.freeze_layers:
        if config.freeze_layers >= layer_count(model):
            raise InputError(f"freeze_layers={config.freeze_layers} must be less than the model's "
                             f"{layer_count(model)} layers "
                             "(the top layer has to train).")
        for name, param in model.named_parameters():
            layer = layer_of(name)
            if layer is not None and layer < config.freeze_layers:
                param.requires_grad_(False)
    if config.dropout is not None:  # dropouts are nn.Dropout modules; BERT's SDPA attention reads their .p too
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = config.dropout


def _other_head(base_path: Path, id2label: dict[int, str]) -> bool:
    """Whether the base's head was trained for other classes than ``id2label``'s (or is a tagger's)."""
    base_labels = trained_labels(base_path)
    other_head = trained_labels(base_path, TOKEN_CLASSIFICATION) is not None  # a tagger's `classifier`, same name
    return other_head or (base_labels is not None and base_labels != tuple(id2label.values()))


def fresh_linear(model, linear: torch.nn.Linear) -> None:
    """``linear`` drawn afresh as the model's own initialisation draws a new head (weights normal with the config's
    ``initializer_range``, bias 0), from torch's seeded generator. Not ``model._init_weights``: transformers 5's
    init functions skip every weight a checkpoint loaded (``_is_hf_initialized``), so it leaves a loaded head as
    it was."""
    std = float(getattr(model.config, "initializer_range", 0.02) or 0.02)
    with torch.no_grad():
        linear.weight.normal_(0.0, std)  # (C, H)
        if linear.bias is not None:
            linear.bias.zero_()


def longest_input(tokenizer, model) -> int:
    """The most tokens the model reads: the tokenizer's limit (512 when it has none) within the positions."""
    return int(min(tokenizer.model_max_length if tokenizer.model_max_length < 10**6 else 512,
                   model.config.max_position_embeddings))


def _encoded(tokenizer, texts: Sequence[str], pairs: Sequence[str] | None, rows: Sequence, max_length: int,
             multi_label: bool) -> _ListDataset:
    """Texts (and pairs) tokenized with their targets: class indices, or multi-hot rows of floats."""
    targets = [list(map(float, r)) for r in rows] if multi_label else list(map(int, rows))
    return _ListDataset(_tokenize(tokenizer, texts, pairs, max_length), targets)


def default_eval_every(n_train: int, config: TrainConfig, world_size: int) -> int:
    """About five evaluations a run, at least five steps apart."""
    steps_total = max(1, math.ceil(n_train / (config.batch_size * max(1, int(world_size)))) * config.epochs)
    return max(5, int(steps_total // 5))


def _metrics_of(multi_label: bool, label_names: list[str]) -> Callable:
    """The Trainer's ``compute_metrics``: accuracy, macro-F1 and ECE of an evaluation's logits."""

    def compute_metrics(p):
        scores = np.asarray(p.predictions)  # (N, C) logits
        preds = (scores > 0).astype(int) if multi_label else scores.argmax(-1)
        m = evaluate_predictions(p.label_ids, preds, label_names)
        ece = calibration_metrics(scores, p.label_ids, multi_label)["ece"]  # logged beside eval_loss (the NLL)
        return {"accuracy": m["accuracy"], "macro_f1": m["macro_f1"], "ece": ece}

    return compute_metrics


def training_arguments(config: TrainConfig, tmp_out: Path, evaluates: bool, eval_every: int, bf16: bool,
               multi_label: bool, features: bool = False) -> TrainingArguments:
    """The Trainer's arguments: ``config``'s schedule, length-grouped batches, no checkpoints, no reports.
    ``features``: rows hold the frozen bottom's output, which the model's forward does not take, so the Trainer
    must not drop it (``remove_unused_columns``)."""
    return TrainingArguments(
        output_dir=str(tmp_out),
        num_train_epochs=config.epochs,
        learning_rate=config.learning_rate,
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=max(config.batch_size, 64),
        warmup_steps=config.warmup_ratio,  # a float below 1 is a ratio of the total steps
        weight_decay=config.weight_decay,
        seed=config.seed,
        train_sampling_strategy="group_by_length",
        logging_steps=config.logging_steps,
        eval_strategy="steps" if evaluates else "no",
        eval_steps=eval_every if evaluates else None,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        bf16=bf16,
        dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
        label_smoothing_factor=0.0 if multi_label else config.label_smoothing,
        remove_unused_columns=not features,
    )


def fit_and_evaluate(model, tokenizer, args: TrainingArguments, config: TrainConfig, train_ds, eval_ds,
                     compute_metrics, reporter: ProgressReporter, keeper: BestKeeper, tmp_out: Path, collator=None,
                     feature_depth: int = 0):
    """(trainer, the train output): the training, then a last evaluation unless the last step had one; the
    work folder is removed when it fails. ``collator``: how examples are padded into a batch (default: a
    classifier's, ``DataCollatorWithPadding``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = ScaledLrTrainer(
            head_lr_scale=config.head_lr_scale,
            layer_lr_decay=config.layer_lr_decay,
            feature_depth=feature_depth,
            model=model,
            args=args,
            train_dataset=train_ds,
            eval_dataset=eval_ds,
            data_collator=collator if collator is not None else DataCollatorWithPadding(tokenizer),
            compute_metrics=compute_metrics,
            callbacks=[reporter, keeper],
        )
        trainer.remove_callback(PrinterCallback)  # progress goes through ``progress`` instead
        try:
            out = trainer.train()
            if eval_ds is not None and keeper.last_step != trainer.state.global_step:
                trainer.evaluate()  # the final weights compete with the best evaluation so far
        except torch.OutOfMemoryError as exc:
            shutil.rmtree(tmp_out, ignore_errors=True)
            raise TrainingError("Out of memory while training: lower the batch size or max length.") from exc
        except BaseException:  # a cancel, a kill signal turned exception, a failure: no checkpoints left behind
            shutil.rmtree(tmp_out, ignore_errors=True)
            raise
    return trainer, out


def run_info(trainer, out, args: TrainingArguments, reporter: ProgressReporter, keeper: BestKeeper,
          config: TrainConfig, *, n_train: int, seconds: float, max_length: int, bf16: bool, eval_every: int) -> dict:
    """``train_classifier``'s info: the run's numbers, how it ended and the settings it used."""
    steps_done = trainer.state.global_step
    return {
        "max_length": max_length,
        "train_seconds": seconds,
        "train_examples": n_train,
        "examples_per_second": out.metrics.get("train_samples_per_second", n_train * config.epochs / seconds),
        "train_loss": out.metrics.get("train_loss"),
        "log_history": trainer.state.log_history,
        "steps": steps_done,
        "max_steps": trainer.state.max_steps,
        "cancelled": reporter.cancelled,
        "stopped_early": (not reporter.cancelled) and steps_done < trainer.state.max_steps,
        "best_step": keeper.best_step,
        "best_metric": keeper.best,
        "best_val_loss": keeper.best_loss,
        "stopped_by": keeper.stopped_by,
        "is_main_process": trainer.is_world_process_zero(),
        "world_size": args.world_size,
        "config": asdict(config) | {"max_length": max_length, "bf16": bf16, "eval_every": eval_every},
    }


def leave_process_group(args: TrainingArguments) -> None:
    """Shut this process's distributed group down once training's collectives are over."""
    if args.world_size > 1 and torch.distributed.is_initialized():
        # Training's collectives are over (what follows on the main process is local). Left to the interpreter's
        # exit, gloo's threads were torn down unjoined ("terminate called without an active exception", SIGABRT)
        # in about 1 of 10 two-process runs: the process that returns first now shuts its group down itself.
        torch.distributed.barrier()  # both processes leave training together, then each shuts its group down
        torch.distributed.destroy_process_group()


def family_type(path: Path) -> str | None:
    try:
        return json.loads((Path(path) / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError):
        return None


def check_trainable(path: Path) -> None:
    """Raise InputError unless the model in ``path`` is of a family this tool handles
    (``families.py``), before anything loads it as a classifier."""
    model_type = family_type(path)
    if model_type is not None and model_type not in SUPPORTED_MODEL_TYPES:
        raise InputError(
            f"Fine-tuning starts from an encoder of the BERT family (model_type one of "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}); this base is a {model_type!r} model."
        )


def trained_labels(path: Path, head=SEQUENCE_CLASSIFICATION) -> tuple[str, ...] | None:
    """The labels of a base that already carries ``head`` (its classes, or a tagger's tags), in id order; else
    None (a bare encoder, another head)."""
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not head.trained(cfg.get("architectures")):
        return None
    id2label = cfg.get("id2label") or {}
    return tuple(str(id2label[k]) for k in sorted(id2label, key=int))


def atomic_save(model, tokenizer, dest: Path, extra_files: dict[str, str] | None = None) -> Path:
    """Write a Hugging Face model folder (safetensors) to a temporary sibling and rename it into
    place. An existing folder at ``dest`` is replaced only after the new one is complete."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".tmp-{dest.name}-{uuid.uuid4().hex[:8]}"
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
        old = None
        if dest.exists():
            old = dest.parent / f".old-{dest.name}-{uuid.uuid4().hex[:8]}"
            os.replace(dest, old)
        os.replace(tmp, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def metrics_tables(accuracy: float, macro_f1: float, per_class: dict) -> str:
    """The metrics section of a model card: accuracy and macro-F1, then precision, recall, F1 and
    support per class (Markdown tables)."""
    rows = "\n".join(
        f"| {lab} | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} | {m['support']} |"
        for lab, m in per_class.items()
    )
    return f"""| metric | value |
|---|---|
| accuracy | **{accuracy:.4f}** |
| macro-F1 | **{macro_f1:.4f}** |

| class | precision | recall | F1 | support |
|---|---|---|---|---|
{rows}"""
