"""Fine-tuning as one service: a labelled table in, registered model folders (models/runs/<name>) out.

The web app's Fine-tune tab and the ``finetune`` command both run exactly this chain::

    plan = plan_finetune(read_table(path), mode="both")   # columns (guessed), checks, datasets, settings
    results = run_plan(plan, progress=print, cancel=ev)   # train, evaluate, judge, save atomically
    job = FinetuneJob(plan).start()                       # the same in a worker thread (the web app)
    push_run(results[-1].name, "me/model", token)          # optional: upload to the Hugging Face Hub

Two modes share the data, the split and the metrics, so they can be compared side by side:
- ``full``: every parameter trained as the family's ``*ForSequenceClassification`` trains (HF Trainer,
  see training.py);
- ``probe``: the encoder frozen, a scikit-learn logistic regression fitted on the pooled [CLS]
  features tanh(W h_CLS + b). Its weights *are* a classification head, so a probe run is saved
  as an ordinary ``*ForSequenceClassification`` folder that the explorer opens like any other.
``both`` runs the probe, then full fine-tuning, on the same split.

Settings left blank (epochs, learning rate, batch size, warm-up, early stopping) are chosen from
the data size and the base model (``auto_config``). Every run ends with a ``Verdict``: is the model
clearly better than always answering the majority class, and than the frozen-encoder probe, and
did the training loss fall? If not, it says so in plain words with what to change.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from .catalog import ENCODER, RUN_INFO, load_run_info
from .config import get_settings
from .data import (
    Dataset,
    Table,
    guess_columns,
    review_columns,
    split_dataset,
    validation_dataset,
)
from .data import build_dataset as _build_dataset
from .errors import CancelledError, DataError, InputError, TrainingError
from .families import family_of
from .training import (
    ECE_BINS,
    TrainConfig,
    atomic_save,
    calibration_metrics,
    check_trainable,
    evaluate_predictions,
    metrics_tables,
    train_classifier,
)

__all__ = [
    "DEFAULT_BASE",
    "MODES",
    "RUN_MODES",
    "FinetuneJob",
    "FinetunePlan",
    "RunResult",
    "Verdict",
    "auto_config",
    "base_model_path",
    "judge",
    "list_runs",
    "load_run_info",
    "majority_baseline",
    "plan_finetune",
    "push_run",
    "review_columns",
    "run_finetune",
    "run_folder",
    "run_plan",
    "valid_run_name",
    "zip_run",
]

RUN_MODES = ("full", "probe")
MODES = ("full", "probe", "both")  # "both": probe, then full, on the same split
# The base a fine-tune starts from unless told otherwise (tab and CLI alike): the bare encoder is
# always installed (no build needed) and carries no task of its own, so a new task's classes start
# from general-purpose features instead of a sentiment model's.
DEFAULT_BASE = ENCODER
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HUB_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
MAX_MISCLASSIFIED = 500
PROBE_REFERENCE_ROWS = 5000  # training rows the probe reference of a full run is fitted on (bounds its cost)

# Automatic settings (``auto_config``): a proven table, not a search. Small data gets more passes
# (about AUTO_EXAMPLES examples seen, at most AUTO_MAX_EPOCHS epochs, so the cap in examples seen
# is AUTO_MAX_EPOCHS x the rows below 1,000 rows) with early stopping on the validation macro-F1 and
# loss; small encoders (MiniLM, hidden <= 384) take a larger learning rate than bert-base-sized
# ones (BERT paper's 2e-5..5e-5 for hidden 768). The cap was 10 epochs until issue 22: on 475 rows
# the validation loss rose from epoch 2 on while the training loss fell to 0.007 (bench/finetune_defaults.py).
AUTO_EXAMPLES = 5000
AUTO_MAX_EPOCHS = 5
AUTO_LR = ((384, 1e-4), (512, 5e-5), (10**9, 3e-5))  # (largest hidden size, learning rate)
AUTO_WARMUP = 0.1
AUTO_EVALS = 10  # validation evaluations per run (early stopping and best-weights selection)
AUTO_PATIENCE = 3

# Verdict thresholds: "clearly better" than always answering the majority class means this much
# macro-F1 above it; a loss that ends above LOSS_FLAT x its start "stayed flat".
MAJORITY_MARGIN = 0.10
LOSS_FLAT = 0.85
UNIFORM_MARGIN = 0.15  # mean top probability within this of 1/C: predictions are near uniform


@dataclass(frozen=True)
class Verdict:
    """Did the run learn? ``status`` is learned, weak (better than the majority class, but not than
    the probe, or the loss barely moved) or not_learned; ``message`` says it in plain words and
    ``suggestions`` what to change."""

    status: str
    message: str
    suggestions: tuple[str, ...]
    majority: dict  # class, accuracy, macro_f1 of always answering the training set's most common class
    probe: dict | None = None  # accuracy, macro_f1 of the frozen-encoder probe on the same split (full runs)
    loss_start: float | None = None
    loss_end: float | None = None
    mean_confidence: float | None = None  # mean top probability on the validation rows
    val_nll: float | None = None  # mean cross-entropy of the true labels on the validation rows (kept checkpoint)
    ece: float | None = None  # expected calibration error of the top probability, 15 equal-width bins

    @property
    def learned(self) -> bool:
        return self.status == "learned"


@dataclass(frozen=True)
class RunResult:
    name: str  # registered name, "runs/<name>"
    path: Path
    mode: str
    base: str
    metrics: dict  # accuracy, macro_f1, per_class, confusion_matrix, n, mean_confidence, val_nll, ece
    misclassified: list[dict]  # validation rows the model gets wrong: row, text, pair, true, predicted, confidence
    labels: tuple[str, ...]
    log_history: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    examples_per_second: float | None = None
    data_hash: str = ""
    cancelled: bool = False
    stopped_early: bool = False
    stopped_by: str | None = None  # "metric" (macro-F1) or "loss" (validation loss) when stopped early
    notices: tuple[str, ...] = ()
    verdict: Verdict | None = None
    hyperparameters: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = str(self.path)
        if self.verdict is not None:
            d["verdict"]["learned"] = self.verdict.learned
        return d


@dataclass(frozen=True, eq=False)
class FinetunePlan:
    """Everything a run needs, checked: what ``plan_finetune`` returns and ``run_plan`` executes."""

    train: Dataset
    val: Dataset | None  # None: a stratified split of ``train`` (``val_fraction``, the config's seed)
    base: str
    modes: tuple[str, ...]  # ("full",), ("probe",) or ("probe", "full")
    names: tuple[str | None, ...]  # one per mode; None = automatic
    config: TrainConfig
    val_fraction: float
    source: str  # the training file's name, for the run card
    columns: tuple[str, str, str | None]  # text, label, pair
    notices: tuple[str, ...] = ()  # column guesses, read and validation-file notices
    warnings: tuple[str, ...] = ()  # the validation report's warnings (training goes on)
    auto: tuple[str, ...] = ()  # how each automatic setting was chosen
    allow_paths: bool = True  # ``base`` may be a folder
    owner: str | None = None  # public mode: the visitor's owner hash, saved with each run (visitors.py)


# --------------------------------------------------------------------------- names and folders
def valid_run_name(name: str) -> str:
    name = (name or "").strip()
    if not _RUN_NAME.match(name) or ".." in name:
        raise InputError(
            f"Run name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."
        )
    return name


def base_model_path(base: str, allow_paths: bool = True) -> Path:
    """A folder with the base model's safetensors: a registered name, a folder or a Hub id.
    ``encoder`` is the bare pip-shipped MiniLM-L6 encoder the default model starts from (unless a
    ``models/encoder`` folder takes the name: the registry resolves shipped names, as it lists them).
    Raises InputError for a base of a family that cannot be fine-tuned (``training.check_trainable``)."""
    from .registry import model_folder

    path = model_folder(base, allow_paths=allow_paths)
    check_trainable(path)
    return path


def _runs_dir() -> Path:
    return get_settings().models_dir / "runs"


def run_folder(run: str | None) -> Path:
    """The folder of a saved run, by its registered name ``runs/<name>`` (confined to models/runs)."""
    run = (run or "").strip()
    if not run.startswith("runs/"):
        raise InputError("Choose a run from the list (runs/<name>).")
    name = valid_run_name(run.split("/", 1)[1])
    path = _runs_dir() / name
    if not (path / "config.json").is_file():
        from .errors import ModelNotFoundError

        raise ModelNotFoundError(f"The run {run!r} is not saved (any more). Refresh the runs list.")
    return path


def zip_run(run: str | None) -> Path:
    """The run's model folder as a .zip in a fresh temporary folder."""
    path = run_folder(run)
    d = tempfile.mkdtemp(prefix="bertviz-zip-")
    return Path(shutil.make_archive(os.path.join(d, path.name), "zip", root_dir=path))


