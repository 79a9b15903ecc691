"""Explain a whole table at once: the prediction of every row, its attributions by one or more
methods (Integrated Gradients by default; any of ``BATCH_METHODS``), how far to trust each (IG's
relative delta, and every method's ERASER faithfulness: comprehensiveness and sufficiency AOPC),
what each method cost, and per class the words with the largest mean attribution.

The table goes through the fine-tune intake's reader (``data.read_table``: size, encoding and
binary checks, column names) and column guess. A row whose text cannot be analysed (empty, too
long) is kept in the output with its reason instead of failing the run. Rows are explained in
chunks: Integrated Gradients through ``attribute_many`` (texts of similar length share their
passes), the other methods one row at a time through ``methods.explain``. A row a per-word method
would take too long on (its cost refusal, ``max_method_seconds``) gets the reason in that method's
cells; the other rows and methods go on. The faithfulness of a chunk's attributions is measured in
one padded batch per method (``faithfulness_many``).

Output: ``.csv`` (one row per input row: every input column first, unchanged and in order, with
the header as given; then what the app adds: prediction, probabilities, target, and per method its
top words, comprehensiveness, sufficiency and seconds; IG also its delta) or ``.jsonl`` (one object
per input row: the row's cells as given under ``"input"``, then everything: every word's score per
method, faithfulness per k). The file is written to a temporary name and renamed, so a cancelled or
failed run never leaves a partial file and never touches an earlier one.

Added CSV columns never collide with the input's: each is ``bv_`` + its name (``bv_row``,
``bv_prediction``, ``bv_p_<class>``, ``bv_ig_top_words``...); when the input already has a column
of that name, ``_2`` (then ``_3``...) is appended until the name is free (``added_columns``).

Spreadsheet guard: a CSV cell a spreadsheet would run as a formula (text starting with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return, and not a number) gets a leading ``'``; the row's
``bv_guarded`` cell and the run's notes name the columns and rows that got one. ``raw=True`` writes
the CSV without the guard; the JSONL is never guarded (JSON is not run by spreadsheets).

Several processes: under ``accelerate launch --num_processes N`` (or ``torchrun``) each process
explains every N-th row and writes a shard; the main process merges the shards in row order.

A Ray cluster: ``engine=service.ray_engine.RayEngine(...)`` (``--engine ray``) sends the same chunks to a
pool of Ray actors that run ``explain_chunk`` on a model each loads once from ``lm.path``; the records
come back here and are written as above (docs/scale.md).

``predict_csv`` is the same door for predictions alone (``predict-csv``): the same reader, skipped rows,
output rules and guard, with ``bv_row``, ``bv_prediction``, ``bv_p_<class>``, ``bv_truncated``,
``bv_status`` and ``bv_guarded`` after the input's columns (``prediction_columns``).
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import CancelledError, InputError
from ..models.encoding import check_text
from ..models.inference import predict
from ..train.data import format_rows, guess_columns, read_table, safe_csv_cell
from . import methods as attribution_methods  # looked up per call: a test wraps methods.explain
from .attribution import attribute_many
from .attribution_options import check_args, steps_mode
from .export import attribution_units, check_output_path, write_text
from .faithfulness_eval import faithfulness_many

__all__ = ["BATCH_METHODS", "BatchExplanation", "BatchPrediction", "explain_csv", "explain_chunk", "predict_csv",
           "predict_chunk", "method_keys", "process_device", "OUTPUT_SUFFIXES"]

log = logging.getLogger(__name__)

OUTPUT_SUFFIXES = (".csv", ".jsonl")
PREFIX = "bv_"  # what starts the name of every column the app adds to the CSV (added_columns)
CHUNK = 16  # rows explained together (attribute_many groups similar lengths inside a chunk)
TOP_WORDS = 5  # words per row in the CSV's top_words column
TABLE_WORDS = 10  # words per class in the summary table
MIN_COUNT = 2  # a word must occur this often among a class's rows to enter its table
# The methods a table can be explained with, by the short names the CLI, the files and the UI use
# ("ig" for methods.explain's "integrated_gradients"; the others are methods.METHODS' own names).
BATCH_METHODS = ("ig", "gradient_x_input", "saliency", "occlusion", "kernel_shap", "lime")
_FULL = {"ig": "integrated_gradients"}


def method_keys(methods: str | Sequence[str]) -> tuple[str, ...]:
    """The methods asked for, as short names in the order given: a sequence or a comma-separated
    string; "integrated_gradients" is read as "ig". Unknown or repeated names fail with the choices."""
    names = [m.strip() for m in methods.split(",")] if isinstance(methods, str) else [str(m).strip() for m in methods]
    keys = tuple("ig" if m == "integrated_gradients" else m for m in names if m)
    if not keys:
        raise InputError(f"No method given: choose some of {', '.join(BATCH_METHODS)}.")
    for k in keys:
        if k not in BATCH_METHODS:
            raise InputError(f"Unknown attribution method {k!r}: choose some of {', '.join(BATCH_METHODS)}.")
    if len(set(keys)) != len(keys):
        raise InputError("A method is listed twice: name each once.")
    return keys


@dataclass(frozen=True)
class BatchExplanation:
    """What ``explain_csv`` did. ``top_words[class]``: (word, mean attribution, count), largest
    mean first, over the rows predicted (or targeted) as that class, by the first method;
    ``method_top_words[method][class]`` the same for every method. ``method_stats[method]``: rows
    it explained and refused, the mean comprehensiveness and sufficiency AOPC over its rows, and
    its seconds per text (the attribution, and separately the faithfulness passes)."""

    path: Path | None  # the file written (None in a non-main process)
    rows: int
    explained: int
    skipped: tuple[tuple[int, str], ...]  # (spreadsheet row, reason)
    seconds: float
    processes: int = 1
    top_words: dict[str, list[tuple[str, float, int]]] = field(default_factory=dict)
    mean_relative_delta: float | None = None  # Integrated Gradients' (None: IG not among the methods)
    methods: tuple[str, ...] = ("ig",)
    method_stats: dict[str, dict] = field(default_factory=dict)
    method_top_words: dict[str, dict[str, list[tuple[str, float, int]]]] = field(default_factory=dict)
    # CSV cells a spreadsheet would run as formulas, by output column: the input's spreadsheet rows (1: the
    # header). Guarded (a leading ') unless ``raw``; as given in a raw CSV; empty for JSONL.
    formula_cells: dict[str, tuple[int, ...]] = field(default_factory=dict)
    raw: bool = False
    notes: tuple[str, ...] = ()  # what the reader did on the way in, and the guard's note
    engine: str = "local"  # where the rows were explained: "local" (this process or accelerate's) or "ray"

    @property
    def texts_per_s(self) -> float:
        return self.explained / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict:
        return {"path": str(self.path) if self.path else None, "rows": self.rows, "explained": self.explained,
                "skipped": [{"row": r, "reason": why} for r, why in self.skipped], "seconds": round(self.seconds, 3),
                "texts_per_s": round(self.texts_per_s, 3) if self.explained else None, "processes": self.processes,
                "mean_relative_delta": self.mean_relative_delta, "methods": list(self.methods),
                "method_stats": self.method_stats, "top_words": _words_json(self.top_words),
                "method_top_words": {m: _words_json(t) for m, t in self.method_top_words.items()},
                "formula_cells": {c: list(r) for c, r in self.formula_cells.items()}, "raw": self.raw,
                "notes": list(self.notes), "engine": self.engine}


def _words_json(table: dict[str, list[tuple[str, float, int]]]) -> dict:
    return {c: [{"word": w, "mean": round(m, 6), "count": n} for w, m, n in ws] for c, ws in table.items()}


def check_output(out: str | os.PathLike) -> Path:
    """The output path, checked before any work: a known suffix and a folder it can be written in."""
    path = Path(out).expanduser()
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise InputError(f"The output file must end in .csv or .jsonl, got {path.name!r}.")
    return check_output_path(path)


def process_device(world_size: int = 1, local_rank: int = 0) -> str | None:
    """The device this process should load its model on under accelerate launch/torchrun, given the
    launcher's WORLD_SIZE and LOCAL_RANK (the CLI reads them): cuda:``local_rank``, or cpu on a
    machine without CUDA; None when not launched that way (``world_size`` 1)."""
    if int(world_size) <= 1:
        return None
    import torch

    return f"cuda:{int(local_rank)}" if torch.cuda.is_available() else "cpu"


def _distributed(world_size: int, local_rank: int) -> tuple[int, int, object | None]:
    """(rank, world size, accelerate state or None) under accelerate launch/torchrun, else (0, 1, None)."""
    device = process_device(world_size, local_rank)
    if device is None:
        return 0, 1, None
    from accelerate import PartialState

    # cpu=True on a machine without CUDA: accelerate otherwise reports one process (no gloo group)
    state = PartialState(cpu=device == "cpu")
    return state.process_index, state.num_processes, state


def explain_csv(lm, source, out: str | os.PathLike, text_column: str | None = None, pair_column: str | None = None,
                target: str | int | None = None, baseline: str = "pad", tolerance: float | None = None,
                n_steps: int | None = None, progress: Callable[[int, int], None] | None = None,
                cancel: threading.Event | None = None, methods: str | Sequence[str] = ("ig",),
                raw: bool = False, *, world_size: int = 1, local_rank: int = 0, engine=None) -> BatchExplanation:
    """Predict and explain every row of ``source`` (a CSV/TSV path or its bytes) and write ``out``
    (.csv or .jsonl). ``text_column``: default the guessed text column. ``target``: a class for
    every row (default: each row's predicted class). ``methods``: the attribution methods, short
    names of ``BATCH_METHODS`` (a sequence or "ig,occlusion"); each row gets every method's words,
    faithfulness (ERASER comprehensiveness and sufficiency, removed tokens replaced by the
    ``baseline`` token; "zero" reads as "pad") and seconds. IG's steps as for ``attribute``:
    by default chosen per text for a relative delta at most ``DEFAULT_TOLERANCE``; ``tolerance``:
    at most this; ``n_steps`` alone: exactly that many. ``progress(done, total)``
    after each chunk; ``cancel`` set: stop after the current row (IG: the current chunk), raise
    CancelledError, write nothing. ``raw``: write the CSV without the spreadsheet guard (every cell
    exactly as given; a spreadsheet may then run cells starting with = + - @ as formulas).
    ``world_size``, ``local_rank``: the launcher's WORLD_SIZE and LOCAL_RANK under accelerate
    launch/torchrun (the CLI passes them): each process then explains every world_size-th row and
    the main one merges the shards; 1 and 0: this process alone. ``engine``: None, this process; a
    ``service.ray_engine.RayEngine``, the chunks explained on its actors (each loads the model from
    ``lm.path``), the file written here from their records exactly as this process would write it.
    Text limits and IG's max_n_steps come from ``lm.settings``."""
    started = time.perf_counter()
    n_steps, tolerance = steps_mode(n_steps, tolerance)
    path = check_output(out)
    keys = method_keys(methods)
    check_args(baseline, n_steps, "prob", tolerance, max_n_steps=lm.settings.max_n_steps)
    lm.label_index(target)  # an unknown class fails now, not after the first chunk
    table = read_table(source, min_columns=1)  # a table of texts alone is enough to explain
    rows, skipped = _rows_to_explain(table, text_column, pair_column, lm.settings.max_chars)
    if engine is not None and int(world_size) > 1:
        raise InputError("Choose one way to spread the rows: accelerate launch (several processes) or a Ray "
                         "engine, not both.")
    rank, world, state = _distributed(world_size, local_rank)
    mine = rows[rank::world]
    records: list[dict] = []
    # rows with and without a second text never share a chunk (predict takes all or none)
    single, paired = [r for r in mine if r[2] is None], [r for r in mine if r[2] is not None]
    chunks = [part[i : i + CHUNK] for part in (single, paired) for i in range(0, len(part), CHUNK)]

    def stop_if_cancelled():
        if cancel is not None and cancel.is_set():
            raise CancelledError(f"Explaining cancelled after {len(records)} of {len(mine)} rows; no file was written "
                                 f"and {path.name} was left as it was.")

    if engine is not None:  # the chunks on the engine's actors; the file is written here, below
        def arrived(_i: int, part: list[dict]) -> None:
            records.extend(part)
            if progress is not None:
                progress(len(records), len(mine))

        stop_if_cancelled()
        engine.map_chunks(lm, explain_chunk, chunks, dict(keys=keys, target=target, baseline=baseline,
                                                          n_steps=n_steps, tolerance=tolerance),
                          on_result=arrived, cancel=cancel, stoppable=True,
                          cancel_message=lambda _n: f"Explaining cancelled after {len(records)} of {len(mine)} "
                                                    f"rows; no file was written and {path.name} was left as it was.")
    for chunk in chunks if engine is None else ():
        stop_if_cancelled()
        records += explain_chunk(lm, chunk, keys, target, baseline, n_steps, tolerance, stop_if_cancelled)
        if progress is not None:
            progress(len(records), len(mine))

    if state is not None:  # every process writes its shard; the main one merges them in row order
        shard = path.with_name(f".{path.name}.shard{rank}")
        shard.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        state.wait_for_everyone()
        if not state.is_main_process:
            return BatchExplanation(None, len(rows), len(records), (), time.perf_counter() - started, world,
                                    methods=keys)
        records = _merged_shards(path, world)
    res = _finish(lm, path, records, rows, skipped, keys, table, raw, started, world)
    return res if engine is None else replace(res, engine="ray")


def _rows_to_explain(table, text_column: str | None, pair_column: str | None, max_chars: int,
                     verb: str = "explain") -> tuple[list[tuple[int, str, str | None]], list[tuple[int, str]]]:
    """(rows to explain as (row, text, pair), rows skipped as (row, why)); a missing column fails first."""
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
            text = check_text(None if isinstance(value, float) and math.isnan(value) else value,
                              max_chars=max_chars)
            pair = None if pair is None or (isinstance(pair, float) and math.isnan(pair)) or not str(pair).strip() \
                else check_text(pair, "Second text", max_chars)
        except InputError as exc:
            skipped.append((int(row), str(exc)))
            continue
        rows.append((int(row), text, pair))
    if not rows:
        raise InputError(f"No row of {table.name} has a text to {verb} in column {text_col!r} "
                         f"({len(skipped)} rows skipped: {skipped[0][1] if skipped else 'the table is empty'}).")
    return rows, skipped


def _merged_shards(path: Path, world: int) -> list[dict]:
    """The main process: every process's shard of records, read in rank order and removed."""
    records = []
    for k in range(world):
        part = path.with_name(f".{path.name}.shard{k}")
        records += [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines() if line]
        part.unlink()
    return records


def _finish(lm, path: Path, records: list[dict], rows: list, skipped: list[tuple[int, str]], keys: tuple[str, ...],
            table, raw: bool, started: float, world: int) -> BatchExplanation:
    """The records in row order written to ``path``, and what they add up to."""
    records.sort(key=lambda r: r["row"])
    formula_cells = _write(path, records, skipped, list(lm.labels), keys, table, raw)
    rel = [r["methods"]["ig"]["relative_delta"] for r in records
           if "ig" in r["methods"] and r["methods"]["ig"].get("relative_delta") is not None]
    by_method = {k: top_words(records, k) for k in keys}
    notes = table.notices + ((guard_note(formula_cells, raw),) if formula_cells else ())
    return BatchExplanation(path, len(rows) + len(skipped), len(records), tuple(skipped), time.perf_counter() - started,
                            world, by_method[keys[0]], float(np.mean(rel)) if rel else None, keys,
                            {k: method_stats(records, k) for k in keys}, by_method, formula_cells,
                            bool(raw) and path.suffix.lower() == ".csv", notes)


def guard_note(formula_cells: dict[str, tuple[int, ...]], raw: bool) -> str:
    """One line naming the cells that start like a formula: guarded with a leading ', or (raw) left as they are."""
    n = sum(len(r) for r in formula_cells.values())
    where = "; ".join(f"column {c!r}: {format_rows(r, 5)}" for c, r in list(formula_cells.items())[:6])
    more = f"; and {len(formula_cells) - 6} more columns" if len(formula_cells) > 6 else ""
    cells = (f"{n:,} CSV cell{'s' if n != 1 else ''} start{'s' if n == 1 else ''} with =, +, -, @, a tab or a carriage "
             f"return ({where}{more}; rows as in the input file, whose header is row 1)")
    if raw:
        return (f"{cells}. The raw CSV has {'them' if n != 1 else 'it'} as given: a spreadsheet may run such a cell "
                "as a formula.")
    return (f"{cells}. Each got a leading ' so a spreadsheet shows it instead of running it as a formula; the row's "
            "bv_guarded cell names its columns. The JSONL output and the raw CSV keep them as given.")


def _go_on() -> None:
    """The cancel check of a chunk explained where no one can cancel it (a Ray actor: the driver stops the job)."""


def explain_chunk(lm, chunk: Sequence[Sequence], keys: tuple[str, ...], target, baseline: str,
                  n_steps: int, tolerance: float | None, stop_if_cancelled: Callable[[], None] = _go_on) -> list[dict]:
    """One chunk of rows, each ``(row, text, pair or None)`` (all with a pair or none): their predictions,
    then per method their attributions (or each row's refusal) and the faithfulness of those
    attributions in one padded batch. The records ``explain_csv`` writes (JSON-safe dicts)."""
    texts = [t for _, t, _ in chunk]
    pairs = [p for _, _, p in chunk] if chunk[0][2] is not None else None
    preds = predict(lm, texts, pairs)
    done: dict[str, list] = {}  # method -> per row: (Attribution, seconds) or the refusal's message
    for key in keys:
        if key == "ig":  # the chunk's texts share their passes: each row is charged an equal share
            start = time.perf_counter()
            attrs = attribute_many(lm, texts, target=target, baseline=baseline, n_steps=n_steps, pairs=pairs,
                                   tolerance=tolerance)
            share = (time.perf_counter() - start) / len(chunk)
            done[key] = [(a, share) for a in attrs]
        else:
            done[key] = []
            for _, text, pair in chunk:
                stop_if_cancelled()
                start = time.perf_counter()
                try:
                    a = attribution_methods.explain(lm, text, _FULL.get(key, key), target=target, baseline=baseline,
                                                    pair=pair, n_steps=n_steps)
                except InputError as exc:  # its cost refusal: this row, this method; the rest go on
                    done[key].append(str(exc))
                    continue
                done[key].append((a, time.perf_counter() - start))
        stop_if_cancelled()
    faith: dict[str, list] = {}
    for key in keys:
        ok = [x[0] for x in done[key] if not isinstance(x, str)]
        start = time.perf_counter()
        measured = iter(faithfulness_many(lm, ok) if ok else [])
        share = (time.perf_counter() - start) / max(1, len(ok))
        faith[key] = [None if isinstance(x, str) else (next(measured), share) for x in done[key]]

    out = []
    for i, ((row, text, pair), pred) in enumerate(zip(chunk, preds)):
        per_method, first = {}, None
        for key in keys:
            x = done[key][i]
            if isinstance(x, str):
                per_method[key] = {"refused": x}
                continue
            a, seconds = x
            f, f_seconds = faith[key][i]
            words, scores, special = attribution_units(a, merge=True)  # (W,): pieces summed into words
            kept = [(w, float(s)) for w, s, sp in zip(words, scores, special) if not sp]
            first = first or (a, [w for w, _ in kept])
            m = {"attributions": [s for _, s in kept], "seconds": round(seconds, 6),
                 "comprehensiveness": f.comprehensiveness, "sufficiency": f.sufficiency, "ks": list(f.ks),
                 "n_tokens": list(f.n_tokens), "comprehensiveness_k": list(f.comprehensiveness_k),
                 "sufficiency_k": list(f.sufficiency_k), "faithfulness_seconds": round(f_seconds, 6)}
            if key == "ig":
                m.update(delta=float(a.delta), n_steps=int(a.n_steps), tolerance=a.tolerance,
                         relative_delta=float(a.relative_delta) if math.isfinite(a.relative_delta) else None)
            per_method[key] = m
        a = first[0] if first else None
        out.append({
            "row": row, "text": text, **({"pair": pair} if pair is not None else {}),
            "label": pred.label, "scores": {k: float(v) for k, v in pred.scores.items()},
            "truncated": bool(pred.truncated), "target": a.target if a else _target_name(lm, target, pred),
            "f_x": float(a.f_x) if a else None, "f_baseline": float(a.f_baseline) if a else None,
            "words": first[1] if first else [], "methods": per_method,
        })
    return out


def _target_name(lm, target, pred) -> str:
    """The class a row would have been explained for (every method refused it)."""
    return pred.label if target is None else lm.labels[lm.label_index(target)]


def method_stats(records: list[dict], key: str) -> dict:
    """One method over the explained rows: how many it explained and refused, its mean
    comprehensiveness and sufficiency AOPC, and its seconds per text (attribution; faithfulness)."""
    ok = [r["methods"][key] for r in records if "refused" not in r["methods"].get(key, {"refused": ""})]
    mean = lambda xs: float(np.mean(xs)) if xs else None  # noqa: E731
    seconds = sum(m["seconds"] for m in ok)
    return {"explained": len(ok), "refused": len(records) - len(ok),
            "mean_comprehensiveness": mean([m["comprehensiveness"] for m in ok]),
            "mean_sufficiency": mean([m["sufficiency"] for m in ok]),
            "seconds_per_text": mean([m["seconds"] for m in ok]),
            "faithfulness_seconds_per_text": mean([m["faithfulness_seconds"] for m in ok]),
            "texts_per_s": len(ok) / seconds if seconds > 0 else None}


def top_words(records: list[dict], method: str = "ig", n: int = TABLE_WORDS,
              min_count: int = MIN_COUNT) -> dict[str, list]:
    """Per target class: the words (lower-cased) with the largest mean attribution towards it by ``method``."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        m = r["methods"].get(method, {})
        for w, s in zip(r["words"], m.get("attributions", ())):
            sums[r["target"]][w.lower()].append(s)
    out = {}
    for cls, per_word in sorted(sums.items()):
        rows = [(w, float(np.mean(v)), len(v)) for w, v in per_word.items() if len(v) >= min_count]
        out[cls] = sorted(rows, key=lambda x: -x[1])[:n]
    return out


def _input_cells(table) -> dict[int, list[str]]:
    """Each data row's cells as read (every one a string; an empty cell is ""), by spreadsheet row."""
    return {int(row): ["" if isinstance(v, float) and math.isnan(v) else str(v) for v in values]
            for row, values in zip(table.df.index, table.df.itertuples(index=False, name=None))}


def _write(path: Path, records: list[dict], skipped: list[tuple[int, str]], labels: list[str],
           keys: tuple[str, ...], table, raw: bool) -> dict[str, tuple[int, ...]]:
    """Whole or not at all (export.write_text: a temporary file renamed over ``path``). Returns the
    CSV cells that start like a formula, by column (empty for JSONL)."""
    inputs = _input_cells(table)
    if path.suffix.lower() == ".jsonl":
        names = table.columns
        lines = [{"row": row, "input": dict(zip(names, inputs[row])), "skipped": why} for row, why in skipped]
        lines += [{"row": r["row"], "input": dict(zip(names, inputs[r["row"]])), **r} for r in records]
        lines.sort(key=lambda x: x["row"])
        write_text(path, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
        return {}
    text, formula_cells = _csv(records, skipped, labels, keys, table.header or table.columns, inputs, raw)
    write_text(path, text)
    return formula_cells


def added_columns(labels: list[str], keys: tuple[str, ...], taken: Sequence[str] = ()) -> list[str]:
    """The names of the columns the app adds to the CSV, in order: ``bv_`` + the row number, the
    prediction, each class's probability, the target, f(x) and f(baseline), truncated, per method
    its block (IG adds its delta, relative delta, steps and the tolerance they were chosen for), the status
    and the guarded columns. A name already in ``taken``
    (the input's columns) gets ``_2``, then ``_3``..., until it is free."""
    per = []
    for k in keys:
        per += ([f"{k}_delta", f"{k}_relative_delta", f"{k}_n_steps", f"{k}_tolerance"] if k == "ig" else []) + [
            f"{k}_top_words", f"{k}_comprehensiveness", f"{k}_sufficiency", f"{k}_seconds"]
    bases = ["row", "prediction", *[f"p_{c}" for c in labels], "target", "f_x", "f_baseline", "truncated", *per,
             "status", "guarded"]
    return _free_names(bases, taken)


def _free_names(bases: Sequence[str], taken: Sequence[str]) -> list[str]:
    """``bv_`` + each base, with ``_2``, ``_3``... appended while the name is in ``taken`` or already given."""
    used, out = set(taken), []
    for base in bases:
        name, k = PREFIX + base, 2
        while name in used:
            name, k = f"{PREFIX}{base}_{k}", k + 1
        used.add(name)
        out.append(name)
    return out


def csv_columns(labels: list[str], keys: tuple[str, ...], input_columns: Sequence[str] = ()) -> list[str]:
    """The CSV's header: the input's columns as given, then ``added_columns``."""
    return [*input_columns, *added_columns(labels, keys, input_columns)]


IG_CELLS = 4  # Integrated Gradients' own cells before a method's block: delta, relative delta, steps, tolerance


def _method_cells(key: str, m: dict, top: str) -> list[str]:
    """One method's block of a CSV row; a refusal puts its reason where the words go, no numbers."""
    if "refused" in m:
        return [""] * (IG_CELLS if key == "ig" else 0) + [f"refused: {m['refused']}", "", "", ""]
    head = [f"{m['delta']:.3e}", "" if m["relative_delta"] is None else f"{m['relative_delta']:.4f}", str(m["n_steps"]),
            "" if m["tolerance"] is None else f"{m['tolerance']:g}"] if key == "ig" else []
    return head + [top, f"{m['comprehensiveness']:.4f}", f"{m['sufficiency']:.4f}", f"{m['seconds']:.4f}"]


def _csv(records: list[dict], skipped: list[tuple[int, str]], labels: list[str], keys: tuple[str, ...],
         input_columns: Sequence[str], inputs: dict[int, list[str]],
         raw: bool) -> tuple[str, dict[str, tuple[int, ...]]]:
    """The CSV text, and the cells that start like a formula by column (input rows; 1: the header).
    Unless ``raw`` each of those gets a leading ' (``safe_csv_cell``) and its row's bv_guarded cell
    lists its columns (a JSON list)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    header = csv_columns(labels, keys, input_columns)
    found: dict[str, list[int]] = {}

    def guarded(row: int, cells: list[str]) -> tuple[list[str], list[str]]:
        """(the cells as written, the columns of those that start like a formula)"""
        hit = [header[i] for i, c in enumerate(cells) if safe_csv_cell(c) != c]
        for col in hit:
            found.setdefault(col, []).append(row)
        return (cells if raw else [safe_csv_cell(c) for c in cells]), hit

    w.writerow(guarded(1, header)[0])
    width = len(header) - len(input_columns) - 1  # the added cells before bv_guarded
    for r in sorted(records + [{"row": row, "skipped": why} for row, why in skipped], key=lambda x: x["row"]):
        row = r["row"]
        if "skipped" in r:
            added = [str(row), *[""] * (width - 2), f"skipped: {r['skipped']}"]
        else:
            cells = []
            for k in keys:
                m = r["methods"][k]
                scores = m.get("attributions", [])
                order = sorted(range(len(scores)), key=lambda i: -abs(scores[i]))[:TOP_WORDS]
                cells += _method_cells(k, m, "; ".join(f"{r['words'][i]} {scores[i]:+.4f}" for i in order))
            added = [str(row), r["label"], *[f"{r['scores'][c]:.6f}" for c in labels], r["target"],
                     "" if r["f_x"] is None else f"{r['f_x']:.6f}",
                     "" if r["f_baseline"] is None else f"{r['f_baseline']:.6f}", str(r["truncated"]), *cells, "ok"]
        out, hit = guarded(row, [*inputs[row], *added])
        w.writerow([*out, "" if raw or not hit else json.dumps(hit, ensure_ascii=False)])
    return buf.getvalue(), {c: tuple(rs) for c, rs in found.items()}


# --------------------------------------------------------------------------- predict a whole file
PREDICT_CHUNK = 64  # rows predicted together (predict batches them by length inside)


@dataclass(frozen=True)
class BatchPrediction:
    """What ``predict_csv`` did: the file written, rows read, rows predicted, rows skipped (spreadsheet
    row, why), seconds, and as ``BatchExplanation``: the formula cells by column, raw, the notes."""

    path: Path
    rows: int
    predicted: int
    skipped: tuple[tuple[int, str], ...]
    seconds: float
    formula_cells: dict[str, tuple[int, ...]] = field(default_factory=dict)
    raw: bool = False
    notes: tuple[str, ...] = ()
    engine: str = "local"

    @property
    def texts_per_s(self) -> float:
        return self.predicted / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict:
        return {"path": str(self.path), "rows": self.rows, "predicted": self.predicted,
                "skipped": [{"row": r, "reason": why} for r, why in self.skipped], "seconds": round(self.seconds, 3),
                "texts_per_s": round(self.texts_per_s, 3) if self.predicted else None, "engine": self.engine,
                "formula_cells": {c: list(r) for c, r in self.formula_cells.items()}, "raw": self.raw,
                "notes": list(self.notes)}


def predict_chunk(lm, chunk: Sequence[Sequence], calibrated: bool = True) -> list[dict]:
    """One chunk of rows, each ``(row, text, pair or None)`` (all with a pair or none): their predictions
    as the records ``predict_csv`` writes."""
    texts = [t for _, t, _ in chunk]
    pairs = [p for _, _, p in chunk] if chunk[0][2] is not None else None
    return [{"row": int(row), "label": p.label, "scores": {k: float(v) for k, v in p.scores.items()},
             "truncated": bool(p.truncated)}
            for (row, _, _), p in zip(chunk, predict(lm, texts, pairs, calibrated=bool(calibrated)))]


def prediction_columns(labels: Sequence[str], taken: Sequence[str] = ()) -> list[str]:
    """The columns ``predict_csv`` adds after the input's: ``bv_`` + row, prediction, each class's
    probability, truncated, status and guarded (a name in ``taken`` gets ``_2``...)."""
    return _free_names(["row", "prediction", *[f"p_{c}" for c in labels], "truncated", "status", "guarded"], taken)


def predict_csv(lm, source, out: str | os.PathLike, text_column: str | None = None, pair_column: str | None = None,
                *, calibrated: bool = True, raw: bool = False, progress: Callable[[int, int], None] | None = None,
                cancel: threading.Event | None = None, engine=None) -> BatchPrediction:
    """Predict every row of ``source`` (a CSV/TSV path or its bytes) and write ``out``: explain_csv's
    reader, column guess, skipped rows and output rules (every input cell as given, then the added
    ``bv_`` columns: ``prediction_columns``; the spreadsheet guard unless ``raw``; .jsonl: the row's
    cells under "input", the label, every class's probability, truncated). ``calibrated``: the
    folder's saved temperature applied, as ``predict``. ``progress(done, total)`` after each chunk;
    ``cancel`` set: CancelledError, nothing written. ``engine``: as for ``explain_csv``."""
    started = time.perf_counter()
    path = check_output(out)
    table = read_table(source, min_columns=1)
    rows, skipped = _rows_to_explain(table, text_column, pair_column, lm.settings.max_chars, "predict")
    single, paired = [r for r in rows if r[2] is None], [r for r in rows if r[2] is not None]
    size = PREDICT_CHUNK if engine is None or engine.chunk_rows is None else engine.chunk_rows
    chunks = [part[i : i + size] for part in (single, paired) for i in range(0, len(part), size)]
    records: list[dict] = []

    def message(_n: int = 0) -> str:
        return (f"Predicting cancelled after {len(records)} of {len(rows)} rows; no file was written and "
                f"{path.name} was left as it was.")

    def arrived(_i: int, part: list[dict]) -> None:
        records.extend(part)
        if progress is not None:
            progress(len(records), len(rows))

    if engine is not None:
        engine.map_chunks(lm, predict_chunk, chunks, dict(calibrated=calibrated), on_result=arrived, cancel=cancel,
                          cancel_message=message)
    for i, chunk in enumerate(chunks if engine is None else ()):
        if cancel is not None and cancel.is_set():
            raise CancelledError(message())
        arrived(i, predict_chunk(lm, chunk, calibrated))
    records.sort(key=lambda r: r["row"])
    formula_cells = _write_predictions(path, records, skipped, list(lm.labels), table, raw)
    notes = table.notices + ((guard_note(formula_cells, raw),) if formula_cells else ())
    return BatchPrediction(path, len(rows) + len(skipped), len(records), tuple(skipped),
                           time.perf_counter() - started, formula_cells, bool(raw) and path.suffix.lower() == ".csv",
                           notes, "local" if engine is None else "ray")


def _write_predictions(path: Path, records: list[dict], skipped: list[tuple[int, str]], labels: list[str], table,
                       raw: bool) -> dict[str, tuple[int, ...]]:
    """As ``_write``, for ``predict_csv``'s records."""
    inputs = _input_cells(table)
    lines = sorted(records + [{"row": row, "skipped": why} for row, why in skipped], key=lambda x: x["row"])
    if path.suffix.lower() == ".jsonl":
        names = table.columns
        write_text(path, "".join(json.dumps({"row": x["row"], "input": dict(zip(names, inputs[x["row"]])), **x},
                                            ensure_ascii=False) + "\n" for x in lines))
        return {}
    columns = list(table.header or table.columns)
    header = [*columns, *prediction_columns(labels, columns)]
    buf = io.StringIO()
    w = csv.writer(buf)
    found: dict[str, list[int]] = {}

    def guarded(row: int, cells: list[str]) -> tuple[list[str], list[str]]:
        hit = [header[i] for i, c in enumerate(cells) if safe_csv_cell(c) != c]
        for col in hit:
            found.setdefault(col, []).append(row)
        return (cells if raw else [safe_csv_cell(c) for c in cells]), hit

    w.writerow(guarded(1, header)[0])
    for r in lines:
        if "skipped" in r:
            added = [str(r["row"]), "", *[""] * len(labels), "", f"skipped: {r['skipped']}"]
        else:
            added = [str(r["row"]), r["label"], *[f"{r['scores'][c]:.6f}" for c in labels], str(r["truncated"]), "ok"]
        cells, hit = guarded(r["row"], [*inputs[r["row"]], *added])
        w.writerow([*cells, "" if raw or not hit else json.dumps(hit, ensure_ascii=False)])
    write_text(path, buf.getvalue())
    return {c: tuple(rs) for c, rs in found.items()}
