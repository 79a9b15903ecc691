"""Fine-tuning an extractive question answering model (a span reader) on SQuAD-format questions, on the same engine as
the classifier and the tagger (``training.train_keeping_best``: the Hugging Face ``Trainer`` with length-grouped
batches padded per batch, the best evaluation's weights kept and restored, early stopping, progress with an ETA, a
cancel within one step).

What differs, and why:

- **Windows with a stride**, as transformers' ``run_qa.py`` (``prepare_train_features``) cuts them: the question and
  the context are one pair, question first, ``truncation="only_second"``, ``stride`` context tokens shared by
  neighbouring windows (``return_overflowing_tokens``), so a long context trains in every window. A window's
  labels are the first answer's first and last tokens found through ``return_offsets_mapping``; an unanswerable
  question, or an answer not wholly inside the window, is labelled at the first position ([CLS] / <s>: "no
  answer"), as the script does. ``answering.answer`` reads contexts in the same windows (the same ``stride``).
- **The metric that picks the best weights** is SQuAD's F1 on the held-out questions, read the way the model will be
  used: each evaluation answers them with ``answering.answer`` (windows, n-best over offsets, no answer) and scores
  the answers with ``answer_metrics``; ``eval_exact`` and ``eval_f1`` are the live curves.
- **Held out by context**: ``split_by_context`` keeps every question of a context on one side, so the model is never
  judged on a paragraph it read in training.
- **Judged against two guesses** on the same held-out questions (``reader_report``): always "no answer", and a fixed
  position (the words where training answers most often stand, as many as they most often have). The verdict says
  "learned" only when the model is ahead of both, in exact match and in F1, beyond the 95% bootstrap interval of
  the paired difference.
- **The head** is the base's own when the base is already a question answering model (its ``qa_outputs`` load);
  any other base (an encoder, a classifier, a tagger) gets a fresh span head: no other head is named ``qa_outputs``.
"""

from __future__ import annotations

import dataclasses
import random
import re
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, DataCollatorWithPadding

from ..config import Settings
from ..errors import DataError, InputError
from ..models.answering import answer
from ..models.heads import QUESTION_ANSWERING
from ..models.registry import LoadedModel
from .answer_metrics import answer_scores, mean_intervals
from .data.messages import format_rows
from .data.squad import QAExample
from .training import (
    Progress,
    RowsDataset,
    TrainConfig,
    check_trainable,
    configure_model,
    load_for_training,
    longest_input,
    train_keeping_best,
)

__all__ = ["train_reader", "reader_tokenizer", "train_features", "split_by_context", "reader_answers",
           "reader_report", "fixed_position", "fixed_position_answers", "reader_stride", "NO_ANSWER_POSITION"]

NO_ANSWER_POSITION = 0  # the label of "no answer in this window": the first position, [CLS] / <s>
_WORDS = re.compile(r"\S+")


def reader_tokenizer(path: str | Path):
    """The model's fast tokenizer (windows need its offsets); InputError for a slow-only one or one that pads on the
    left (the question goes first)."""
    tok = AutoTokenizer.from_pretrained(path, use_fast=True, trust_remote_code=False)
    if not tok.is_fast:
        raise InputError(f"{Path(path).name}'s tokenizer has no fast (Rust) version: question answering needs one to "
                         "map tokens to the context's characters. Choose another base.")
    if tok.padding_side != "right":
        raise InputError(f"{Path(path).name}'s tokenizer pads on the left; a reader reads the question first and "
                         "needs one that pads on the right.")
    return tok