def push_run(run: str | None, repo_id: str | None, token: str | None, private: bool = True) -> str:
    """Upload a run folder to a Hub model repository; returns the commit URL. The token goes to
    huggingface_hub only: never logged, never stored, scrubbed from any error message. ``run.json``
    (it holds validation texts) stays behind."""
    path = run_folder(run)
    repo_id = (repo_id or "").strip()
    token = (token or "").strip()
    if not _HUB_REPO.match(repo_id) or ".." in repo_id:
        raise InputError("The repository id must look like owner/name (letters, digits, . _ -).")
    if not token:
        raise InputError("Give a Hugging Face write token (huggingface.co/settings/tokens) to push.")
    try:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        api.create_repo(repo_id, private=bool(private), exist_ok=True, repo_type="model")
        info = api.upload_folder(folder_path=str(path), repo_id=repo_id, repo_type="model",
                                 ignore_patterns=[RUN_INFO], commit_message=f"Upload {run} from bertviz-app")
    except Exception as exc:  # noqa: BLE001 - network/auth errors become one clear line, token scrubbed
        first = (str(exc).splitlines() or [type(exc).__name__])[0].replace(token, "***")[:300]
        raise InputError(f"The push to {repo_id!r} failed: {first}") from None
    return getattr(info, "commit_url", None) or f"https://huggingface.co/{repo_id}"


