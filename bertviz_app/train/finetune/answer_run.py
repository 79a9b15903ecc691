"""A question answering run: questions with their contexts and answers in (``data.squad.read_squad``: SQuAD JSON or a
question/context/answer_text/answer_start CSV), a registered reader folder (``models/runs/<name>``) out, as a tagger
run is saved: the weights written atomically beside ``run.json`` (task, the data, held-out exact match and F1 with
intervals, the two guesses it is judged against, the held-out questions it got wrong, settings, the verdict), the
training log and a model card. ``bv.load_model`` opens it as a question answering model and ``bv.answer`` answers
with it."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...errors import DataError
from ...models.catalog import DEFAULT_MODELS_DIR
from ..answer_training import reader_answers, reader_report, split_by_context, train_reader
from ..data.squad import QAExample, QAFile
from ..training import TrainConfig
from .card import head_run_record
from .records import DEFAULT_BASE
from .runs import base_model_path, free_name, run_stem, runs_dir, save_run, unused_name

__all__ = ["AnswerRunResult", "run_reader", "answer_data_hash", "reader_card", "QA_TASK", "MAX_WRONG_ANSWERS"]

QA_TASK = "question-answering"
MAX_WRONG_ANSWERS = 200  # held-out questions not answered exactly kept in run.json


@dataclass(frozen=True)
class AnswerRunResult:
    name: str  # "runs/<name>": what the registry opens
    path: Path
    metrics: dict  # reader_report's: exact, f1, n, interval, baselines, margins, learned, verdict
    wrong: list[dict]  # held-out questions not answered exactly: id, question, context, answers, predicted
    log_history: list[dict]
    seconds: float
    notices: tuple[str, ...]
    learned: bool
    verdict: str
    cancelled: bool


def run_reader(train: QAFile, val: QAFile | None = None, base: str = DEFAULT_BASE, name: str | None = None,
               config: TrainConfig | None = None, val_fraction: float = 0.2, *, source: str = "",
               progress: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
               allow_paths: bool = True, owner: str | None = None,
               models_dir: Path = DEFAULT_MODELS_DIR) -> AnswerRunResult:
    """Fine-tune ``base`` as a reader on ``train``'s questions, judge it on ``val``'s (or on a seeded ``val_fraction``
    of ``train``'s contexts with all their questions) and save ``models_dir/runs/<name>``. A cancel within training
    saves the best weights so far, marked cancelled and not judged."""
    config = config or TrainConfig()
    if name is not None:
        name = unused_name(name, models_dir)
    train_q, val_q, notices = _split(train, val, val_fraction, config.seed)
    base_path = base_model_path(base, allow_paths=allow_paths, models_dir=models_dir)
    started = time.time()
    model, tokenizer, info = train_reader(base_path, train_q, val_q, config, progress=progress, cancel=cancel,
                                          after_evals=1.0, unit=train.unit)
    predicted = reader_answers(model, tokenizer, val_q, stride=info["stride"],
                               no_answer_threshold=info["no_answer_threshold"])
    metrics = reader_report(val_q, predicted, train_q, seed=config.seed)
    per_question = metrics.pop("per_question")
    wrong = [{"id": e.id, "question": e.question, "context": e.context, "answers": [t for t, _ in e.answers],
              "predicted": p, "f1": f1} for e, p, em, f1 in zip(val_q, predicted, per_question["exact"],
                                                                 per_question["f1"]) if not em]
    seconds = time.time() - started
    data_hash = answer_data_hash(train, val)
    name = name or free_name(run_stem("reader", data_hash), models_dir)
    data = {"format": train.format, "data_hash": data_hash, "train_questions": len(train_q),
            "val_questions": len(val_q), "train_contexts": len({e.context for e in train_q}),
            "val_contexts": len({e.context for e in val_q}), "unanswerable": train.n_impossible,
            "train_windows": info["train_windows"], "stride": info["stride"],
            "no_answer_threshold": info["no_answer_threshold"]}
    record = head_run_record(f"runs/{name}", task=QA_TASK, base=base, source=source, data=data, metrics=metrics,
                             wrong=wrong[:MAX_WRONG_ANSWERS], info=info, seconds=seconds, notices=notices, owner=owner)
    save_run(model, tokenizer, runs_dir(models_dir) / name, record, info, reader_card(record))
    return AnswerRunResult(name=f"runs/{name}", path=runs_dir(models_dir) / name, metrics=metrics, wrong=wrong,
                           log_history=info.get("log_history", []), seconds=seconds, notices=tuple(notices),
                           learned=bool(record["verdict"]["learned"]), verdict=record["verdict"]["message"],
                           cancelled=record["cancelled"])


def _split(train: QAFile, val: QAFile | None, val_fraction: float, seed: int
           ) -> tuple[list[QAExample], list[QAExample], list[str]]:
    """(train, held-out questions, notices): the files' own, or a seeded share of ``train``'s contexts."""
    notices = list(train.notices) + (list(val.notices) if val is not None else [])
    if val is not None:
        train_q, val_q = list(train.examples), list(val.examples)
        shared = {e.context for e in train_q} & {e.context for e in val_q}
        if shared:
            notices.append(f"{len(shared):,} contexts are in both the training and the validation file: the held-out "
                           "scores are of questions on paragraphs the model read in training.")
    else:
        train_q, val_q = split_by_context(train.examples, val_fraction, seed)
        contexts = (len({e.context for e in val_q}), len({e.context for e in train.examples}))
        notices.append(f"Held out {len(val_q):,} of {len(train.examples):,} questions ({contexts[0]:,} of "
                       f"{contexts[1]:,} contexts, a seeded {val_fraction:.0%}, every question of a context on one "
                       "side) to judge the reader; give a validation file to choose them.")
    if len(train_q) < 2 or not val_q:
        raise DataError(f"Too little data: {len(train_q)} training and {len(val_q)} held-out questions (held out by "
                        "context, so a file needs at least two contexts). Add questions on more contexts.")
    return train_q, val_q, notices


def answer_data_hash(train: QAFile, val: QAFile | None) -> str:
    """The first 16 hex digits of sha256 over both files' questions, contexts and answers."""
    payload = json.dumps([[(e.id, e.question, e.context, e.answers, e.is_impossible) for e in f.examples]
                          for f in (train, val) if f is not None], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def reader_card(r: dict) -> str:
    """The model card of a reader run: its data, held-out exact match and F1 with intervals, the two guesses, the
    verdict."""
    m = r["metrics"]
    iv = m["interval"] or {"exact": (m["exact"],) * 2, "f1": (m["f1"],) * 2}
    none, fixed = m["baselines"]["no_answer"], m["baselines"]["fixed_position"]
    hp = "\n".join(f"- `{k}`: {v}" for k, v in r["hyperparameters"].items())
    ours = (f"**{m['exact']:.4f}** ({iv['exact'][0]:.3f}-{iv['exact'][1]:.3f}) | **{m['f1']:.4f}** "
            f"({iv['f1'][0]:.3f}-{iv['f1'][1]:.3f})")
    words = f"{fixed['first_word'] + 1}-{fixed['first_word'] + fixed['words']}"
    return f"""---
library_name: transformers
pipeline_tag: question-answering
---
# {r['name']}

An extractive question answering model (a span reader) fine-tuned with bertviz-app from `{r['base']}` on
`{r['source'] or 'uploaded data'}` ({r['format']}, data sha256 prefix `{r['data_hash']}`): {r['train_questions']:,}
training questions on {r['train_contexts']:,} contexts ({r['train_windows']:,} windows, neighbours sharing
{r['stride']} tokens), {r['val_questions']:,} held-out questions on {r['val_contexts']:,} other contexts.
{r['unanswerable']:,} questions of the file have no answer.

## Held-out scores (SQuAD's normalisation; 95% bootstrap intervals over questions)
| answers | exact match | F1 |
|---|---|---|
| this model | {ours} |
| always "no answer" | {none['exact']:.4f} | {none['f1']:.4f} |
| the context's words {words} (fixed position) | {fixed['exact']:.4f} | {fixed['f1']:.4f} |

{r['verdict']['message']}

Answer with it: `bertviz-app answer --question Q --context C --model {r['name']}`.

## Hyperparameters
{hp}

The training log is in `training_log.json`, the held-out questions not answered exactly in `run.json`.
"""
