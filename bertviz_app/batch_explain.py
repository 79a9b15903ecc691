"""Explain a whole table at once: the prediction and the Integrated Gradients of every row, how far
to trust each (relative delta), and per class the words with the largest mean attribution.

The table goes through the fine-tune intake's reader (``data.read_table``: size, encoding and
binary checks, column names) and column guess. A row whose text cannot be analysed (empty, too
long) is kept in the output with its reason instead of failing the run. Rows are explained in
chunks of similar length through ``attribute_many``, so neighbours share their passes.

Output: ``.csv`` (one row per input row: prediction, probabilities, target, delta, the top words;
cells made safe for spreadsheets) or ``.jsonl`` (everything, with every token's score). The file
is written to a temporary name and renamed, so a cancelled or failed run never leaves a partial
file and never touches an earlier one.

Several processes: under ``accelerate launch --num_processes N`` (or ``torchrun``) each process
explains every N-th row and writes a shard; the main process merges the shards in row order.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .data import guess_columns, read_table, safe_csv_cell
from .encoding import check_text
from .errors import CancelledError, InputError

__all__ = ["BatchExplanation", "explain_csv", "process_device", "OUTPUT_SUFFIXES"]

log = logging.getLogger(__name__)

OUTPUT_SUFFIXES = (".csv", ".jsonl")
CHUNK = 16  # rows explained together (attribute_many groups similar lengths inside a chunk)
TOP_WORDS = 5  # words per row in the CSV's top_words column
TABLE_WORDS = 10  # words per class in the summary table
MIN_COUNT = 2  # a word must occur this often among a class's rows to enter its table


@dataclass(frozen=True)
class BatchExplanation:
    """What ``explain_csv`` did. ``top_words[class]``: (word, mean attribution, count), largest
    mean first, over the rows predicted (or targeted) as that class."""

    path: Path | None  # the file written (None in a non-main process)
    rows: int
    explained: int
    skipped: tuple[tuple[int, str], ...]  # (spreadsheet row, reason)
    seconds: float
    processes: int = 1
    top_words: dict[str, list[tuple[str, float, int]]] = field(default_factory=dict)
    mean_relative_delta: float | None = None

    @property
    def texts_per_s(self) -> float:
        return self.explained / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict:
        return {"path": str(self.path) if self.path else None, "rows": self.rows, "explained": self.explained,
                "skipped": [{"row": r, "reason": why} for r, why in self.skipped], "seconds": round(self.seconds, 3),
                "texts_per_s": round(self.texts_per_s, 3) if self.explained else None, "processes": self.processes,
                "mean_relative_delta": self.mean_relative_delta,
                "top_words": {c: [{"word": w, "mean": round(m, 6), "count": n} for w, m, n in ws]
                              for c, ws in self.top_words.items()}}


def check_output(out: str | os.PathLike) -> Path:
    """The output path, checked before any work: a known suffix and a folder it can be written in."""
    from .export import check_output_path

    path = Path(out).expanduser()
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise InputError(f"The output file must end in .csv or .jsonl, got {path.name!r}.")
    return check_output_path(path)


def process_device() -> str | None:
    """The device this process should load its model on under accelerate launch/torchrun
    (cuda:LOCAL_RANK, or cpu on a machine without CUDA); None when not launched that way."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    import torch

    return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if torch.cuda.is_available() else "cpu"


def _distributed() -> tuple[int, int, object | None]:
    """(rank, world size, accelerate state or None) under accelerate launch/torchrun, else (0, 1, None)."""
    device = process_device()
    if device is None:
        return 0, 1, None
    from accelerate import PartialState

    # cpu=True on a machine without CUDA: accelerate otherwise reports one process (no gloo group)
    state = PartialState(cpu=device == "cpu")
    return state.process_index, state.num_processes, state