def _free_name(stem: str) -> str:
    runs = _runs_dir()
    name, k = stem, 2
    while (runs / name).exists():
        name, k = f"{stem}-{k}", k + 1
    return name


def _targets(ds: Dataset):
    return ds.multi_hot().tolist() if ds.multi_label else list(ds.labels)


def run_finetune(
    train: Dataset,
    val: Dataset | None = None,
    base: str = "default",
    mode: str = "full",
    name: str | None = None,
    config: TrainConfig | None = None,
    val_fraction: float = 0.2,
    source: str = "",
    progress: Callable[[dict], None] | None = None,
    cancel: threading.Event | None = None,
    probe: dict | None = None,
    allow_paths: bool = True,
    owner: str | None = None,
) -> RunResult:
    """Train one mode, evaluate on the validation split, judge and save ``models/runs/<name>`` atomically.

    Without ``val`` a stratified split of ``train`` (fixed seed) is used. ``cancel.set()`` stops
    within a step; the best weights so far are still evaluated and saved (``cancelled=True``).
    A full run is judged against the frozen-encoder probe on the same split: ``probe`` (its
    metrics, e.g. from a probe run just before) or else a probe fitted here on at most
    PROBE_REFERENCE_ROWS training rows (not saved). Under ``accelerate launch`` only the main
    process saves; the others return ``None``."""
    if mode not in RUN_MODES:
        raise InputError(f"Unknown mode {mode!r}: choose full or probe (or both, through plan_finetune).")
    config = config or TrainConfig()
    if name is not None:
        name = valid_run_name(name)
        if (_runs_dir() / name).exists():
            raise InputError(f"A run named {name!r} already exists: choose another name (runs are never overwritten).")
    notices: list[str] = []
    # The hash of the data as given (before any split) identifies "the same data" across runs.
    data_hash = train.data_hash if val is None else f"{train.data_hash}+{val.data_hash}"
    if val is None:
        train, val, split_notices = split_dataset(train, val_fraction=val_fraction, seed=config.seed)
        notices.extend(split_notices)
    elif tuple(val.label_names) != tuple(train.label_names):
        raise DataError(
            "The validation data's classes are not indexed like the training data's: build it with "
            "data.validation_dataset(train, table, ...)."
        )
    if len(train) < 2 or len(val) < 1:
        raise DataError(f"Too little data: {len(train)} training and {len(val)} validation rows. Add rows.")
    base_path = base_model_path(base, allow_paths=allow_paths)
    started = time.time()
    if mode == "full":
        model, tokenizer, info = train_classifier(
            base_path, train.label_names, train.texts, _targets(train), val.texts, _targets(val),
            train.pairs, val.pairs, config=config, multi_label=train.multi_label, progress=progress, cancel=cancel,
        )
    else:
        model, tokenizer, info = _train_probe(base_path, train, config, progress, cancel)
    if not info.get("is_main_process", True):
        return None  # type: ignore[return-value]
    metrics, wrong = _evaluate(model, tokenizer, val, info["max_length"])
    seconds = time.time() - started
    if mode == "full" and probe is None and info.get("is_main_process", True) and not info.get("cancelled"):
        try:
            probe = _probe_reference(base_path, train, val, config, cancel)
        except CancelledError:  # cancelled now: save the trained weights, judged without the probe
            probe = None
    verdict = judge(metrics, majority_baseline(train, val), mode=mode, log_history=info.get("log_history", []),
                    probe=probe, hyperparameters=info["config"], n_train=len(train))
    name = name or _free_name(f"{mode}-{data_hash[:8]}")
    dest = _runs_dir() / name
    run_info = {
        "name": f"runs/{name}",
        "mode": mode,
        "base": base,
        "source": source,
        "data_hash": data_hash,
        "train_rows": len(train),
        "val_rows": len(val),
        "labels": list(train.label_names),
        "multi_label": train.multi_label,
        "metrics": metrics,
        "misclassified": wrong[:MAX_MISCLASSIFIED],
        "hyperparameters": info["config"],
        "seconds": seconds,
        "examples_per_second": info.get("examples_per_second"),
        "cancelled": bool(info.get("cancelled")),
        "stopped_early": bool(info.get("stopped_early")),
        "steps": info.get("steps"),
        "max_steps": info.get("max_steps"),
        "best_step": info.get("best_step"),
        "stopped_by": info.get("stopped_by"),  # metric or loss: which signal ended it early
        "world_size": info.get("world_size", 1),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "notices": notices,
        "verdict": asdict(verdict) | {"learned": verdict.learned},
    }
    if owner is not None:  # public mode: whose run this is (a hash; see visitors.py)
        run_info["owner"] = owner
    files = {
        RUN_INFO: json.dumps(run_info, indent=2, default=str),
        "training_log.json": json.dumps(info.get("log_history", []), indent=2, default=str),
        "README.md": _run_card(run_info),
    }
    try:
        atomic_save(model, tokenizer, dest, files)
    except OSError as exc:
        raise TrainingError(f"Could not save the run to {dest}: {exc}. Earlier models are untouched.") from exc
    from .registry import clear_cache  # a re-used name must not serve stale weights

    clear_cache()
    return RunResult(
        name=f"runs/{name}", path=dest, mode=mode, base=base, metrics=metrics, misclassified=wrong,
        labels=tuple(train.label_names), log_history=info.get("log_history", []), seconds=seconds,
        examples_per_second=info.get("examples_per_second"), data_hash=data_hash,
        cancelled=bool(info.get("cancelled")), stopped_early=bool(info.get("stopped_early")),
        stopped_by=info.get("stopped_by"), notices=tuple(notices),
        verdict=verdict, hyperparameters=dict(info["config"]),
    )


