"""Fine-tuning a token classifier (a named-entity tagger) on tagged sentences, on the same engine as the classifier
(``training.py``: the Hugging Face ``Trainer`` with length-grouped batches padded per batch, the best evaluation's
weights kept in memory and restored, early stopping, progress with an ETA, a cancel within one step).

What differs from a classifier, and why:

- **Labels on a word's first piece.** A sentence comes as words with one tag each; the tokenizer splits words
  into pieces, and only the first piece of each word carries its tag, the other pieces and the special tokens
  are ignored by the loss (label -100), as transformers' ``run_ner`` example does. Predictions are read back at
  the same first pieces, so a word gets exactly one tag.
- **The metric that picks the best weights** is entity-level F1 (seqeval, strict IOB2:
  ``evaluate.entity_metrics``), whatever ``TrainConfig.metric`` says (that field names a classifier's metrics).
- **Nothing is cut.** A sentence longer than the model reads is refused with its lines named (cutting it would
  train on tags whose words the model never saw); split such sentences first.
- **The head starts fresh** unless the base is already a tagger with exactly these tags: a sequence classifier's
  ``classifier`` layer has the same name and, with as many classes as tags, the same shape, and would otherwise
  load silently as the tagger's head.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, DataCollatorForTokenClassification

from ..errors import DataError, InputError
from ..models.calibration import calibration_report
from ..models.heads import TOKEN_CLASSIFICATION
from .classifier_metrics import calibration_metrics
from .data.messages import format_rows
from .data.tagged import TaggedSentence
from .entity_metrics import entity_scores
from .frozen_features import FEATURE_BUDGET, frozen_run
from .training import (
    Progress,
    RowsDataset,
    TrainConfig,
    check_trainable,
    configure_model,
    fresh_linear,
    load_for_training,
    longest_input,
    train_keeping_best,
    trained_labels,
)

__all__ = ["train_tagger", "tagger_tokenizer", "encode_sentences", "predict_tags", "tagger_report", "IGNORE",
           "word_logits", "tagger_calibration", "tags_of"]

IGNORE = -100  # the label the loss skips: a word's later pieces and the special tokens


def tagger_tokenizer(path: str | Path):
    """The model's fast tokenizer, set to take sentences as lists of words (byte-level BPE tokenizers, RoBERTa's,
    need ``add_prefix_space`` for that: a word inside a sentence is written with the space before it)."""
    tok = AutoTokenizer.from_pretrained(path, use_fast=True, trust_remote_code=False)
    try:
        tok([["a", "b"]], is_split_into_words=True)
    except (ValueError, TypeError):
        tok = AutoTokenizer.from_pretrained(path, use_fast=True, trust_remote_code=False, add_prefix_space=True)
    return tok


def encode_sentences(tokenizer, sentences: Sequence[TaggedSentence], tag_ids: dict[str, int] | None,
                     max_length: int, unit: str = "line") -> list[dict]:
    """Each sentence's pieces (``input_ids``, ``attention_mask``) and, with ``tag_ids``, its ``labels``: the word's tag
    on its first piece, IGNORE elsewhere; ``first``: the position of each word's first piece (None: the word has
    no piece). A sentence past ``max_length`` pieces: DataError naming its ``unit`` ("line" or "row")."""
    enc = tokenizer([list(s.tokens) for s in sentences], is_split_into_words=True, truncation=False)
    too_long = [s.where for i, s in enumerate(sentences) if len(enc["input_ids"][i]) > max_length]
    if too_long:
        raise DataError(f"{len(too_long):,} sentence{'s' * (len(too_long) != 1)} ({format_rows(too_long, word=unit)}) "
                        f"{'are' if len(too_long) != 1 else 'is'} longer than the {max_length} word-pieces the model "
                        "reads. Split them into shorter sentences (a blank line in a CoNLL file ends a sentence).")
    rows = []
    for i, s in enumerate(sentences):
        words = enc.word_ids(i)
        first: list[int | None] = [None] * len(s.tokens)
        for pos, w in enumerate(words):
            if w is not None and first[w] is None:
                first[w] = pos
        row = {"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i], "first": first}
        if tag_ids is not None:
            labels = [IGNORE] * len(words)
            for w, pos in enumerate(first):
                if pos is not None:
                    labels[pos] = tag_ids[s.tags[w]]
            row["labels"] = labels
        rows.append(row)
    return rows


def train_tagger(base_path: str | Path, tags: Sequence[str], train: Sequence[TaggedSentence],
                 val: Sequence[TaggedSentence] | None = None, config: TrainConfig | None = None, *,
                 work_dir: str | Path | None = None, progress: Progress | None = None,
                 cancel: threading.Event | None = None, world_size: int = 1, after_evals: float = 0.0,
                 after_steps: float = 0.0, unit: str = "line", feature_budget: int = FEATURE_BUDGET):
    """Fine-tune a BERT-family encoder (folder with safetensors) as its family's ``*ForTokenClassification`` with
    ``tags`` (``O`` and ``B-``/``I-`` per type, or IO types), on ``train`` sentences; ``val`` judges it during
    training by entity F1. The arguments and the returned (model, tokenizer, info) are ``train_classifier``'s;
    ``unit``: what a sentence's ``where`` counts, for messages. Saving is the caller's (``training.atomic_save``).
    With ``config.freeze_layers`` the frozen bottom's output is computed once per sentence and the layers above train
    on it (``frozen_features.py``; at most ``feature_budget`` bytes of it); ``info["frozen_features"]`` says whether
    it was and why."""
    config = config or TrainConfig()
    base_path = Path(base_path)
    tags = list(tags)
    tag_ids = {t: i for i, t in enumerate(tags)}
    unknown = sorted({t for s in [*train, *(val or [])] for t in s.tags} - set(tags))
    if unknown:
        raise InputError(f"Tags {', '.join(unknown)} are in the data but not in the tag list; pass every tag.")
    tokenizer, model = _load(base_path, tags, config)
    max_length = longest_input(tokenizer, model)
    train_rows = _trainable(encode_sentences(tokenizer, train, tag_ids, max_length, unit))
    # validation sentences sorted by length, so each evaluation batch pads little (the Trainer keeps their order; the
    # entity scores do not depend on it): in file order 65% of their tokens were padding, sorted 31%
    eval_rows = sorted(_trainable(encode_sentences(tokenizer, val, tag_ids, max_length, unit)) if val else [],
                       key=lambda r: len(r["input_ids"]))
    run = frozen_run(model, tokenizer, config.freeze_layers, train_rows, eval_rows, world_size=world_size,
                     budget=feature_budget)
    collator = run.collator or DataCollatorForTokenClassification(tokenizer, label_pad_token_id=IGNORE)
    info = train_keeping_best(model, tokenizer, config, RowsDataset(run.train),
                              RowsDataset(run.eval) if run.eval else None, _metrics(tags), metric="entity_f1",
                              progress=progress, cancel=cancel, after_evals=after_evals, after_steps=after_steps,
                              max_length=max_length, work_dir=work_dir, work_name="bertviz-tag",
                              world_size=world_size, collator=collator, feature_depth=run.depth)
    info["config"]["metric"] = "entity_f1"
    info["frozen_features"] = {"depth": run.depth, "why": run.why}
    return model, tokenizer, info


def _trainable(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "first"} for r in rows]


def _load(base_path: Path, tags: list[str], config: TrainConfig):
    """(tokenizer, model): the base as a token classifier with ``tags``, its head fresh unless it was trained for
    exactly these tags, frozen parts and dropout as ``config`` says."""
    torch.manual_seed(config.seed)
    check_trainable(base_path)
    tokenizer = tagger_tokenizer(base_path)
    id2label = dict(enumerate(tags))
    model = load_for_training(TOKEN_CLASSIFICATION, base_path, num_labels=len(tags), id2label=id2label,
                              label2id={t: i for i, t in id2label.items()}, ignore_mismatched_sizes=True)
    if trained_labels(base_path, TOKEN_CLASSIFICATION) != tuple(tags):
        fresh_linear(model, model.classifier)  # a classifier's or another tagger's head would mislead
    configure_model(model, config)
    return tokenizer, model


def _metrics(tags: list[str]):
    """The Trainer's ``compute_metrics``: entity F1, precision and recall (no intervals: they are for the report)
    and per-word accuracy, read at each word's first piece (the positions whose label is not IGNORE)."""

    def compute_metrics(p):
        logits, labels = np.asarray(p.predictions), np.asarray(p.label_ids)  # (N, T, C), (N, T)
        pred = logits.argmax(-1)
        true_seqs, pred_seqs = [], []
        for row_pred, row_true in zip(pred, labels):
            keep = row_true != IGNORE
            true_seqs.append([tags[i] for i in row_true[keep]])
            pred_seqs.append([tags[i] for i in row_pred[keep]])
        scores = entity_scores(true_seqs, pred_seqs, samples=0)
        n = sum(len(s) for s in true_seqs)
        correct = sum(a == b for t, q in zip(true_seqs, pred_seqs) for a, b in zip(t, q))
        return {"entity_f1": scores["entity_f1"], "precision": scores["precision"], "recall": scores["recall"],
                "token_accuracy": correct / n if n else 0.0}

    return compute_metrics


