"""Evaluate a labelled file against predict, in the same run: `evaluate_file` on N held-out reviews
(read the file, predict every row, metrics, slices, calibration with a fitted temperature), with and
without the [CLS] geometry at every layer (`layers=True`: vectors from the same forward and probes;
the PCA is computed when the evaluation is stored),
beside in-process `predict` of exactly the same texts; and the served path (`POST /v1/evaluate` on
the app started as a user starts it) beside the same in-process call.

    python bench/evaluate.py                       # 2,000 held-out reviews, 3 rounds
    BERTVIZ_MODELS_DIR=/path/to/models python bench/evaluate.py --rounds 1 --no-served

Issue 21's targets: evaluate <= 1.25x predict; with the geometry at every layer <= 2x. Each round
runs every part once, in an order rotated round by round, so on a shared machine a slow minute hits
all of them; the medians over rounds are compared. Also reports temperature scaling on the default
model: ECE/NLL before and after, the temperature fitted on one half of the reviews and measured on the
other, for three seeds of that split. Writes bench/evaluate_results.md.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/evaluate.py``
    sys.path.insert(0, str(ROOT))

from bertviz_app.config import Settings  # noqa: E402

# An entry point: BERTVIZ_* read once, here; nothing from the cache (memo_size 0).
SETTINGS = replace(Settings.from_env(), memo_size=0)


def reviews_csv(n: int, labels: list[str]) -> tuple[bytes, list[str]]:
    """The first ``n`` held-out reviews as a CSV (text, label by the model's class name) and their texts."""
    from bertviz_app.train.default_model import rotten_tomatoes_split

    test = rotten_tomatoes_split()[1].iloc[:n]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["text", "label"])
    for text, label in zip(test["text"], test["label"]):
        w.writerow([text, labels[int(label)]])
    return buf.getvalue().encode("utf-8"), test["text"].tolist()


