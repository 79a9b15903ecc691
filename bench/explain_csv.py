"""Batch explain throughput and cost per method: `explain_csv` with faithfulness (every row's
comprehensiveness and sufficiency) over N held-out reviews on the default model, one run per
method, with IG's peer in the same run: the same texts explained one `attribute` call at a time
(a spread sample, without faithfulness).

    python bench/explain_csv.py                                  # IG on 1,000 reviews, no other method
    nice python bench/explain_csv.py --n 300 --n-other 100 \\
        --methods ig,gradient_x_input,saliency,occlusion,kernel_shap,lime   # what results.md records

IG runs on the first --n reviews, every other method on the first --n-other (the same texts, so
the per-method seconds compare on one set; IG's are also given over those rows alone). Writes
bench/explain_csv_results.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/explain_csv.py``
    sys.path.insert(0, str(ROOT))

from bertviz_app.config import Settings  # noqa: E402

# An entry point: BERTVIZ_* read once, here; every explanation computed, none from the cache (memo_size 0).
SETTINGS = replace(Settings.from_env(), memo_size=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="reviews IG explains (default: %(default)s)")
    ap.add_argument(
        "--n-other", type=int, default=100, help="reviews each other method explains (default: %(default)s)"
    )
    ap.add_argument("--methods", default="ig", help="comma-separated (explain_csv's names; default: %(default)s)")
    ap.add_argument(
        "--sample", type=int, default=30, help="reviews explained one attribute call at a time as IG's peer"
    )
    ap.add_argument(
        "--together",
        type=int,
        default=0,
        help="also explain the first N reviews with every method in one explain_csv call (the methods "
        "alternate chunk by chunk, so machine load hits them alike); 0: skip (default)",
    )
    ap.add_argument("--only-together", action="store_true", help="skip the one-run-per-method part")
    ap.add_argument("--model", default="default")
    ap.add_argument("--out", default=str(ROOT / "bench" / "explain_csv_results.md"))
    args = ap.parse_args(argv)
    import bertviz_app as bv
    from bertviz_app.interpret.batch_explain import method_keys
    from bertviz_app.train.default_model import rotten_tomatoes_split

    keys = method_keys(args.methods)
    n_max = max(args.n if "ig" in keys else 0, args.n_other if set(keys) - {"ig"} else 0)
    texts = rotten_tomatoes_split()[1]["text"].tolist()[:n_max]
    lm = bv.load_model(args.model, device="cpu", settings=SETTINGS)
    bv.attribute(lm, "warm up", tolerance=0.05)
    tmp = Path(tempfile.mkdtemp(prefix="bench-explain-csv-"))
    started = time.perf_counter()
    nice = os.nice(0)

    def table(n: int) -> Path:
        path = tmp / f"reviews{n}.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["review"])
            w.writerows([t] for t in texts[:n])
        return path

    rows, loads = [], []
    peer = None
    for key in () if args.only_together else keys:
        n = args.n if key == "ig" else args.n_other
        before = os.getloadavg()[0]
        out = tmp / f"{key}.jsonl"
        res = bv.explain_csv(lm, table(n), out, tolerance=0.05, methods=(key,))
        records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        first = [
            m["seconds"] + m["faithfulness_seconds"]
            for r in records
            if "methods" in r and "refused" not in (m := r["methods"][key]) and r["row"] - 2 < args.n_other
        ]  # row 2: the first
        st = res.method_stats[key]
        rows.append((key, res, st, sum(first) / len(first) if first else float("nan")))
        loads.append((key, before, os.getloadavg()[0]))
        if key == "ig":  # the peer: one attribute call per text, on a sample spread over the same texts
            sample = texts[: args.n][:: max(1, args.n // args.sample)][: args.sample]
            t = time.perf_counter()
            for text in sample:
                bv.attribute(lm, text, tolerance=0.05)
            peer = (len(sample), time.perf_counter() - t)
    together = None
    if args.together:
        before = os.getloadavg()[0]
        res = bv.explain_csv(lm, table(args.together), tmp / "together.csv", tolerance=0.05, methods=keys)
        together = (res, before, os.getloadavg()[0])
    total = time.perf_counter() - started

    ig = next((r for r in rows if r[0] == "ig"), None)
    lines = [
        "# Batch explain (`explain_csv`) with faithfulness, cost per method",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores (shared with "
        f"other processes), CPU only, model `{args.model}`, nice {nice}, {total / 60:.1f} min in all.",
        f"`python bench/explain_csv.py --n {args.n} --n-other {args.n_other} --methods {','.join(keys)} "
        f"--sample {args.sample}`: one `explain_csv` run per method over the first N held-out reviews "
        "(`rotten_tomatoes_split()[1]`), each row predicted, explained and its ERASER comprehensiveness and "
        "sufficiency measured (k = 10..50%, removed tokens replaced by [PAD]); IG's steps chosen per text for a "
        "relative delta <= 0.05 (the UI's and the CLI's default), KernelSHAP and LIME with their default samples "
        "(8 per word, 64..400).",
        "",
        "| method | texts | run seconds | **texts/s** (whole run) | s/text: attribution | s/text: faithfulness | "
        f"s/text on the first {args.n_other} | mean comprehensiveness | mean sufficiency | refused | load before / "
        "after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    num = lambda x, f: "–" if x is None else format(x, f)  # noqa: E731
    for (key, res, st, first), (_, lb, la) in zip(rows, loads):
        lines.append(
            f"| {key} | {res.explained} | {res.seconds:.1f} | **{res.texts_per_s:.2f}** | "
            f"{num(st['seconds_per_text'], '.3f')} | {num(st['faithfulness_seconds_per_text'], '.3f')} | {first:.3f} | "
            f"{num(st['mean_comprehensiveness'], '+.3f')} | {num(st['mean_sufficiency'], '+.3f')} | {st['refused']} | "
            f"{lb:.1f} / {la:.1f} |"
        )
    lines.append("")
    if together is not None:
        res, lb, la = together
        lines += [
            f"All methods in one `explain_csv` call on the first {res.explained} reviews ({res.seconds:.1f} s, "
            f"{res.texts_per_s:.3f} texts/s for all of them, load {lb:.1f} before / {la:.1f} after); the "
            "methods take turns chunk by chunk (16 rows), so these seconds compare methods under the same "
            "load:",
            "",
            "| method | s/text: attribution | s/text: faithfulness | texts/s (both) | "
            "mean comprehensiveness | mean sufficiency | refused |",
            "|---|---|---|---|---|---|---|",
        ]
        for key, st in res.method_stats.items():
            both = (st["seconds_per_text"] or 0) + (st["faithfulness_seconds_per_text"] or 0)
            lines.append(
                f"| {key} | {num(st['seconds_per_text'], '.3f')} | "
                f"{num(st['faithfulness_seconds_per_text'], '.3f')} | {1 / both if both else float('nan'):.2f} | "
                f"{num(st['mean_comprehensiveness'], '+.3f')} | {num(st['mean_sufficiency'], '+.3f')} | "
                f"{st['refused']} |"
            )
        lines.append("")
    lines.append(
        "texts/s: rows explained per second of the whole `explain_csv` call (reading, predicting, the "
        "method, faithfulness, writing). s/text: attribution is the method's own time (IG's chunk time "
        "shared equally by its rows), faithfulness the row's share of its chunk's padded faithfulness "
        "batch (11 inputs per row)."
    )
    if ig is not None and peer is not None:
        k, s = peer
        lines += [
            "",
            f"IG peer in the same run: {k} of the same reviews through one `attribute` call each (no "
            f"faithfulness): {s:.1f} s, {k / s:.2f} texts/s; `explain_csv` with faithfulness: "
            f"{ig[1].texts_per_s:.2f} texts/s = {ig[1].texts_per_s / (k / s):.2f}x, mean relative delta "
            f"{ig[1].mean_relative_delta:.4f}.",
        ]
    if ig is not None:
        top = "; ".join(f"{c}: " + ", ".join(w for w, _, _ in ws[:8]) for c, ws in ig[1].top_words.items())
        lines += ["", f"Words with the largest mean IG attribution per class: {top}"]
    lines.append("")
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