def reader_stride(max_length: int) -> int:
    """Context tokens shared by neighbouring windows: ``answering.default_stride``'s (128, or half the window)."""
    return min(128, max_length // 2)


def _check_questions(tokenizer, examples: Sequence[QAExample], max_length: int, stride: int, unit: str) -> None:
    """DataError naming the questions so long that a window holds no more than ``stride`` context tokens."""
    specials = tokenizer.num_special_tokens_to_add(pair=True)
    lengths = [len(ids) for ids in tokenizer([e.question for e in examples], add_special_tokens=False)["input_ids"]]
    too_long = [e.id for e, n in zip(examples, lengths) if max_length - specials - n <= stride]
    if too_long:
        named = format_rows([int(i) for i in too_long]) if unit == "row" else format_rows(
            [repr(i) for i in too_long], word="id")
        raise DataError(f"{len(too_long):,} question{'s' * (len(too_long) != 1)} ({named}) leave the context no room: "
                        f"the model reads {max_length} word-pieces, question and context together, and windows share "
                        f"{stride}. Shorten the questions to fewer than {max_length - specials - stride} word-pieces.")


def train_features(tokenizer, examples: Sequence[QAExample], max_length: int, stride: int,
                   unit: str = "id") -> list[dict]:
    """The windows of every question (``run_qa.py``'s ``prepare_train_features``): ``input_ids``, ``attention_mask``
    (and ``token_type_ids`` where the family has them), ``start_positions`` and ``end_positions`` (the first
    answer's first and last token in this window; ``NO_ANSWER_POSITION`` for both when the question has no answer or
    the answer is not wholly in the window), ``example`` (the question's index) and ``offsets`` (each token's
    characters in the context; None outside it). ``unit``: what names a question in messages ("id" or "row")."""
    _check_questions(tokenizer, examples, max_length, stride, unit)
    enc = tokenizer([e.question for e in examples], [e.context for e in examples], truncation="only_second",
                    max_length=max_length, stride=stride, return_overflowing_tokens=True,
                    return_offsets_mapping=True)
    rows = []
    for w, i in enumerate(enc["overflow_to_sample_mapping"]):
        sequence = enc.sequence_ids(w)
        offsets = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][w], sequence)]
        start, end = _window_labels(examples[i], offsets)
        row = {k: enc[k][w] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
        rows.append({**row, "start_positions": start, "end_positions": end, "example": i, "offsets": offsets})
    return rows


def _window_labels(example: QAExample, offsets: list[tuple[int, int] | None]) -> tuple[int, int]:
    """(start token, end token) of the example's first answer in a window whose context tokens have ``offsets``;
    (0, 0) where it has none or the answer is not wholly inside."""
    if example.is_impossible or not example.answers:
        return NO_ANSWER_POSITION, NO_ANSWER_POSITION
    text, a = example.answers[0]
    b = a + len(text)
    context = [k for k, o in enumerate(offsets) if o is not None]
    if not context or not (offsets[context[0]][0] <= a and offsets[context[-1]][1] >= b):
        return NO_ANSWER_POSITION, NO_ANSWER_POSITION
    start = max(k for k in context if offsets[k][0] <= a)  # the last token starting at or before the answer
    end = min(k for k in context if offsets[k][1] >= b)  # the first token ending at or after it
    return start, max(start, end)


def split_by_context(examples: Sequence[QAExample], fraction: float, seed: int
                     ) -> tuple[list[QAExample], list[QAExample]]:
    """(train, held out): a seeded shuffle of the distinct contexts, the first of them held out until about
    ``fraction`` of the questions are; every question of a context on the same side. File order kept on each."""
    if not 0 < fraction < 1:
        raise InputError(f"val_fraction={fraction} must be between 0 and 1.")
    contexts = list(dict.fromkeys(e.context for e in examples))
    random.Random(seed).shuffle(contexts)
    per_context = Counter(e.context for e in examples)
    want, held, n = max(1, round(len(examples) * fraction)), set(), 0
    for c in contexts[:-1]:  # at least one context left to train on
        if n >= want:
            break
        held.add(c)
        n += per_context[c]
    return [e for e in examples if e.context not in held], [e for e in examples if e.context in held]


def reader_answers(model, tokenizer, examples: Sequence[QAExample], *, stride: int, no_answer_threshold: float | None,
                   batch_size: int = 64, name: str = "reader") -> list[str]:
    """The answer text ``answering.answer`` gives each question with this in-memory model ("" for "no answer"),
    its windows sharing ``stride`` tokens. Leaves the model in eval mode."""
    if not examples:
        return []
    model.eval()
    longest = max(max(len(e.context), len(e.question)) for e in examples)
    settings = dataclasses.replace(Settings(), max_chars=max(longest, 1), max_batch_texts=max(len(examples), 1),
                                   cpu_int8=False)
    lm = LoadedModel(name=name, source="folder", path=Path("."), model=model, tokenizer=tokenizer,
                     device=next(model.parameters()).device, dtype=torch.float32, settings=settings, memo_size=0)
    found = answer(lm, [e.question for e in examples], [e.context for e in examples], n_best=1, stride=stride,
                   no_answer_threshold=no_answer_threshold, batch_size=batch_size, attention="eager")
    return [a.text for a in found]


def train_reader(base_path: str | Path, train: Sequence[QAExample], val: Sequence[QAExample] | None = None,
                 config: TrainConfig | None = None, *, work_dir: str | Path | None = None,
                 progress: Progress | None = None, cancel: threading.Event | None = None, world_size: int = 1,
                 after_evals: float = 0.0, after_steps: float = 0.0, unit: str = "id"):
    """Fine-tune a BERT-family model (folder with safetensors: an encoder, or a question answering model to go on
    training) as its family's ``*ForQuestionAnswering`` on ``train``'s questions; ``val``'s judge it during
    training by SQuAD F1 (the weights of the best evaluation are kept). The arguments and the returned (model,
    tokenizer, info) are ``train_tagger``'s; ``info["stride"]`` and ``info["no_answer_threshold"]`` say how the
    held-out questions were answered. Saving is the caller's (``training.atomic_save``)."""
    config = config or TrainConfig()
    tokenizer, model = _load(Path(base_path), config)
    max_length = longest_input(tokenizer, model)
    stride = reader_stride(max_length)
    threshold = 0.0 if any(e.is_impossible for e in [*train, *(val or ())]) else None
    train_ds = RowsDataset(_trainable(train_features(tokenizer, train, max_length, stride, unit)))
    eval_ds = RowsDataset(_trainable(train_features(tokenizer, val, max_length, stride, unit))) if val else None
    metrics = _held_out_metrics(model, tokenizer, list(val or ()), stride, threshold)
    info = train_keeping_best(model, tokenizer, config, train_ds, eval_ds, metrics, metric="f1",
                              progress=progress, cancel=cancel, after_evals=after_evals, after_steps=after_steps,
                              max_length=max_length, work_dir=work_dir, work_name="bertviz-qa",
                              world_size=world_size, collator=DataCollatorWithPadding(tokenizer))
    info["config"]["metric"] = "f1"
    info.update(stride=stride, no_answer_threshold=threshold, train_windows=len(train_ds),
                val_windows=len(eval_ds) if eval_ds is not None else 0)
    return model, tokenizer, info


def _trainable(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("example", "offsets")} for r in rows]