@torch.no_grad()
def word_logits(model, tokenizer, sentences: Sequence[TaggedSentence], batch_size: int = 32,
                unit: str = "line") -> list[np.ndarray]:
    """Each sentence's logits at each word's first piece, (words, tags) float32 (a word with no piece: a row of
    NaN), batched, sentences sorted by length so a batch pads little."""
    model.eval()
    device = next(model.parameters()).device
    rows = encode_sentences(tokenizer, sentences, None, longest_input(tokenizer, model), unit)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["input_ids"]))
    n_tags = model.config.num_labels
    out: list[np.ndarray] = [np.zeros((0, n_tags), dtype=np.float32) for _ in rows]
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        batch = tokenizer.pad([{"input_ids": rows[i]["input_ids"]} for i in chunk], return_tensors="pt")
        logits = model(input_ids=batch["input_ids"].to(device),
                       attention_mask=batch["attention_mask"].to(device)).logits.float().cpu().numpy()  # (B, T, C)
        for j, i in enumerate(chunk):
            first = rows[i]["first"]
            words = np.full((len(first), n_tags), np.nan, dtype=np.float32)
            at = [w for w, pos in enumerate(first) if pos is not None]
            words[at] = logits[j, [first[w] for w in at]]
            out[i] = words
    return out


def predict_tags(model, tokenizer, sentences: Sequence[TaggedSentence], batch_size: int = 32,
                 unit: str = "line") -> list[list[str]]:
    """Each sentence's predicted tag per word (read at the word's first piece; a word with no piece: ``O``)."""
    return tags_of(word_logits(model, tokenizer, sentences, batch_size, unit), model.config.id2label)


