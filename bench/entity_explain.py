"""Explaining every entity of review sentences with ``bv.explain_entities`` beside transformers-interpret's
``TokenClassificationExplainer``, in the same run, on the same weights (issue 32's number: >= 4x the peer at an
equal or smaller convergence delta, over 50 sentences; ``--sentences`` here, ``--max-seconds`` to stop early on a
busy machine).

The model and sentences are bench/tagging.py's: the default classifier's encoder (all-MiniLM-L6-v2) with a seeded
token head over CoNLL-2003's 9 BIO tags (its labels mean nothing: the bench measures speed and the trust
numbers, not quality), and the first review sentences in which it tags at least one entity (the first of them is
a warm-up sentence, explained once by each side and not counted).

What each side explains, and what is compared:
- ``explain_entities(lm, text, tolerance=...)``: every entity of the text, all in one batched computation, the
  target the sum of the entity's pieces' log-probabilities (docs/tagging.md); Integrated Gradients on the word
  vectors, [PAD] baseline, steps chosen until the relative convergence delta is at most the tolerance (0.05, the
  library's default, and a stricter 0.01); with ``--fixed`` also at a fixed 50 steps (the peer's count).
- the peer: ``explainer(text, ignored_labels=["O"])``: Layer Integrated Gradients on the word embeddings, one
  attribution per piece the model tags other than O (special tokens included when so tagged), its target the
  piece's predicted class probability, 50 steps (its default), its baseline [PAD] with the position ids zeroed.
The targets differ in kind (an entity's summed log-probability against one piece's probability), so the per-target
comparison is made per entity: ours for the entity against the peer's for each of the entity's pieces it explained
(the pieces carry the same predicted labels on both sides: same weights, same input ids, checked). "Delta <= the
peer's" counts the entities whose relative delta is at most that of every one of its pieces' peer attributions
(the strict count, used for the headline), and, looser, at most that of its first piece's.

Relative convergence delta of an attribution: |delta| / |F(x) - F(baseline)|, each side its own F and baseline (for
the peer F(x) - F(baseline) = the sum of its scores minus its delta). Medians and 90th percentiles (inclusive:
never past the largest) over each side's own targets are reported beside the seconds. Timing: per sentence, the
sides in turn, the order reversing from one sentence to the next; seconds are sums over the sentences.
transformers-interpret installs with ``pip install --no-deps transformers-interpret==0.10.0`` (its pinned
dependencies would downgrade the stack).

    python bench/entity_explain.py                 # writes bench/entity_explain_results.md
    python bench/entity_explain.py --sentences 3 --out /tmp/entity_explain.md
    nice -n 5 python bench/entity_explain.py --max-seconds 780   # as many of the 50 as fit in 13 minutes
"""

from __future__ import annotations

import argparse
import contextlib
import os
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

from answer_explain import speedup_line  # noqa: E402
from tagging import build_tagger, sentences  # noqa: E402


def with_entities(lm, n: int) -> list[str]:
    """The first ``n`` sentences in which ``lm`` tags at least one entity, each fitting one window."""
    import bertviz_app as bv

    out = []
    for text in sentences(20 * n):
        t = bv.tag(lm, text)[0]
        if t.entities and t.windows == 1 and not t.truncated:
            out.append(text)
        if len(out) == n:
            break
    return out


def peer_rel(lig) -> float:
    delta = float(lig.delta.abs().sum())
    change = float(lig._attributions.sum()) - float(lig.delta.sum())
    return delta / abs(change) if change else float("inf")


def quantile90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10, method="inclusive")[-1] if len(xs) > 1 else xs[0]