def _load(base_path: Path, config: TrainConfig):
    """(tokenizer, model): the base as a question answering model (its span head if it has one, else a fresh
    one), seeded, frozen parts and dropout as ``config`` says."""
    torch.manual_seed(config.seed)
    check_trainable(base_path)
    tokenizer = reader_tokenizer(base_path)
    model = load_for_training(QUESTION_ANSWERING, base_path)
    configure_model(model, config)
    return tokenizer, model


def _held_out_metrics(model, tokenizer, val: list[QAExample], stride: int, threshold: float | None):
    """The Trainer's ``compute_metrics``: SQuAD exact match and F1 of the held-out questions answered by the model
    as it is now (``reader_answers``; the evaluation's per-window logits are not needed), no intervals."""

    def compute_metrics(_):
        texts = reader_answers(model, tokenizer, val, stride=stride, no_answer_threshold=threshold)
        scores = answer_scores([e.gold_texts for e in val], texts, samples=0)
        return {"exact": scores["exact"], "f1": scores["f1"]}

    return compute_metrics


# --------------------------------------------------------------------------- judging
def _word_spans(context: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _WORDS.finditer(context)]


def fixed_position(train: Sequence[QAExample]) -> tuple[int, int]:
    """(first word, words): where the training answers most often start (the index of the context's
    whitespace-separated word the answer starts in) and how many words they most often have (ties: the smaller);
    (0, 1) when no training question has an answer."""
    starts, lengths = Counter(), Counter()
    for e in train:
        if e.answers:
            text, a = e.answers[0]
            starts[sum(1 for s, _ in _word_spans(e.context) if s <= a) - 1] += 1
            lengths[max(1, len(text.split()))] += 1
    if not starts:
        return 0, 1
    return (min(starts, key=lambda k: (-starts[k], k)), min(lengths, key=lambda k: (-lengths[k], k)))


