"""Fine-tuning runs: a labelled Dataset in, a registered model folder (models/runs/<name>) out.

Two modes share the data, the split and the metrics, so they can be compared side by side:
- ``full``: every parameter trained as ``BertForSequenceClassification`` trains (HF Trainer,
  see training.py);
- ``probe``: the encoder frozen, a scikit-learn logistic regression fitted on the pooled [CLS]
  features tanh(W h_CLS + b). Its weights *are* a classification head, so a probe run is saved
  as an ordinary ``BertForSequenceClassification`` folder that the explorer opens like any other.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .config import get_settings
from .data import Dataset, split_dataset
from .errors import CancelledError, DataError, InputError, TrainingError
from .training import TrainConfig, atomic_save, evaluate_predictions, metrics_tables, train_classifier

__all__ = ["MODES", "RunResult", "run_finetune", "list_runs", "load_run_info", "base_model_path", "valid_run_name"]

MODES = ("full", "probe")
RUN_INFO = "run.json"
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_MISCLASSIFIED = 500


@dataclass
class RunResult:
    name: str  # registered name, "runs/<name>"
    path: Path
    mode: str
    base: str
    metrics: dict  # accuracy, macro_f1, per_class, confusion_matrix, n
    misclassified: list[dict]  # validation rows the model gets wrong: row, text, pair, true, predicted, confidence
    labels: tuple[str, ...]
    log_history: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    examples_per_second: float | None = None
    data_hash: str = ""
    cancelled: bool = False
    stopped_early: bool = False
    notices: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


def valid_run_name(name: str) -> str:
    name = (name or "").strip()
    if not _RUN_NAME.match(name) or ".." in name:
        raise InputError(
            f"Run name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."
        )
    return name


def base_model_path(base: str) -> Path:
    """A folder with the base model's safetensors: a registered name, a folder or a Hub id.
    ``encoder`` is the bare pip-shipped MiniLM-L6 encoder the default model starts from."""
    if base == "encoder":
        from .default_model import encoder_path

        return encoder_path()
    from .registry import _check_folder, _download_from_hub, _resolve

    kind, where = _resolve(base)
    path = _download_from_hub(where) if kind == "hub" else Path(where)
    _check_folder(path)
    return path


def _runs_dir() -> Path:
    return get_settings().models_dir / "runs"


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
) -> RunResult:
    """Train, evaluate on the validation split and save ``models/runs/<name>`` atomically.

    Without ``val`` a stratified split of ``train`` (fixed seed) is used. ``cancel.set()`` stops
    within a step; the best weights so far are still evaluated and saved (``cancelled=True``).
    Under ``accelerate launch`` only the main process saves; the others return ``None``."""
    if mode not in MODES:
        raise InputError(f"Unknown mode {mode!r}: choose full or probe.")
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
    base_path = base_model_path(base)
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
        "world_size": info.get("world_size", 1),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "notices": notices,
    }
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
        cancelled=bool(info.get("cancelled")), stopped_early=bool(info.get("stopped_early")), notices=tuple(notices),
    )


def _pooled_features(model, tokenizer, texts, pairs, max_length: int, cancel=None, batch_size: int = 64) -> np.ndarray:
    """tanh(W h_CLS + b) for every text: (N, D) float32, length-sorted batches."""
    order = np.argsort([len(t) for t in texts])
    out = np.empty((len(texts), model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            if cancel is not None and cancel.is_set():
                raise CancelledError("Training was cancelled; nothing was saved.")
            idx = order[start : start + batch_size]
            enc = tokenizer([texts[i] for i in idx], [pairs[i] for i in idx] if pairs else None,
                            truncation=True, max_length=max_length, padding=True, return_tensors="pt").to(model.device)
            out[idx] = model.bert(**enc).pooler_output.float().cpu().numpy()  # (B, D)
    return out


def _train_probe(base_path: Path, train: Dataset, config: TrainConfig, progress, cancel):
    """Frozen encoder + logistic regression on the pooled [CLS] features, written into the
    classifier of a BertForSequenceClassification (exactly the same function)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from transformers import AutoTokenizer, BertForSequenceClassification
    from transformers import logging as hf_logging

    from .training import choose_max_length

    started = time.time()
    names = train.label_names
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(base_path, use_fast=True, trust_remote_code=False)
    model = BertForSequenceClassification.from_pretrained(
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
        model.classifier.weight.copy_(torch.as_tensor(w, dtype=model.classifier.weight.dtype))
        model.classifier.bias.copy_(torch.as_tensor(b, dtype=model.classifier.bias.dtype))
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
    """Metrics on the validation split and the rows the model gets wrong (most confident first)."""
    order = np.argsort([len(t) for t in val.texts])
    probs = np.empty((len(val), len(val.label_names)), dtype=np.float32)
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(val), 64):
            idx = order[start : start + 64]
            enc = tokenizer([val.texts[i] for i in idx], [val.pairs[i] for i in idx] if val.pairs else None,
                            truncation=True, max_length=max_length, padding=True, return_tensors="pt").to(model.device)
            logits = model(**enc).logits.float()  # (B, C)
            probs[idx] = (torch.sigmoid(logits) if val.multi_label else torch.softmax(logits, -1)).cpu().numpy()
    names = val.label_names
    if val.multi_label:
        pred = (probs >= 0.5).astype(int)  # (N, C)
        truth = val.multi_hot()
        metrics = evaluate_predictions(truth, pred, names)
        wrong_idx = np.where((pred != truth).any(axis=1))[0]
        fmt = lambda row: "|".join(names[j] for j in np.where(row)[0]) or "(none)"  # noqa: E731
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
    return metrics, wrong


def load_run_info(path: Path) -> dict | None:
    try:
        return json.loads((Path(path) / RUN_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


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

## Hyperparameters
{hp}

The training log is in `training_log.json`, the misclassified validation rows in `run.json`.
"""