def _pooled_features(model, tokenizer, texts, pairs, max_length: int, cancel=None, batch_size: int = 64) -> np.ndarray:
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
            enc = tokenizer([texts[i] for i in idx], [pairs[i] for i in idx] if pairs else None,
                            truncation=True, max_length=max_length, padding=True, return_tensors="pt").to(model.device)
            hidden = fam.base(model)(**fam.inputs(**enc)).last_hidden_state  # (B, T, D)
            out[idx] = fam.features(model, hidden).float().cpu().numpy()  # (B, D)
    return out


def _train_probe(base_path: Path, train: Dataset, config: TrainConfig, progress, cancel):
    """Frozen encoder + logistic regression on the pooled [CLS] features (what the head's last
    linear layer reads), written into that layer (exactly the same function)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers import logging as hf_logging

    from .training import choose_max_length

    started = time.time()
    names = train.label_names
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(base_path, use_fast=True, trust_remote_code=False)
    model = AutoModelForSequenceClassification.from_pretrained(
        base_path, num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)},
        problem_type="multi_label_classification" if train.multi_label else "single_label_classification",
        ignore_mismatched_sizes=True, use_safetensors=True, trust_remote_code=False,
    ).eval()
    from .registry import resolve_device

    model.to(resolve_device(get_settings().device))
    model_max = int(min(tokenizer.model_max_length if tokenizer.model_max_length < 10**6 else 512, model.config.max_position_embeddings))
    max_length = config.max_length or choose_max_length(tokenizer, train.texts, train.pairs, model_max)
    if progress:
        progress({"step": 0, "max_steps": 2, "elapsed": 0.0, "eta": None, "logs": {"stage": "features"}})
    x = _pooled_features(model, tokenizer, list(train.texts), list(train.pairs) if train.pairs else None, max_length, cancel)
    if progress:
        progress({"step": 1, "max_steps": 2, "elapsed": time.time() - started, "eta": None, "logs": {"stage": "logistic regression"}})
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
        "config": {"mode": "probe", "features": "pooled [CLS] (tanh(W h + b))", "classifier": "LogisticRegression(C=1.0)",
                   "max_length": max_length, "seed": config.seed},
        "is_main_process": True,
    }


def _evaluate(model, tokenizer, val: Dataset, max_length: int) -> tuple[dict, list[dict]]:
    """Metrics on the validation split and the rows the model gets wrong (most confident first).
    Besides accuracy and macro-F1: ``val_nll`` (mean cross-entropy of the true labels) and ``ece``
    (expected calibration error of the top probability, 15 equal-width bins): is it as sure as it is right?"""
    order = np.argsort([len(t) for t in val.texts])
    probs = np.empty((len(val), len(val.label_names)), dtype=np.float32)
    logits_all = np.empty((len(val), len(val.label_names)), dtype=np.float32)
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(val), 64):
            idx = order[start : start + 64]
            enc = tokenizer([val.texts[i] for i in idx], [val.pairs[i] for i in idx] if val.pairs else None,
                            truncation=True, max_length=max_length, padding=True, return_tensors="pt").to(model.device)
            logits = model(**enc).logits.float()  # (B, C)
            logits_all[idx] = logits.cpu().numpy()
            probs[idx] = (torch.sigmoid(logits) if val.multi_label else torch.softmax(logits, -1)).cpu().numpy()
    names = val.label_names
    if val.multi_label:
        pred = (probs >= 0.5).astype(int)  # (N, C)
        truth = val.multi_hot()
        metrics = evaluate_predictions(truth, pred, names)
        wrong_idx = np.where((pred != truth).any(axis=1))[0]
        fmt = lambda row: "|".join(names[j] for j in np.where(row)[0]) or "(none)"
        wrong = [{"row": val.source_rows[i], "text": val.texts[i], "pair": val.pairs[i] if val.pairs else None,
                  "true": fmt(truth[i]), "predicted": fmt(pred[i]), "confidence": float(np.abs(probs[i] - 0.5).max() + 0.5)}
                 for i in wrong_idx]
    else:
        pred = probs.argmax(-1)
        truth = np.asarray(val.labels)
        metrics = evaluate_predictions(truth, pred, names)
        wrong = [{"row": val.source_rows[i], "text": val.texts[i], "pair": val.pairs[i] if val.pairs else None,
                  "true": names[truth[i]], "predicted": names[pred[i]], "confidence": float(probs[i, pred[i]])}
                 for i in np.where(pred != truth)[0]]
    wrong.sort(key=lambda r: -r["confidence"])
    top = np.abs(probs - 0.5).max(-1) + 0.5 if val.multi_label else probs.max(-1)  # (N,)
    metrics["mean_confidence"] = float(top.mean()) if len(top) else None
    metrics.update(calibration_metrics(logits_all, truth, multi_label=val.multi_label))
    return metrics, wrong


def list_runs() -> list[dict]:
    """Saved runs (newest first) with their run.json; half-written folders are ignored."""
    from .registry import list_models

    out = []
    for m in list_models():
        if m["name"].startswith("runs/"):
            info = load_run_info(Path(m["path"]))
            if info is not None:
                out.append(info)
    return out


def _calibration_line(m: dict) -> str:
    if m.get("val_nll") is None or m.get("ece") is None:
        return ""
    return (f"\nValidation loss (NLL, mean cross-entropy of the true labels) {m['val_nll']:.4f}; expected calibration "
            f"error of the top probability ({ECE_BINS} equal-width bins) {m['ece']:.4f}.\n")


def _run_card(r: dict) -> str:
    m = r["metrics"]
    hp = "\n".join(f"- `{k}`: {v}" for k, v in r["hyperparameters"].items())
    status = "cancelled; best weights so far" if r["cancelled"] else ("stopped early; best weights" if r["stopped_early"] else "complete")
    return f"""---