@contextlib.contextmanager
def forward_per_target():
    """The entity engine with the generic gradient pass (``AttributionEngine.gradient_pass``: a forward and a backward
    per target at each path point) instead of its own shared forward: the same numbers, the cost before sharing."""
    from bertviz_app.interpret.entity_attribution import LogitsTargetEngine
    from bertviz_app.interpret.ig_engine import AttributionEngine

    shared = LogitsTargetEngine.gradient_pass
    LogitsTargetEngine.gradient_pass = AttributionEngine.gradient_pass
    try:
        yield
    finally:
        LogitsTargetEngine.gradient_pass = shared


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=50)
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="stop after the sentence during which the sides' summed seconds pass this")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fixed", action="store_true", help="also time ours at a fixed 50 steps (the peer's count)")
    ap.add_argument("--unshared", action="store_true",
                    help="also time ours at tolerance 0.05 with a forward pass per target at each path point (the "
                         "engine's generic gradient pass, as before the targets shared it)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "entity_explain_results.md"))
    args = ap.parse_args(argv)

    import torch
    import transformers
    from transformers import AutoModelForTokenClassification, AutoTokenizer
    from transformers_interpret import TokenClassificationExplainer

    import bertviz_app as bv

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    sides = {"tolerance 0.05": dict(tolerance=0.05), "tolerance 0.01": dict(tolerance=0.01)}
    if args.fixed:
        sides["50 steps"] = dict(n_steps=50)
    if args.unshared:
        sides["tolerance 0.05, a forward per target"] = dict(tolerance=0.05, unshared=True)
    sides["peer"] = None
    seconds = {k: 0.0 for k in sides}
    rel = {k: [] for k in sides}  # per side, per its own target
    steps = {k: [] for k in sides}
    ent_rel = {k: [] for k in sides if k != "peer"}  # per entity, parallel to ``peer_pieces``
    peer_pieces: list[list[float]] = []  # per entity: the peer's relative deltas of its pieces
    outside = 0  # peer targets outside every entity (e.g. a special token tagged other than O)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = build_tagger(Path(tmp) / "tagger")
        lm = bv.load_model(str(folder), device="cpu")
        model = AutoModelForTokenClassification.from_pretrained(folder).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        explainer = TokenClassificationExplainer(model, tokenizer)
        texts = with_entities(lm, args.sentences + 1)
        warm, texts = texts[0], texts[1:]
        bv.explain_entities(lm, warm)
        explainer(warm, ignored_labels=["O"])

        done, started = 0, time.perf_counter()
        order = list(sides)
        for i, text in enumerate(texts):
            t = bv.tag(lm, text)[0]
            records = {}
            for side in (order if i % 2 == 0 else order[::-1]):
                t0 = time.perf_counter()
                if sides[side] is None:
                    explainer(text, ignored_labels=["O"])
                    ligs = dict(explainer.attributions)
                else:
                    kw = dict(sides[side])
                    with forward_per_target() if kw.pop("unshared", False) else contextlib.nullcontext():
                        records[side] = bv.explain_entities(lm, text, **kw)
                seconds[side] += time.perf_counter() - t0
            # outside the timing: the same pieces and labels on both sides, then the per-target bookkeeping
            pieces = explainer.decode(explainer.input_ids)
            assert list(pieces[1:-1]) == list(t.tokens), (pieces, t.tokens)
            names = explainer.predicted_class_names
            assert list(names[1:-1]) == list(t.labels), (names, t.labels)
            peer_by_piece = {index - 1: peer_rel(lig) for index, lig in ligs.items()}
            rel["peer"] += list(peer_by_piece.values())
            steps["peer"] += [50] * len(ligs)
            covered = set()
            first_side = next(k for k in sides if k != "peer")
            for j, target in enumerate(r.target for r in records[first_side]):
                a, b = target.pieces
                mine = [peer_by_piece[p] for p in range(a, b) if p in peer_by_piece]
                covered.update(range(a, b))
                peer_pieces.append(mine)
                for side in ent_rel:
                    r = records[side][j]
                    assert r.target.pieces == (a, b), (r.target, target)
                    ent_rel[side].append(float(r.relative_delta))
                    rel[side].append(float(r.relative_delta))
                    steps[side].append(int(r.n_steps))
            outside += sum(p not in covered for p in peer_by_piece)
            done += 1
            print(f"sentence {done}: {len(records[first_side])} entities, {len(ligs)} peer pieces; "
                  + ", ".join(f"{k} {seconds[k]:.1f} s" for k in sides), flush=True)
            if args.max_seconds is not None and time.perf_counter() - started > args.max_seconds:
                break
    load_after = os.getloadavg()
    texts = texts[:done]
    n = done
    n_ent = len(peer_pieces)
    no_peer = sum(not m for m in peer_pieces)

    def counts(k: str) -> tuple[int, int]:
        strict = sum(bool(m) and x <= min(m) for x, m in zip(ent_rel[k], peer_pieces))
        first = sum(bool(m) and x <= m[0] for x, m in zip(ent_rel[k], peer_pieces))
        return strict, first

    def row(k: str) -> str:
        r = rel[k]
        if k == "peer":
            name = ("transformers-interpret TokenClassificationExplainer (LIG on the word embeddings, 50 steps, one "
                    "call per non-O piece: its class probability)")
            le, speed = "-", "1.00x (peer)"
        else:
            name = f"`bv.explain_entities`, {k} (each entity's summed log-probability)"
            strict, first = counts(k)
            le = f"{strict} of {n_ent} ({first} of {n_ent})"
            speed = f"{seconds['peer'] / seconds[k]:.2f}x"
        return (f"| {name} | {len(r)} | {seconds[k]:.1f} | {seconds[k] / n:.2f} | {statistics.median(steps[k]):.0f} "
                f"| {sum(steps[k])} | {statistics.median(r):.4f} | {quantile90(r):.4f} | {max(r):.4f} | {le} "
                f"| {speed} |")

    def lost(k: str) -> str:
        pairs = [(x, min(m)) for x, m in zip(ent_rel[k], peer_pieces) if m and x > min(m)]
        if not pairs:
            return f"{k}: none"
        ours_, theirs = [x for x, _ in pairs], [y for _, y in pairs]
        return (f"{k}: {len(pairs)}, where the peer's smallest piece delta was median {statistics.median(theirs):.4f} "
                f"(max {max(theirs):.4f}) and ours median {statistics.median(ours_):.4f} (max {max(ours_):.4f})")

    eligible = [k for k in ent_rel if counts(k)[0] == n_ent - no_peer]
    best = max(eligible, key=lambda k: seconds["peer"] / seconds[k], default=None)
    words = [len(x.split()) for x in texts]
    stopped = (f" (stopped there by `--max-seconds {args.max_seconds:g}`, of the {args.sentences} asked)"
               if n < args.sentences else "")
    cmd = (f"python bench/entity_explain.py --sentences {args.sentences}"
           + (f" --max-seconds {args.max_seconds:g}" if args.max_seconds is not None else "")
           + (" --fixed" if args.fixed else ""))
    lines = [
        "# Explaining every entity: bv.explain_entities beside transformers-interpret",
        "",
        f"Run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `{cmd}` on {platform.machine()}, {os.cpu_count()} "
        f"cores, {args.threads} torch threads, torch {torch.__version__}, transformers {transformers.__version__}. "
        f"Load average (1, 5, 15 min) {', '.join(f'{x:.1f}' for x in load_before)} before and "
        f"{', '.join(f'{x:.1f}' for x in load_after)} after: a shared machine, so the seconds are inflated; the ratios "
        "compare sides of the same run, interleaved sentence by sentence.",
        "",
        f"{n} review sentences{stopped} of {min(words)}-{max(words)} words with at least one entity (after one "
        f"warm-up sentence); all-MiniLM-L6-v2 with a seeded 9-tag head. {n_ent} entities over "
        f"{len(rel['peer'])} non-O pieces ({outside} of these outside every entity; {no_peer} entities with no "
        "piece the peer explained).",
        "",
        "| explainer | targets | seconds | seconds / sentence | median steps | gradient evaluations "
        "| median relative delta | 90th pct relative delta | largest relative delta "
        "| entities with delta <= every piece's peer delta (<= the first piece's) | speed vs peer |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ] + [row(k) for k in sides] + [
        "",
        "Entities whose delta was above the peer's on one of their pieces: "
        + "; ".join(lost(k) for k in ent_rel) + ".",
        "",
    ]
    lines.append(speedup_line(seconds, best, "entity"))
    lines += [
        "",
        "The targets differ in kind: the peer explains one piece's predicted class probability per attribution, ours "
        "an entity's summed log-probability over its pieces (the library's target, docs/tagging.md). Each side's "
        "delta is relative to its own F(x) - F(baseline); an entity is compared with the peer's attributions of its "
        "own pieces. The peer's baseline also zeroes the position ids; ours replaces only the text's word vectors by "
        "[PAD]'s. The peer makes one attribution of 50 steps per non-O piece, one call each; ours explains every "
        "entity of a text in one batched computation with adaptive steps. Gradient evaluations: the sum of the "
        "targets' steps (ours: one row of the batched passes per entity per path point, each row a copy of the text "
        "with its own F; the peer: 50 per piece, in a batch of its own).",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