def served_evaluate(url: str, body: bytes, layers: bool) -> tuple[float, dict]:
    req = urllib.request.Request(f"{url}/v1/evaluate", data=json.dumps(
        {"csv": body.decode("utf-8"), "layers": layers} if layers else {"csv": body.decode("utf-8")}).encode(),
        headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=1800) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="held-out reviews (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every part (default: %(default)s)")
    ap.add_argument("--model", default="default")
    ap.add_argument("--no-served", action="store_true", help="skip the served path (POST /v1/evaluate)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "evaluate_results.md"))
    args = ap.parse_args(argv)
    import inspect

    import torch

    import bertviz_app as bv
    from bertviz_app.evaluate.evaluation import evaluate_file

    lm = bv.load_model(args.model, device="cpu", settings=SETTINGS)
    body, texts = reviews_csv(args.n, list(lm.labels))
    has_layers = "layers" in inspect.signature(evaluate_file).parameters
    tmp = tempfile.TemporaryDirectory()
    path = Path(tmp.name) / "reviews.csv"
    path.write_bytes(body)
    bv.predict(lm, texts[:64])  # warm up
    evaluate_file(lm, path.read_bytes()[:20000].rsplit(b"\n", 1)[0], name="warm.csv")

    parts = {
        "predict": lambda: bv.predict(lm, texts),
        "evaluate": lambda: evaluate_file(lm, path),
    }
    if has_layers:
        parts["evaluate_layers"] = lambda: evaluate_file(lm, path, layers=True)
    times: dict[str, list[float]] = {k: [] for k in parts}
    results: dict[str, object] = {}
    load = [os.getloadavg()[0]]
    names = list(parts)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            t = time.perf_counter()
            results[name] = parts[name]()
            times[name].append(time.perf_counter() - t)
            load.append(os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    ev = results["evaluate"]

    served = None
    if not args.no_served:
        served = served_part(args.model, body, has_layers, lambda: evaluate_file(lm, path))

    seeds = [evaluate_file(lm, path, seed=s).calibration for s in (0, 1, 2)]
    lines = report(args, lm, ev, med, times, load, served, seeds, results.get("evaluate_layers"), torch)
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    tmp.cleanup()
    return 0


def served_part(model: str, body: bytes, layers: bool, in_process) -> dict:
    """POST /v1/evaluate on `python app.py` (a subprocess, as a user starts it) against the same
    in-process evaluate, alternated, two of each."""
    from bench.load import free_port, start_server

    port = free_port()
    proc = start_server(model, port, {"BERTVIZ_MAX_EVALUATE_MB": str(max(2, len(body) * 2 / 1e6))})
    url = f"http://127.0.0.1:{port}"
    try:
        served_evaluate(url, body[:20000].rsplit(b"\n", 1)[0], False)  # warm up the route and the model
        out: dict[str, list[float]] = {"served": [], "in_process": []}
        for k in range(2):
            for which in (("served", "in_process") if k % 2 == 0 else ("in_process", "served")):
                if which == "served":
                    out["served"].append(served_evaluate(url, body, False)[0])
                else:
                    t = time.perf_counter()
                    in_process()
                    out["in_process"].append(time.perf_counter() - t)
        if layers:
            out["served_layers"] = [served_evaluate(url, body, True)[0]]
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except Exception:  # noqa: BLE001
            proc.kill()


def report(args, lm, ev, med, times, load, served, seeds, ev_layers, torch) -> list[str]:
    cores = os.cpu_count()
    pred = med["predict"]

    # each round's ratio to that round's predict (a slow minute hits a round's parts alike), then the median
    ratio = {k: statistics.median(t / p for t, p in zip(v, times["predict"])) for k, v in times.items()}

    def row(label: str, key: str) -> str:
        return (f"| {label} | {med[key]:.2f} | {', '.join(f'{x:.2f}' for x in times[key])} | "
                f"**{ratio[key]:.2f}** |")

    lines = [
        "# Evaluate a labelled file: cost against predict, and temperature scaling",
        "",
        f"`python bench/evaluate.py --n {args.n} --rounds {args.rounds}`, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} "
        f"UTC, {platform.processor() or platform.machine()}, {cores} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads. Model `{args.model}` ({lm.num_layers} layers); {ev.rows:,} held-out "
        f"Rotten Tomatoes reviews (a CSV: text, label); accuracy {ev.accuracy:.3f} "
        f"({ev.accuracy_interval[0]:.3f}-{ev.accuracy_interval[1]:.3f}), macro-F1 {ev.macro_f1:.3f}.",
        "",
        f"Machine load (1-minute load average): {load[0]:.2f} before, {min(load[1:]):.2f} to {max(load[1:]):.2f} "
        f"during the timed part on {cores} cores"
        + ("; other processes were running too: read the ratios, not the seconds" if load[0] > 0.6 * (cores or 1)
           else "") + ".",
        "",
        "| part (in process, same texts) | median seconds | rounds | x predict (median of the rounds' ratios) |",
        "|---|---:|---|---:|",
        f"| `predict(lm, texts)` | {pred:.2f} | {', '.join(f'{x:.2f}' for x in times['predict'])} | 1.00 |",
        row("`evaluate_file(lm, file)`: read, predict, metrics, slices, calibration", "evaluate"),
    ]
    if "evaluate_layers" in med:
        lines.append(row("`evaluate_file(lm, file, layers=True)`: + [CLS]/mean vectors at every depth (the same "
                         "forward), probes; PCA only when stored",
                         "evaluate_layers"))
    lines += ["", f"Targets (issue 21): evaluate <= 1.25x predict: **{ratio['evaluate']:.2f}x** "
              f"({'met' if ratio['evaluate'] <= 1.25 else 'NOT met'})"
              + (f"; with the geometry at every layer <= 2x: **{ratio['evaluate_layers']:.2f}x** "
                 f"({'met' if ratio['evaluate_layers'] <= 2 else 'NOT met'})" if "evaluate_layers" in med else
                 "; the geometry part was not available in this build")
              + "."]
    if served:
        s, i = statistics.median(served["served"]), statistics.median(served["in_process"])
        lines += ["", "Served path: `POST /v1/evaluate` with the same CSV on `python app.py` (a subprocess on this "
                  "machine, the body sent as JSON), alternated with the in-process `evaluate_file`, two of each: "
                  f"served {', '.join(f'{x:.2f}' for x in served['served'])} s, in process "
                  f"{', '.join(f'{x:.2f}' for x in served['in_process'])} s: **served {s / i:.2f}x in process**."
                  + (f" With `layers: true`: {served['served_layers'][0]:.2f} s." if "served_layers" in served
                     else "")]
    c = ev.calibration
    lines += [
        "",
        "## Temperature scaling (default model, held-out reviews)",
        "",
        "The temperature is fitted on one half of the reviews (drawn at random by the seed) and ECE (15 bins), NLL "
        "and Brier are measured before and after on the other half, never on the rows it was fitted on.",
        "",
        "| seed | T | fitted on | measured on | ECE before | ECE after | NLL before | NLL after | Brier before | "
        "Brier after |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {s['seed']} | {s['temperature']:.3f} | {s['fitted_on_rows']:,} | {s['measured_on_rows']:,} | "
          f"{s['ece']:.4f} | {s['ece_after']:.4f} | {s['nll']:.4f} | {s['nll_after']:.4f} | {s['brier']:.4f} | "
          f"{s['brier_after']:.4f} |" for s in seeds),
        "",
        f"Seed 0 is the evaluation above ({c['fitted_on_rows']:,} rows to fit, {c['measured_on_rows']:,} to measure).",
    ]
    if ev_layers is not None and getattr(ev_layers, "probes", None):
        best_c = max(ev_layers.probes, key=lambda p: p["cls_probe_accuracy"])
        best_m = max(ev_layers.probes, key=lambda p: p["mean_probe_accuracy"])
        lines += ["", f"Probes (5-fold logistic regression per depth): [CLS] best at layer {best_c['layer']} "
                  f"({best_c['cls_probe_accuracy']:.3f}), the word mean at layer {best_m['layer']} "
                  f"({best_m['mean_probe_accuracy']:.3f})."]
    lines.append("")
    return lines


if __name__ == "__main__":
    sys.exit(main())
