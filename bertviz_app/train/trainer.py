"""The Hugging Face ``Trainer`` as every fine-tune runs it (``training.fit_and_evaluate``): the callbacks that
report progress with an ETA and stop on cancel (``ProgressReporter``), the one that keeps the best evaluation and
stops early (``BestKeeper``), and the Trainer with per-layer learning rates and batches of frozen features
(``ScaledLrTrainer``)."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable

import torch
from transformers import Trainer, TrainerCallback

from ..models.eta import RateEta
from ..models.families import family_of
from ..models.forward import logits_from_depth
from ..models.heads import head_of

__all__ = ["BestKeeper", "ProgressReporter", "ScaledLrTrainer", "layer_count", "layer_of", "LOSS_REL_DELTA",
           "WARMUP_STEPS"]

Progress = Callable[[dict], None]
WARMUP_STEPS = 1  # the first step (the longest batch, kernels and allocator warming up) is kept out of the ETA's rate
LOSS_REL_DELTA = 1e-3  # a validation loss falling by less than 0.1% of its lowest has not fallen (early stopping)


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