def fixed_position_answers(examples: Sequence[QAExample], position: tuple[int, int]) -> list[str]:
    """Each context's words at ``position`` (first word, words; cut at the context's end, the last word where the
    context is shorter): the fixed-position guess."""
    first, n = position
    out = []
    for e in examples:
        words = _word_spans(e.context)
        s = min(max(first, 0), len(words) - 1)
        last = min(s + n, len(words)) - 1
        out.append(e.context[words[s][0]:words[last][1]] if words else "")
    return out


def reader_report(examples: Sequence[QAExample], predicted: Sequence[str], train: Sequence[QAExample],
                  seed: int = 0) -> dict:
    """The held-out scores (``answer_scores``: exact, f1, n, interval, per_question) beside the two guesses'
    (``baselines``: "no_answer", "fixed_position" with its words), ``margins``: the 95% bootstrap interval of the
    model's per-question lead over each guess (the same resamples; keys like "f1_vs_no_answer"), and the verdict:
    ``learned`` when every margin's interval is above 0."""
    golds = [e.gold_texts for e in examples]
    scores = answer_scores(golds, predicted, seed=seed)
    position = fixed_position(train)
    guesses = {"no_answer": [""] * len(examples), "fixed_position": fixed_position_answers(examples, position)}
    baselines = {k: answer_scores(golds, v, samples=0) for k, v in guesses.items()}
    lead = {f"{m}_vs_{k}": np.subtract(scores["per_question"][m], b["per_question"][m])
            for k, b in baselines.items() for m in ("exact", "f1")}
    margins = mean_intervals(lead, seed=seed) or {k: (0.0, 0.0) for k in lead}
    learned = bool(examples) and all(lo > 0 for lo, _ in margins.values())
    out = {**scores, "baselines": {k: {"exact": b["exact"], "f1": b["f1"]} for k, b in baselines.items()},
           "margins": margins, "learned": learned}
    out["baselines"]["fixed_position"].update(first_word=position[0], words=position[1])
    out["verdict"] = _verdict(out)
    return out


def _verdict(r: dict) -> str:
    """The verdict in words: the model's EM and F1 with intervals against each guess's, and whether it is ahead."""
    iv = r["interval"] or {"exact": (r["exact"],) * 2, "f1": (r["f1"],) * 2}
    none, fixed = r["baselines"]["no_answer"], r["baselines"]["fixed_position"]
    first, n = fixed["first_word"], fixed["words"]
    words = f"word {first + 1}" if n == 1 else f"words {first + 1}-{first + n}"
    said = (f"exact match {r['exact']:.1%} (95% interval {iv['exact'][0]:.1%}-{iv['exact'][1]:.1%}) and F1 "
            f"{r['f1']:.3f} ({iv['f1'][0]:.3f}-{iv['f1'][1]:.3f}) on {r['n']:,} held-out questions, against "
            f"{none['exact']:.1%} / {none['f1']:.3f} for always answering \"no answer\" and {fixed['exact']:.1%} / "
            f"{fixed['f1']:.3f} for always answering the context's {words} (where training answers most often "
            "stand)")
    if r["learned"]:
        return f"Learned: {said}; ahead of both beyond the 95% interval of the difference."
    behind = dict.fromkeys(k.split("_vs_")[1] for k, (lo, _) in r["margins"].items() if lo <= 0)
    names = {"no_answer": 'always answering "no answer"', "fixed_position": "the fixed-position guess"}
    return (f"Not learned: {said}; not ahead of {' or of '.join(names[k] for k in behind)} beyond what chance "
            "gives on these questions. Train longer, on more questions, or check that the answers follow from the "
            "contexts.")
