"""One training engine for every fine-tune (the default model's build and user runs), built on
the Hugging Face ``Trainer``: distribution comes from ``accelerate launch``/``torchrun`` with no
code of ours. Batches are grouped by length and padded per batch (about 2x the examples/s of
random order on a 2-core CPU), and the model folder is written to a temporary folder and renamed
into place, so a crash or kill never leaves a half-written model or touches earlier ones. The Trainer's
callbacks and per-layer learning rates live in ``trainer``, the classifier's metrics in ``classifier_metrics``."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
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
    TrainingArguments,
)
from transformers import logging as hf_logging

from ..errors import InputError, TrainingError
from ..models.families import SUPPORTED_MODEL_TYPES, family_of
from ..models.heads import SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION
from .classifier_metrics import calibration_metrics, evaluate_predictions
from .frozen_features import FEATURE_BUDGET, frozen_run
from .trainer import BestKeeper, ProgressReporter, ScaledLrTrainer, layer_count, layer_of

__all__ = ["TrainConfig", "TrainResult", "train_classifier", "atomic_save", "check_trainable", "choose_max_length",
           "SAVE_STEPS", "training_arguments", "fit_and_evaluate", "run_info", "default_eval_every",
           "leave_process_group", "train_keeping_best", "family_type", "trained_labels", "fresh_linear",
           "quiet_hub_logs", "longest_input", "RowsDataset", "load_for_training", "configure_model"]

log = logging.getLogger(__name__)
Progress = Callable[[dict], None]
STOP_RULES = ("metric_or_loss", "metric")  # TrainConfig.stop_on
SAVE_STEPS = 2  # a model folder's save, in training steps for the ETA (it writes the weights once; a step reads them)


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
