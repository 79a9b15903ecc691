"""[CLS] geometry by layer against predict: `layer_vectors` (every depth, [CLS] and mean vectors)
plus `probe_layers` (5-fold logistic regression per depth and vector) on the held-out reviews of the
default model, against in-process `predict` of the same texts, in the same run.

    python bench/geometry.py                     # 2,000 held-out reviews, 3 passes
    BERTVIZ_MODELS_DIR=/path/to/models python bench/geometry.py --rounds 1

Issue 21's target: evaluate with the geometry at every layer <= 2x predict. Both are timed on chunks
of --chunk texts in alternating order (predict first, then the geometry first) and summed per pass,
so on a shared machine a slow minute hits both sides; the probes then run on all the rows. Also
times PCA of every depth (`save_projections`) and reports the probe accuracies. Writes
bench/geometry_results.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/geometry.py``
    sys.path.insert(0, str(ROOT))

from bertviz_app.config import Settings  # noqa: E402

# An entry point: BERTVIZ_* read once, here.
SETTINGS = replace(Settings.from_env(), memo_size=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="held-out reviews (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="passes over the texts (default: %(default)s)")
    ap.add_argument("--chunk", type=int, default=250,
                    help="texts per timed call; predict and the geometry alternate chunk by chunk (default: "
                         "%(default)s)")
    ap.add_argument("--model", default="default")
    ap.add_argument("--out", default=str(ROOT / "bench" / "geometry_results.md"))
    args = ap.parse_args(argv)
    import numpy as np
    import torch

    import bertviz_app as bv
    from bertviz_app.evaluate.geometry import layer_vectors, probe_layers, save_projections
    from bertviz_app.train.default_model import rotten_tomatoes_split

    test = rotten_tomatoes_split()[1].iloc[: args.n]
    texts, labels = test["text"].tolist(), test["label"].to_numpy()
    lm = bv.load_model(args.model, device="cpu", settings=SETTINGS)
    bv.predict(lm, texts[:64])  # warm up both paths
    layer_vectors(lm, texts[:64])
    load = [os.getloadavg()[0]]
    t_pred, t_vec, t_probe = [], [], []
    vectors = probes = None
    chunks = [slice(a, a + args.chunk) for a in range(0, len(texts), args.chunk)]
    for r in range(args.rounds):
        pred_s = vec_s = 0.0
        parts = []
        for c, part in enumerate(chunks):  # alternate the order chunk by chunk: load hits both alike
            for which in (("predict", "vectors") if (r + c) % 2 == 0 else ("vectors", "predict")):
                t = time.perf_counter()
                if which == "predict":
                    bv.predict(lm, texts[part])
                    pred_s += time.perf_counter() - t
                else:
                    parts.append(layer_vectors(lm, texts[part]))
                    vec_s += time.perf_counter() - t
            load.append(os.getloadavg()[0])
        t_pred.append(pred_s)
        t_vec.append(vec_s)
        vectors = replace(parts[0], **{k: np.concatenate([getattr(v, k) for v in parts])
                                       for k in ("cls", "mean", "logits", "n_tokens", "truncated")})
        t = time.perf_counter()
        probes = probe_layers(vectors, labels)
        t_probe.append(time.perf_counter() - t)
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        save_projections(tmp, vectors)
    t_pca = time.perf_counter() - t
    pred, vec, probe = (statistics.median(x) for x in (t_pred, t_vec, t_probe))
    acc = float(np.mean(vectors.logits.argmax(1) == labels))
    cores = os.cpu_count()
    majority = float(np.bincount(labels).max() / len(labels))

    def best(kind: str) -> int:
        return max(probes, key=lambda p: (p[f"{kind}_probe_accuracy"], -p["layer"]))["layer"]
    lines = [
        "# [CLS] geometry by layer: cost against predict",
        "",
        f"`python bench/geometry.py --n {args.n} --rounds {args.rounds} --chunk {args.chunk}`, "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} "
        f"UTC, {platform.processor() or platform.machine()}, {cores} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads. Model `{args.model}` ({lm.num_layers} layers, hidden "
        f"{vectors.hidden_size}); {len(texts):,} held-out Rotten Tomatoes reviews; the model's accuracy on them "
        f"(from the geometry pass's own logits) {acc:.3f}.",
        "",
        f"Machine load (1-minute load average): {load[0]:.2f} before the timed part, {min(load[1:]):.2f} to "
        f"{max(load[1:]):.2f} during it on {cores} cores (this benchmark alone keeps about {cores} busy)"
        + ("; other processes were running too: the ratios are the numbers to read, not the seconds"
           if load[0] > 0.6 * (cores or 1) else "") + ".",
        "",
        "| part | median seconds | runs | x predict |",
        "|---|---:|---|---:|",
        f"| `predict(lm, texts)` | {pred:.2f} | {', '.join(f'{x:.2f}' for x in t_pred)} | 1.00 |",
        f"| `layer_vectors(lm, texts)` (all {len(vectors.layers)} depths, [CLS] + mean, float16) | {vec:.2f} | "
        f"{', '.join(f'{x:.2f}' for x in t_vec)} | {vec / pred:.2f} |",
        f"| `probe_layers` (5 folds x {len(vectors.layers)} depths x 2 vectors) | {probe:.2f} | "
        f"{', '.join(f'{x:.2f}' for x in t_probe)} | {probe / pred:.2f} |",
        f"| **geometry at every layer** (vectors + probes) | **{vec + probe:.2f}** | | "
        f"**{(vec + probe) / pred:.2f}** |",
        f"| `save_projections` (3-D PCA of every depth and vector, once) | {t_pca:.2f} | 1 | {t_pca / pred:.2f} |",
        "",
        f"Issue 21's target: evaluate with the geometry at every layer <= 2x predict. Vectors + probes here: "
        f"{(vec + probe) / pred:.2f}x. The geometry pass returns the model's logits too, so an evaluate that takes "
        f"its predictions from it pays the geometry alone, not predict + geometry "
        f"({1 + (vec + probe) / pred:.2f}x if it ran both).",
        "",
        f"`layer_vectors` costs {vec / pred:.2f}x predict: it runs the model's own forward (the last layer for "
        "every token, where predict computes it for [CLS] alone) and copies every depth's [CLS] and mean out as "
        "float16. The probes are 70 liblinear fits on threads (one per core).",
        "",
        f"Vectors in memory: {vectors.nbytes / 1e6:.1f} MB ({len(texts):,} rows x {len(vectors.layers)} depths x "
        f"{vectors.hidden_size} x 2 bytes x 2 vectors).",
        "",
        "Probe accuracy by depth (0 = embeddings; mean over folds, +- std across folds). The majority class is "
        f"{majority:.3f} of the rows; [CLS] at depth 0 is the same vector for every text (no context yet), so its "
        f"probe scores that share. [CLS] is best at layer {best('cls')}, the word mean at layer {best('mean')}.",
        "",
        "| layer | [CLS] probe | mean probe |",
        "|---:|---:|---:|",
        *(f"| {p['layer']} | {p['cls_probe_accuracy']:.3f} +- {p['cls_std']:.3f} | "
          f"{p['mean_probe_accuracy']:.3f} +- {p['mean_std']:.3f} |" for p in probes),
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
