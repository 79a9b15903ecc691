"""Explaining every entity of 50 sentences with ``bv.explain_entities`` beside transformers-interpret's
``TokenClassificationExplainer``, in the same run, on the same weights (issue 32's number: >= 4x the peer at an
equal or smaller convergence delta).

The model and sentences are bench/tagging.py's: the default classifier's encoder (all-MiniLM-L6-v2) with a seeded
token head over CoNLL-2003's 9 BIO tags (its labels mean nothing: the bench measures speed and the trust
numbers, not quality), and the first review sentences in which it tags at least one entity.

What each side explains, and what is compared:
- ``explain_entities(lm, text)``: every entity of the text, all in one batched computation, the target the sum of
  the entity's pieces' log-probabilities (docs/tagging.md); Integrated Gradients with the steps chosen until the
  relative convergence delta is at most 0.05 (the library's default), and at a fixed 50 steps.
- the peer: ``explainer(text, ignored_labels=["O"])``: Layer Integrated Gradients per non-O piece, one call per
  piece, its target the piece's predicted class probability, 50 steps (its default).
The relative delta of an attribution is |delta| / |F(x) - F(baseline)| (for the peer F(x) - F(baseline) = the
sum of its scores minus its delta); medians and 90th percentiles over all targets are reported beside the
seconds, so "equal or smaller delta" can be read off the table. transformers-interpret installs with
``pip install --no-deps transformers-interpret==0.10.0`` (its pinned dependencies would downgrade the stack).

    python bench/entity_explain.py                 # writes bench/entity_explain_results.md
    python bench/entity_explain.py --sentences 10
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/entity_explain.py``
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tagging import build_tagger, sentences  # noqa: E402


def with_entities(lm, n: int) -> list[str]:
    import bertviz_app as bv

    out = []
    for text in sentences(20 * n):
        if bv.tag(lm, text)[0].entities:
            out.append(text)
        if len(out) == n:
            return out
    return out


def ours(lm, texts: list[str], n_steps: int | None) -> dict:
    import bertviz_app as bv

    rel, targets = [], 0
    started = time.perf_counter()
    for text in texts:
        for a in bv.explain_entities(lm, text, n_steps=n_steps):
            targets += 1
            rel.append(a.relative_delta)
    return {"seconds": time.perf_counter() - started, "targets": targets, "rel": rel}


def peer(folder: Path, texts: list[str]) -> dict:
    from transformers import AutoModelForTokenClassification, AutoTokenizer
    from transformers_interpret import TokenClassificationExplainer

    model = AutoModelForTokenClassification.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    explainer = TokenClassificationExplainer(model, tok)
    rel, targets = [], 0
    started = time.perf_counter()
    for text in texts:
        explainer(text, ignored_labels=["O"])
        for lig in explainer.attributions.values():
            targets += 1
            delta = float(lig.delta.abs().sum())
            change = float(lig._attributions.sum()) - float(lig.delta.sum())
            rel.append(delta / abs(change) if change else float("inf"))
    return {"seconds": time.perf_counter() - started, "targets": targets, "rel": rel}


def row(name: str, r: dict, n_texts: int, peer_s: float | None) -> str:
    q = statistics.quantiles(r["rel"], n=10)[-1] if len(r["rel"]) > 1 else r["rel"][0]
    ratio = f"{peer_s / r['seconds']:.2f}x" if peer_s else "1.00x (peer)"
    return (f"| {name} | {r['targets']} | {r['seconds']:.1f} | {n_texts / r['seconds']:.2f} | "
            f"{statistics.median(r['rel']):.4f} | {q:.4f} | {ratio} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "entity_explain_results.md"))
    args = ap.parse_args(argv)
    import os

    import torch

    import bertviz_app as bv

    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = build_tagger(Path(tmp) / "tagger")
        lm = bv.load_model(str(folder), device="cpu")
        texts = with_entities(lm, args.sentences)
        bv.explain_entities(lm, texts[0])  # warm-up
        adaptive, fixed, them = ours(lm, texts, None), ours(lm, texts, 50), peer(folder, texts)
    lines = [
        "# Explaining every entity: bv.explain_entities beside transformers-interpret",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, torch "
        f"threads {args.threads}, load average {load:.1f} before the run (other work on the machine inflates every "
        "figure; the ratios compare figures of the same run). `python bench/entity_explain.py`",
        "",
        f"{len(texts)} review sentences with at least one entity; the default encoder with a seeded 9-tag head.",
        "",
        "| explainer | targets | seconds | texts/s | median relative delta | 90th pct relative delta | speed vs peer |",
        "|---|---|---|---|---|---|---|",
        row("bv.explain_entities, steps until relative delta <= 0.05 (entities)", adaptive, len(texts),
            them["seconds"]),
        row("bv.explain_entities, 50 steps (entities)", fixed, len(texts), them["seconds"]),
        row("transformers-interpret TokenClassificationExplainer, 50 steps (non-O pieces)", them, len(texts), None),
        "",
        "The peer explains each non-O piece with its own call; bv explains each entity (its pieces' summed "
        "log-probability) with every entity of a text in one batched computation. Target: >= 4x at an equal or "
        "smaller delta.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