library_name: transformers
pipeline_tag: text-classification
---
# {r['name']}

Fine-tuned with bertviz-app ({r['mode']} mode) from `{r['base']}` on `{r['source'] or 'uploaded data'}`
(data sha256 prefix `{r['data_hash']}`), {r['train_rows']:,} training / {r['val_rows']:,} validation rows.
Classes: {', '.join(r['labels'])}{' (multi-label)' if r['multi_label'] else ''}. Run: {status}, {r['seconds']:.0f} s.

## Validation metrics
{metrics_tables(m['accuracy'], m['macro_f1'], m['per_class'])}
{_calibration_line(m)}
## Hyperparameters
{hp}

The training log is in `training_log.json`, the misclassified validation rows in `run.json`.
"""


# --------------------------------------------------------------------------- verdict
def majority_baseline(train: Dataset, val: Dataset) -> dict:
    """Validation metrics of always answering the training set's most common class (multi-label:
    each class that more than half the training rows carry)."""
    if train.multi_label:
        prevalence = train.multi_hot().mean(axis=0)  # (C,)
        guess = (prevalence > 0.5).astype(int)
        truth = val.multi_hot()  # (N, C)
        m = evaluate_predictions(truth, np.tile(guess, (len(val), 1)), val.label_names)
        cls = "|".join(n for n, g in zip(train.label_names, guess) if g) or "(none)"
    else:
        counts = np.bincount(np.asarray(train.labels), minlength=len(train.label_names))
        k = int(counts.argmax())
        m = evaluate_predictions(np.asarray(val.labels), np.full(len(val), k), val.label_names)
        cls = train.label_names[k]
    return {"class": cls, "accuracy": m["accuracy"], "macro_f1": m["macro_f1"]}


def _loss_ends(log_history) -> tuple[float | None, float | None]:
    """The first logged training loss and the mean of the last few (a third of the log, at most 3)."""
    losses = [float(e["loss"]) for e in log_history or () if "loss" in e and e.get("loss") is not None]
    if len(losses) < 2:
        return (losses[0] if losses else None), None
    tail = losses[-max(1, min(3, len(losses) // 3)):]
    return losses[0], float(np.mean(tail))


def judge(metrics: dict, majority: dict, *, mode: str, log_history=(), probe: dict | None = None,
          hyperparameters: dict | None = None, n_train: int = 0) -> Verdict:
    """Did the run learn? Compares the validation metrics with the majority-class baseline (beyond
    two standard errors of its accuracy on this many rows, at least MAJORITY_MARGIN), with the
    frozen-encoder probe (full runs), and looks at the training loss and the confidence."""
    hp = hyperparameters or {}
    n = max(1, int(metrics.get("n") or 0))
    acc, f1 = float(metrics["accuracy"]), float(metrics["macro_f1"])
    maj_acc = float(majority["accuracy"])
    band = max(MAJORITY_MARGIN, 2 * math.sqrt(maj_acc * (1 - maj_acc) / n))
    beats_majority = acc >= min(1.0, maj_acc + band) and f1 > float(majority["macro_f1"])
    loss_start, loss_end = _loss_ends(log_history) if mode == "full" else (None, None)
    flat = loss_start is not None and loss_end is not None and loss_end > LOSS_FLAT * loss_start
    n_classes = len(metrics.get("per_class") or {}) or 2
    conf = metrics.get("mean_confidence")
    uniform = (mode == "full" and conf is not None and metrics.get("confusion_matrix") is not None
               and conf < 1 / n_classes + UNIFORM_MARGIN)
    beats_probe = None if probe is None else f1 >= float(probe["macro_f1"]) - 0.005
    lr, epochs = hp.get("learning_rate"), hp.get("epochs")
    loss_txt = (f" The training loss went from {loss_start:.3f} to {loss_end:.3f}"
                + (" (flat)." if flat else ".")) if loss_end is not None else ""
    nll, ece = metrics.get("val_nll"), metrics.get("ece")
    calib_txt = ""
    if nll is not None and ece is not None:  # how sure it is against how often it is right
        calib_txt = (f" Validation loss (NLL) {float(nll):.3f}; calibration error (ECE, {ECE_BINS} bins) {float(ece):.3f}"
                     + (f", mean top probability {float(conf):.0%}." if conf is not None else "."))
    base_txt = (f"validation accuracy {acc:.1%} (macro-F1 {f1:.3f}) against {maj_acc:.1%} for always answering "
                f"{majority['class']!r}")
    more_rows = f"Add labelled rows: {n_train:,} training rows is little; aim for 100+ per class." if n_train < 100 * n_classes else None
    tune = []
    if mode == "full":
        tune.append("If you set epochs or the learning rate yourself, leave them blank: they are then chosen from the "
                    "data size.")
        if lr is not None:
            tune.append(f"Train longer or faster: more epochs (now {epochs}) or a larger learning rate (now {lr:g}; "
                        f"try {min(lr * 3, 3e-4):.0e}).")
    suggestions: list[str]
    if not beats_majority:
        status = "not_learned"
        message = (f"The model has not learned: {base_txt}, which is within what chance gives on {n} validation "
                   f"rows.{loss_txt}")
        suggestions = tune + ["Check the labels: do the texts really carry them, and are they consistent?"]
        probe_failed = probe is not None and float(probe["accuracy"]) < min(1.0, maj_acc + band)
        if probe_failed:
            message += " The frozen-encoder probe did not beat it either, so the labels may not follow from the texts."
        elif mode == "full":
            suggestions.append("Try probe mode (frozen encoder + logistic regression): it needs less data.")
    elif mode == "full" and (flat or uniform):
        status = "weak"
        why = []
        if flat:
            why.append(f"the training loss stayed flat ({loss_start:.3f} to {loss_end:.3f})")
        if uniform:
            why.append(f"its predictions are near uniform (mean top probability {conf:.0%} for {n_classes} classes)")
        message = f"The model barely learned: {' and '.join(why)}, although {base_txt}."
        suggestions = tune + ["Compare with the probe mode on the same data (mode: both)."]
    elif beats_probe is False:
        status = "weak"
        message = (f"Fine-tuning did not beat the frozen-encoder probe: macro-F1 {f1:.3f} against the probe's "
                   f"{float(probe['macro_f1']):.3f} on the same split.{loss_txt}")
        suggestions = ["Use the probe run for now (mode: probe or both).", *tune]
    else:
        status = "learned"
        vs_probe = f", and the frozen-encoder probe's macro-F1 {float(probe['macro_f1']):.3f}" if probe else ""
        message = f"The model learned: {base_txt}{vs_probe}.{loss_txt}"
        suggestions = []
    message += calib_txt
    if status != "learned" and more_rows:
        suggestions.append(more_rows)
    return Verdict(status=status, message=message, suggestions=tuple(suggestions), majority=dict(majority),
                   probe=None if probe is None else {k: float(probe[k]) for k in ("accuracy", "macro_f1")},
                   loss_start=loss_start, loss_end=loss_end, mean_confidence=conf,
                   val_nll=None if nll is None else float(nll), ece=None if ece is None else float(ece))


def _probe_reference(base_path: Path, train: Dataset, val: Dataset, config: TrainConfig, cancel) -> dict:
    """Validation accuracy and macro-F1 of the probe on this split (at most PROBE_REFERENCE_ROWS
    training rows, stratified), for judging a full run; nothing is saved."""
    if len(train) > PROBE_REFERENCE_ROWS:
        train, _, _ = split_dataset(train, val_fraction=1 - PROBE_REFERENCE_ROWS / len(train), seed=config.seed)
    model, tokenizer, info = _train_probe(base_path, train, config, None, cancel)
    metrics, _ = _evaluate(model, tokenizer, val, info["max_length"])
    return {"accuracy": metrics["accuracy"], "macro_f1": metrics["macro_f1"]}


# --------------------------------------------------------------------------- automatic settings
def _hidden_size(base_path: Path) -> int:
    try:
        return int(json.loads((Path(base_path) / "config.json").read_text(encoding="utf-8"))["hidden_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return 768


def auto_config(n_train: int, hidden_size: int = 384, *, epochs: float | None = None, learning_rate: float | None = None,
                batch_size: int | None = None, warmup_ratio: float | None = None, patience: int | None = None,
                max_length: int | None = None, seed: int = 42) -> tuple[TrainConfig, tuple[str, ...]]:
    """A TrainConfig for ``n_train`` training rows: given values are kept, blank (None) ones come
    from a proven table (see AUTO_*). Returns the config and one line per automatic choice."""
    auto: list[str] = []
    n = max(1, int(n_train))
    if batch_size is None:
        batch_size = 16 if n < 2000 else 32
        auto.append(f"batch size {batch_size} ({'small' if n < 2000 else 'larger'} data: {n:,} training rows)")
    if epochs is None:
        epochs = float(min(AUTO_MAX_EPOCHS, max(1, math.ceil(AUTO_EXAMPLES / n))))
        why = (f"small data gets at most {AUTO_MAX_EPOCHS} passes: it overfits beyond that" if epochs >= AUTO_MAX_EPOCHS
               else f"the aim is about {AUTO_EXAMPLES:,}, at least one pass")
        auto.append(f"{epochs:g} epoch{'s' if epochs != 1 else ''} at most ({int(epochs * n):,} examples seen for "
                    f"{n:,} training rows; {why}; early stopping ends it sooner)")
    if learning_rate is None:
        learning_rate = next(lr for h, lr in AUTO_LR if hidden_size <= h)
        auto.append(f"learning rate {learning_rate:g} (encoder width {hidden_size})")
    if warmup_ratio is None:
        warmup_ratio = AUTO_WARMUP
        auto.append(f"warm-up {AUTO_WARMUP:.0%} of the steps")
    steps = max(1, math.ceil(n / batch_size) * epochs)
    eval_every = max(1, math.ceil(steps / AUTO_EVALS))
    if patience is None:
        patience = AUTO_PATIENCE
        auto.append(f"early stopping after {patience} evaluations without a higher validation macro-F1, or "
                    f"{patience} without a lower validation loss, whichever comes first "
                    f"(evaluated every {eval_every} steps); the checkpoint kept is the one with the best macro-F1 "
                    "(ties: lower validation loss)")
    config = TrainConfig(epochs=float(epochs), learning_rate=float(learning_rate), batch_size=int(batch_size),
                         max_length=max_length, warmup_ratio=float(warmup_ratio), seed=int(seed),
                         eval_every=int(eval_every), early_stopping_patience=int(patience),
                         logging_steps=max(1, min(50, int(steps // 30))))  # ~30 points on the loss curve
    return config, tuple(auto)


# --------------------------------------------------------------------------- plan -> run
def _val_columns(val_table: Table, text: str, label: str, pair: str | None) -> tuple[str, str, str | None, list[str]]:
    cols = set(val_table.columns)
    if {text, label} <= cols and (not pair or pair in cols):
        return text, label, pair, []
    g = guess_columns(val_table)  # the validation file names its columns differently: guess them
    vp = g.pair if pair else None
    if g.text is None or g.label is None or (pair and vp is None):
        raise DataError(f"The validation file {val_table.name!r} lacks the columns {text!r} and {label!r}"
                        + (f" and {pair!r}" if pair else "")
                        + " and they could not be guessed: give it the same header as the training file.")
    return g.text, g.label, vp, [f"validation file columns guessed: text {g.text!r}, label {g.label!r}"
                                 + (f", pair {vp!r}" if vp else "")]


def plan_finetune(
    table: Table | str | os.PathLike,
    *,
    text_column: str | None = None,
    label_column: str | None = None,
    pair_column: str | None = None,
    multi_label: bool = False,
    val_table: Table | str | os.PathLike | None = None,
    base: str | None = None,
    mode: str = "full",
    name: str | None = None,
    epochs: float | None = None,
    learning_rate: float | None = None,
    batch_size: int | None = None,
    warmup_ratio: float | None = None,
    max_length: int | None = None,
    seed: int = 42,
    patience: int | None = None,
    val_fraction: float = 0.2,
    allow_paths: bool | None = None,
) -> FinetunePlan:
    """Check everything a run needs before any training: the table (read from a path if need be),
    the columns (guessed when not given), the validation report (errors raise DataError with the
    fix), the datasets, the base model (downloaded if a Hub id), the run names and the settings
    (blank ones automatic). ``allow_paths`` (default: the setting) lets ``base`` be a folder."""
    from .data import read_table

    if mode not in MODES:
        raise InputError(f"Unknown mode {mode!r}: choose full, probe or both.")
    if not 0.05 <= float(val_fraction) <= 0.5:
        raise InputError(f"The validation fraction must be between 0.05 and 0.5 (got {val_fraction}).")
    notices: list[str] = []
    if not isinstance(table, Table):
        table = read_table(table)
    notices += list(table.notices)
    guess = guess_columns(table)
    text = text_column or guess.text
    label = label_column or guess.label
    pair = pair_column or None
    if text is None or label is None:
        raise DataError(f"Could not tell which column holds the {'text' if text is None else 'labels'}: choose the "
                        f"text and label columns (columns: {', '.join(table.columns)}).")
    if not (text_column and label_column):
        notices.append(f"columns guessed: text {text!r}, label {label!r}")
    report = review_columns(table, text, label, pair, multi_label)
    report.raise_if_blocking()
    train = _build_dataset(table, text, label, pair, bool(multi_label))
    val = None
    if val_table is not None:
        if not isinstance(val_table, Table):
            val_table = read_table(val_table)
        notices += [f"validation file: {n}" for n in val_table.notices]
        vt, vl, vp, guessed = _val_columns(val_table, text, label, pair)
        notices += guessed
        val, val_notices = validation_dataset(train, val_table, vt, vl, vp)
        notices += list(val_notices)
    allow = get_settings().allow_local_paths if allow_paths is None else bool(allow_paths)
    base = (base or "").strip() or DEFAULT_BASE
    base_path = base_model_path(base, allow_paths=allow)
    modes = ("probe", "full") if mode == "both" else (mode,)
    name = (name or "").strip()
    names: tuple[str | None, ...] = (
        (None,) * len(modes) if not name
        else (valid_run_name(name),) if len(modes) == 1
        else tuple(valid_run_name(f"{name}-{m}") for m in modes)
    )
    for n in names:
        if n is not None and (_runs_dir() / n).exists():
            raise InputError(f"A run named {n!r} already exists: choose another name (runs are never overwritten).")
    n_train = len(train) if val is not None else max(1, int(len(train) * (1 - float(val_fraction))))
    config, auto = auto_config(n_train, _hidden_size(base_path), epochs=epochs, learning_rate=learning_rate,
                               batch_size=batch_size, warmup_ratio=warmup_ratio, patience=patience,
                               max_length=max_length or None, seed=seed)
    return FinetunePlan(train=train, val=val, base=base, modes=modes, names=names, config=config,
                        val_fraction=float(val_fraction), source=table.name or "", columns=(text, label, pair),
                        notices=tuple(notices), warnings=tuple(p.message for p in report.warnings), auto=auto,
                        allow_paths=allow)


def run_plan(plan: FinetunePlan, progress: Callable[[dict], None] | None = None,
             cancel: threading.Event | None = None) -> list[RunResult]:
    """Run every mode of the plan on the same split, the probe first in "both" mode (its metrics
    then judge the full run). ``progress`` gets dicts with ``kind``: "mode" (mode, index, of),
    "progress" (a training event: step, max_steps, eta, logs...) and "result" (result).
    A cancel keeps the runs already saved; raises CancelledError when nothing was saved."""
    results: list[RunResult] = []
    probe = None
    emit = progress or (lambda e: None)
    for k, (mode, name) in enumerate(zip(plan.modes, plan.names), start=1):
        if cancel is not None and cancel.is_set():
            break
        emit({"kind": "mode", "mode": mode, "index": k, "of": len(plan.modes)})
        try:
            res = run_finetune(plan.train, plan.val, base=plan.base, mode=mode, name=name, config=plan.config,
                               val_fraction=plan.val_fraction, source=plan.source, cancel=cancel, probe=probe,
                               allow_paths=plan.allow_paths, owner=plan.owner,
                               progress=lambda e, m=mode, k=k: emit({"kind": "progress", "mode": m, "index": k,
                                                                       "of": len(plan.modes), **e}))
        except CancelledError:
            if results:
                break
            raise
        if res is None:  # a non-main process under accelerate launch
            return []
        if mode == "probe":
            probe = res.metrics
        results.append(res)
        emit({"kind": "result", "mode": mode, "index": k, "of": len(plan.modes), "result": res})
    if not results:
        raise CancelledError("Training was cancelled before anything was saved.")
    return results


class FinetuneJob:
    """``run_plan`` in a worker thread, for an event loop that must stay responsive (the web
    app): ``start()``, then iterate ``events()`` (None every ``timeout`` s while nothing
    happens, a dict per event, ending after the run), then read ``results`` / ``error``."""

    def __init__(self, plan: FinetunePlan, cancel: threading.Event | None = None):
        self.plan = plan
        self.cancel_event = cancel if cancel is not None else threading.Event()
        self.results: list[RunResult] = []
        self.error: BaseException | None = None
        self._events: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    def start(self) -> FinetuneJob:
        self._thread = threading.Thread(target=self._work, name="bertviz-finetune", daemon=True)
        self._thread.start()
        return self

    def _work(self) -> None:
        try:
            self.results = run_plan(self.plan, progress=self._events.put, cancel=self.cancel_event)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the job
            self.error = exc
        finally:
            self._events.put({"kind": "done"})

    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def events(self, timeout: float = 0.2) -> Iterator[dict | None]:
        while True:
            try:
                event = self._events.get(timeout=timeout)
            except queue.Empty:
                yield None
                continue
            if event.get("kind") == "done":
                return
            yield event

    def wait(self, timeout: float | None = None) -> list[RunResult]:
        """Block until the run ends; re-raise its error (a cancel with runs saved is not one)."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.results