def explain_csv(lm, source, out: str | os.PathLike, text_column: str | None = None, pair_column: str | None = None,
                target: str | int | None = None, baseline: str = "pad", tolerance: float | None = 0.05,
                n_steps: int = 50, progress: Callable[[int, int], None] | None = None,
                cancel: threading.Event | None = None) -> BatchExplanation:
    """Predict and explain every row of ``source`` (a CSV/TSV path or its bytes) and write ``out``
    (.csv or .jsonl). ``text_column``: default the guessed text column. ``target``: a class for
    every row (default: each row's predicted class). ``tolerance``: IG steps chosen per text for a
    relative delta at most this (None: exactly ``n_steps``). ``progress(done, total)`` after each
    chunk; ``cancel`` set: stop after the current chunk, raise CancelledError, write nothing."""
    from .attribution import _check_args, attribute_many
    from .export import attribution_units
    from .inference import predict

    started = time.perf_counter()
    path = check_output(out)
    _check_args(baseline, n_steps, "prob", tolerance)
    lm.label_index(target)  # an unknown class fails now, not after the first chunk
    table = read_table(source, min_columns=1)  # a table of texts alone is enough to explain
    guess = guess_columns(table)
    text_col = text_column or guess.text
    cols = ", ".join(repr(c) for c in table.columns)
    if not text_col or text_col not in table.columns:
        what = f"There is no column {text_col!r}" if text_col else "No text column could be guessed"
        raise InputError(f"{what} in {table.name}; its columns are {cols}. Name the text column (--text-column).")
    if pair_column and pair_column not in table.columns:
        raise InputError(f"There is no column {pair_column!r} in {table.name}; its columns are {cols}.")

    rows, skipped = [], []
    for row, value in table.df[text_col].items():
        pair = table.df.at[row, pair_column] if pair_column else None
        try:
            text = check_text(None if isinstance(value, float) and math.isnan(value) else value)
            pair = None if pair is None or (isinstance(pair, float) and math.isnan(pair)) or not str(pair).strip() \
                else check_text(pair, "Second text")
        except InputError as exc:
            skipped.append((int(row), str(exc)))
            continue
        rows.append((int(row), text, pair))
    if not rows:
        raise InputError(f"No row of {table.name} has a text to explain in column {text_col!r} "
                         f"({len(skipped)} rows skipped: {skipped[0][1] if skipped else 'the table is empty'}).")

    rank, world, state = _distributed()
    mine = rows[rank::world]
    records: list[dict] = []
    done = 0
    # rows with and without a second text never share a chunk (predict takes all or none)
    single, paired = [r for r in mine if r[2] is None], [r for r in mine if r[2] is not None]
    chunks = [part[i : i + CHUNK] for part in (single, paired) for i in range(0, len(part), CHUNK)]
    for chunk in chunks:
        if cancel is not None and cancel.is_set():
            raise CancelledError(f"Explaining cancelled after {done} of {len(mine)} rows; no file was written "
                                 f"and {path.name} was left as it was.")
        texts = [t for _, t, _ in chunk]
        pairs = [p for _, _, p in chunk] if chunk[0][2] is not None else None
        preds = predict(lm, texts, pairs)
        attrs = attribute_many(lm, texts, target=target, baseline=baseline, n_steps=n_steps, pairs=pairs,
                               tolerance=tolerance)
        for (row, text, pair), pred, attr in zip(chunk, preds, attrs):
            words, scores, special = attribution_units(attr, merge=True)  # (W,): pieces summed into words
            kept = [(w, float(s)) for w, s, sp in zip(words, scores, special) if not sp]
            records.append({
                "row": row, "text": text, **({"pair": pair} if pair is not None else {}),
                "label": pred.label, "scores": {k: float(v) for k, v in pred.scores.items()},
                "truncated": bool(pred.truncated), "target": attr.target,
                "f_x": float(attr.f_x), "f_baseline": float(attr.f_baseline), "delta": float(attr.delta),
                "relative_delta": float(attr.relative_delta) if math.isfinite(attr.relative_delta) else None,
                "n_steps": int(attr.n_steps), "words": [w for w, _ in kept], "attributions": [s for _, s in kept],
            })
        done += len(chunk)
        if progress is not None:
            progress(done, len(mine))

    if state is not None:  # every process writes its shard; the main one merges them in row order
        shard = path.with_name(f".{path.name}.shard{rank}")
        shard.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        state.wait_for_everyone()
        if not state.is_main_process:
            return BatchExplanation(None, len(rows), len(records), (), time.perf_counter() - started, world)
        records = []
        for k in range(world):
            part = path.with_name(f".{path.name}.shard{k}")
            records += [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines() if line]
            part.unlink()
    records.sort(key=lambda r: r["row"])
    _write(path, records, skipped, list(lm.labels))
    rel = [r["relative_delta"] for r in records if r["relative_delta"] is not None]
    return BatchExplanation(path, len(rows) + len(skipped), len(records), tuple(skipped), time.perf_counter() - started,
                            world, top_words(records), float(np.mean(rel)) if rel else None)


def top_words(records: list[dict], n: int = TABLE_WORDS, min_count: int = MIN_COUNT) -> dict[str, list]:
    """Per target class: the words (lower-cased) with the largest mean attribution towards it."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        for w, s in zip(r["words"], r["attributions"]):
            sums[r["target"]][w.lower()].append(s)
    out = {}
    for cls, per_word in sorted(sums.items()):
        rows = [(w, float(np.mean(v)), len(v)) for w, v in per_word.items() if len(v) >= min_count]
        out[cls] = sorted(rows, key=lambda x: -x[1])[:n]
    return out


def _write(path: Path, records: list[dict], skipped: list[tuple[int, str]], labels: list[str]) -> None:
    """Whole or not at all (export.write_text: a temporary file renamed over ``path``)."""
    from .export import write_text

    if path.suffix.lower() == ".jsonl":
        lines = [json.dumps(r, ensure_ascii=False) for r in records]
        lines += [json.dumps({"row": row, "skipped": why}, ensure_ascii=False) for row, why in skipped]
        write_text(path, "".join(line + "\n" for line in lines))
    else:
        write_text(path, _csv(records, skipped, labels))


def _csv(records: list[dict], skipped: list[tuple[int, str]], labels: list[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["row", "text", "label", *[f"p_{c}" for c in labels], "target", "f_x", "f_baseline", "delta",
                "relative_delta", "truncated", "top_words", "status"])
    for r in sorted(records + [{"row": row, "skipped": why} for row, why in skipped], key=lambda x: x["row"]):
        if "skipped" in r:
            w.writerow([r["row"], "", "", *[""] * len(labels), "", "", "", "", "", "", "", f"skipped: {r['skipped']}"])
            continue
        order = sorted(range(len(r["words"])), key=lambda i: -abs(r["attributions"][i]))[:TOP_WORDS]
        top = "; ".join(f"{r['words'][i]} {r['attributions'][i]:+.4f}" for i in order)
        w.writerow([r["row"], safe_csv_cell(r["text"]), safe_csv_cell(r["label"]),
                    *[f"{r['scores'][c]:.6f}" for c in labels], safe_csv_cell(r["target"]), f"{r['f_x']:.6f}",
                    f"{r['f_baseline']:.6f}", f"{r['delta']:.3e}",
                    "" if r["relative_delta"] is None else f"{r['relative_delta']:.4f}", r["truncated"],
                    safe_csv_cell(top), "ok"])
    return buf.getvalue()
