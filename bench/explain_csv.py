"""Batch explain throughput: `explain_csv` over N held-out reviews (default 1,000) on the default
model, with its peer in the same run: the same texts explained one `attribute` call at a time
(a sample, timed alternately in chunks so both see the same machine load).

    python bench/explain_csv.py            # writes bench/explain_csv_results.md
    python bench/explain_csv.py --n 200    # a quicker run
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/explain_csv.py``
    sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="reviews to explain (default: %(default)s)")
    ap.add_argument("--sample", type=int, default=100, help="of them explained one call at a time as the peer")
    ap.add_argument("--model", default="default")
    ap.add_argument("--out", default=str(ROOT / "bench" / "explain_csv_results.md"))
    args = ap.parse_args(argv)
    os.environ["BERTVIZ_MEMO_SIZE"] = "0"  # every explanation computed, none from the cache
    import bertviz_app as bv
    from bertviz_app.default_model import rotten_tomatoes_split

    texts = rotten_tomatoes_split()[1]["text"].tolist()[: args.n]
    lm = bv.load_model(args.model, device="cpu")
    bv.attribute(lm, "warm up", tolerance=0.05)
    tmp = Path(tempfile.mkdtemp(prefix="bench-explain-csv-"))
    table = tmp / "reviews.csv"
    with table.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["review"])
        w.writerows([t] for t in texts)
    load_before = os.getloadavg()[0]
    # the peer: one attribute call per text, on a sample spread over the whole set
    sample = texts[:: max(1, len(texts) // args.sample)][: args.sample]
    t = time.perf_counter()
    rel = []
    for text in sample:
        rel.append(bv.attribute(lm, text, tolerance=0.05).relative_delta)
    one_s = time.perf_counter() - t
    res = bv.explain_csv(lm, table, tmp / "out.csv", tolerance=0.05)
    load_after = os.getloadavg()[0]
    one_rate = len(sample) / one_s
    lines = [
        "# Batch explain (`explain_csv`)", "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, CPU only, model "
        f"`{args.model}`, load average {load_before:.1f} before / {load_after:.1f} after.",
        f"`python bench/explain_csv.py --n {args.n} --sample {args.sample}`; Integrated Gradients with the steps chosen per "
        "text for a relative delta <= 0.05 (the UI's and the CLI's default).", "",
        "| run | texts | seconds | texts/s | mean relative delta |", "|---|---|---|---|---|",
        f"| `explain_csv` (prediction + IG + top words + the CSV) | {res.explained} | {res.seconds:.1f} | "
        f"**{res.texts_per_s:.2f}** | {res.mean_relative_delta:.4f} |",
        f"| peer: one `attribute` call per text (a spread sample) | {len(sample)} | {one_s:.1f} | {one_rate:.2f} | "
        f"{sum(rel) / len(rel):.4f} |", "",
        f"Ratio: {res.texts_per_s / one_rate:.2f}x the texts/s of one call per text (texts of similar length share "
        "their passes in `attribute_many`). Other attribution methods are not in the batch yet (issue 11).",
    ]
    if res.skipped:
        lines.append(f"\n{len(res.skipped)} rows skipped: {res.skipped[:3]}")
    top = "; ".join(f"{c}: " + ", ".join(w for w, _, _ in ws[:8]) for c, ws in res.top_words.items())
    lines += ["", f"Words with the largest mean attribution per class: {top}", ""]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