def tags_of(logits: Sequence[np.ndarray], id2label: dict) -> list[list[str]]:
    """Each sentence's tag per word from its ``word_logits`` (the argmax; a word with no piece: ``O``)."""
    names = {int(k): v for k, v in id2label.items()}
    return [["O" if np.isnan(row[0]) else names[int(row.argmax())] for row in words] for words in logits]


def tagger_calibration(logits: Sequence[np.ndarray], sentences: Sequence[TaggedSentence], tags: Sequence[str]) -> dict:
    """How honest the tagger's word probabilities are on held-out sentences, and temperature scaling fitted on half
    of their words and judged on the other half (``calibration.calibration_report``; the rows are words, at their
    first piece; words with no piece are left out): {"val_nll", "ece", "calibration"}. Empty when no word has a
    piece."""
    index = {t: i for i, t in enumerate(tags)}
    pairs = [(row, index[t]) for words, s in zip(logits, sentences) for row, t in zip(words, s.tags)
             if not np.isnan(row[0])]
    if not pairs:
        return {}
    z, y = np.stack([row for row, _ in pairs]), np.asarray([t for _, t in pairs])
    return {**calibration_metrics(z, y), "calibration": calibration_report(z, y)}


def tagger_report(true: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], seed: int = 0) -> dict:
    """Entity scores with 95% intervals (``entity_scores``), per-word accuracy, the all-``O`` baseline (no entity
    found: entity F1 0, per-word accuracy the share of ``O`` words) and the verdict: ``learned`` when the entity F1's
    interval is above 0 and per-word accuracy beats the baseline's."""
    scores = entity_scores(true, pred, seed=seed)
    words = [(a, b) for t, q in zip(true, pred) for a, b in zip(t, q)]
    accuracy = sum(a == b for a, b in words) / len(words) if words else 0.0
    o_share = sum(a == "O" for a, _ in words) / len(words) if words else 0.0
    low = (scores["interval"] or {}).get("f1", (0.0, 0.0))[0]
    learned = bool(low > 0 and accuracy > o_share)
    f1 = scores["entity_f1"]
    if learned:
        verdict = (f"Learned: entity F1 {f1:.3f} (95% interval {low:.3f} and up) against 0 for tagging every word "
                   f"O, and {accuracy:.1%} of words right against {o_share:.1%} for all O.")
    else:
        verdict = (f"Not learned: entity F1 {f1:.3f} (its 95% interval reaches {low:.3f}) and {accuracy:.1%} of "
                   f"words right against {o_share:.1%} for tagging every word O. Train longer, on more sentences, "
                   "or check the tags.")
    return {**scores, "token_accuracy": accuracy, "baseline": {"entity_f1": 0.0, "token_accuracy": o_share},
            "learned": learned, "verdict": verdict}
