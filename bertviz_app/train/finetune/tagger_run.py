"""A token-classification run: tagged sentences in (``data.tagged.read_tagged``), a registered tagger folder
(``models/runs/<name>``) out, as a classifier run is saved: the weights written atomically beside ``run.json``
(task, tags, metrics with intervals, the validation sentences it got wrong, settings, the verdict), the training
log and a model card. Judged against tagging every word ``O`` (``tagger_training.tagger_report``)."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...errors import DataError, InputError
from ...models.catalog import DEFAULT_MODELS_DIR
from ..data.tagged import TaggedFile, TaggedSentence
from ..frozen_features import frozen_notice
from ..tagger_training import tagger_calibration, tagger_report, tags_of, train_tagger, word_logits
from ..training import TrainConfig
from .card import calibration_file, calibration_line, head_run_record
from .records import DEFAULT_BASE
from .runs import base_model_path, free_name, run_stem, runs_dir, save_run, unused_name

__all__ = ["TaggerRunResult", "run_tagger", "data_hash_of", "TASK", "MAX_WRONG_SENTENCES"]

TASK = "token-classification"
MAX_WRONG_SENTENCES = 200  # validation sentences with a wrong tag kept in run.json (the page lists them)


@dataclass(frozen=True)
class TaggerRunResult:
    name: str  # "runs/<name>": what the registry opens
    path: Path
    tags: tuple[str, ...]
    metrics: dict  # tagger_report's: entity_f1, precision, recall, per_type, intervals, token_accuracy, baseline
    wrong: list[dict]  # validation sentences with at least one wrong tag: tokens, tags, predicted, where
    log_history: list[dict]
    seconds: float
    notices: tuple[str, ...]
    learned: bool
    verdict: str
    cancelled: bool


def run_tagger(train: TaggedFile, val: TaggedFile | None = None, base: str = DEFAULT_BASE, name: str | None = None,
               config: TrainConfig | None = None, val_fraction: float = 0.2, *, source: str = "",
               progress: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
               allow_paths: bool = True, owner: str | None = None,
               models_dir: Path = DEFAULT_MODELS_DIR) -> TaggerRunResult:
    """Fine-tune ``base`` as a tagger on ``train``'s sentences, judge it on ``val``'s (or on a seeded
    ``val_fraction`` of ``train``'s when there is no ``val``) and save ``models_dir/runs/<name>``."""
    config = config or TrainConfig()
    if name is not None:
        name = unused_name(name, models_dir)
    train_s, val_s, notices = _split(train, val, val_fraction, config.seed)
    tags = _tags(train, val)
    base_path = base_model_path(base, allow_paths=allow_paths, models_dir=models_dir)
    started = time.time()
    model, tokenizer, info = train_tagger(base_path, tags, train_s, val_s, config, progress=progress, cancel=cancel,
                                          after_evals=1.0, unit=train.unit)
    if note := frozen_notice(info):
        notices.append(note)
    logits = word_logits(model, tokenizer, val_s, unit=train.unit)
    pred = tags_of(logits, model.config.id2label)
    metrics = tagger_report([list(s.tags) for s in val_s], pred, seed=config.seed)
    metrics.update(tagger_calibration(logits, val_s, tags))  # the model's tags are ``tags``, in that order
    wrong = [{"where": s.where, "tokens": list(s.tokens), "tags": list(s.tags), "predicted": p}
             for s, p in zip(val_s, pred) if list(s.tags) != p]
    seconds = time.time() - started
    data_hash = data_hash_of(train, val)
    name = name or free_name(run_stem("tagger", data_hash), models_dir)
    data = {"data_hash": data_hash, "train_sentences": len(train_s), "val_sentences": len(val_s), "labels": tags,
            "scheme": train.scheme}
    record = head_run_record(f"runs/{name}", task=TASK, base=base, source=source, data=data, metrics=metrics,
                             wrong=wrong[:MAX_WRONG_SENTENCES], info=info, seconds=seconds, notices=notices,
                             owner=owner)
    save_run(model, tokenizer, runs_dir(models_dir) / name, record, info, tagger_card(record),
             extra_files=calibration_file(metrics))
    return TaggerRunResult(name=f"runs/{name}", path=runs_dir(models_dir) / name, tags=tuple(tags), metrics=metrics,
                           wrong=wrong, log_history=info.get("log_history", []), seconds=seconds,
                           notices=tuple(notices), learned=bool(record["verdict"]["learned"]),
                           verdict=record["verdict"]["message"], cancelled=record["cancelled"])


def _split(train: TaggedFile, val: TaggedFile | None, val_fraction: float, seed: int
           ) -> tuple[list[TaggedSentence], list[TaggedSentence], list[str]]:
    """(train, validation sentences, notices): the files' own, or a seeded shuffle's share of ``train``."""
    notices = list(train.notices) + (list(val.notices) if val is not None else [])
    if val is not None:
        train_s, val_s = list(train.sentences), list(val.sentences)
    else:
        if not 0 < val_fraction < 1:
            raise InputError(f"val_fraction={val_fraction} must be between 0 and 1.")
        order = list(range(len(train.sentences)))
        random.Random(seed).shuffle(order)
        n_val = max(1, round(len(order) * val_fraction))
        val_s = [train.sentences[i] for i in sorted(order[:n_val])]
        train_s = [train.sentences[i] for i in sorted(order[n_val:])]
        notices.append(f"Held out {len(val_s):,} of {len(order):,} sentences (a seeded {val_fraction:.0%}) to judge "
                       "the tagger; give a validation file to choose them.")
    if len(train_s) < 2 or not val_s:
        raise DataError(f"Too little data: {len(train_s)} training and {len(val_s)} validation sentences. "
                        "Add sentences.")
    return train_s, val_s, notices


def _tags(train: TaggedFile, val: TaggedFile | None) -> list[str]:
    """The tag set of both files (``O`` first, each type's ``B-`` then ``I-``); files of two schemes refused."""
    if val is not None and val.scheme != train.scheme:
        raise DataError(f"The training file's tags are {train.scheme} and the validation file's {val.scheme}: "
                        "write both in one scheme.")
    tags = dict.fromkeys([*train.tags, *(val.tags if val is not None else ())])
    ordered = ["O"] + sorted((t for t in tags if t != "O"), key=lambda t: (t[2:] if t[1:2] == "-" else t, t))
    return ordered


def data_hash_of(train: TaggedFile, val: TaggedFile | None) -> str:
    """The first 16 hex digits of sha256 over both files' tokens and tags: what identifies "the same data"."""
    payload = json.dumps([[(s.tokens, s.tags) for s in f.sentences] for f in (train, val) if f is not None],
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def tagger_card(r: dict) -> str:
    """The model card of a tagger run: what it was trained on, its entity scores per type with intervals."""
    m = r["metrics"]

    def ci(iv) -> str:
        return f"{iv['f1'][0]:.3f}-{iv['f1'][1]:.3f}" if iv else "n/a"

    rows = "\n".join(f"| {t} | {v['precision']:.3f} | {v['recall']:.3f} | {v['f1']:.3f} | {ci(v['interval'])} | "
                     f"{v['support']} |" for t, v in m["per_type"].items())
    hp = "\n".join(f"- `{k}`: {v}" for k, v in r["hyperparameters"].items())
    return f"""---
library_name: transformers
pipeline_tag: token-classification
---
# {r['name']}

A token classifier fine-tuned with bertviz-app from `{r['base']}` on `{r['source'] or 'uploaded data'}` (data sha256
prefix `{r['data_hash']}`), {r['train_sentences']:,} training / {r['val_sentences']:,} validation sentences.
Tags ({r['scheme']}): {', '.join(r['labels'])}.

## Validation metrics (entity level, seqeval strict IOB2; 95% bootstrap intervals over sentences)
| metric | value |
|---|---|
| entity F1 | **{m['entity_f1']:.4f}** ({ci(m['interval'])}) |
| precision | {m['precision']:.4f} |
| recall | {m['recall']:.4f} |
| words tagged right | {m['token_accuracy']:.4f} (all O: {m['baseline']['token_accuracy']:.4f}) |

| type | precision | recall | F1 | F1 interval | support |
|---|---|---|---|---|---|
{rows}

{r['verdict']['message']}
{calibration_line(m)}
## Hyperparameters
{hp}

The training log is in `training_log.json`, the validation sentences with a wrong tag in `run.json`.
"""
