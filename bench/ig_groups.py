"""Integrated Gradients for many texts: ``attribute_many`` with texts grouped 8, 4 and 1 at a time, against one
``attribute`` call per text, on the same held-out reviews in 16-row chunks (as ``explain_csv`` sends them), the
variants taking turns in every round so load that changes hits them alike. It chose ``group_size``: how many texts
share their passes by default on this device.

    python bench/ig_groups.py --model /path/to/model --n 160 --rounds 3
    python bench/ig_groups.py --model /path/to/model --groups 32,16,8,4,1   # wider groups, on a GPU

Writes bench/ig_groups_results.md. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/ig_groups.py``
    sys.path.insert(0, str(ROOT))

from bertviz_app.config import Settings  # noqa: E402

# An entry point: BERTVIZ_* read once, here; every attribution computed, none from the cache (memo_size 0).
SETTINGS = replace(Settings.from_env(), memo_size=0)
CHUNK = 16  # explain_csv's rows per chunk
GROUPS = (8, 4, 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--n", type=int, default=160)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--groups", default=",".join(map(str, GROUPS)), help="group sizes to time, comma-separated")
    ap.add_argument("--out", default=str(ROOT / "bench" / "ig_groups_results.md"))
    args = ap.parse_args(argv)
    groups = [int(g) for g in args.groups.split(",")]

    import torch

    import bertviz_app as bv
    from bertviz_app.interpret.attribution import attribute_many, group_size
    from bertviz_app.train.default_model import rotten_tomatoes_split

    lm = bv.load_model(args.model, settings=SETTINGS)
    texts = rotten_tomatoes_split()[1]["text"].tolist()[: args.n]
    attribute_many(lm, texts[:8], tolerance=args.tolerance, group=8)  # warm-up
    load = [os.getloadavg()[0]]
    seconds: dict[str, list[float]] = {}
    steps: dict[str, float] = {}
    for _ in range(args.rounds):
        for g in groups:
            t = time.perf_counter()
            out = [a for i in range(0, len(texts), CHUNK)
                   for a in attribute_many(lm, texts[i : i + CHUNK], tolerance=args.tolerance, group=g)]
            seconds.setdefault(f"attribute_many, group {g}", []).append(time.perf_counter() - t)
            steps[f"attribute_many, group {g}"] = statistics.mean(a.n_steps for a in out)
        t = time.perf_counter()
        out = [bv.attribute(lm, x, tolerance=args.tolerance) for x in texts]
        seconds.setdefault("attribute, one call per text", []).append(time.perf_counter() - t)
        steps["attribute, one call per text"] = statistics.mean(a.n_steps for a in out)
    load.append(os.getloadavg()[0])
    base = statistics.median(seconds["attribute, one call per text"])
    lines = [
        "# Integrated Gradients for many texts: grouped against one text at a time",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads, device {lm.device.type}, model `{Path(args.model).name}` "
        f"({lm.model.config.num_hidden_layers} layers, hidden {lm.model.config.hidden_size}); 1-minute load average "
        f"{load[0]:.1f} before, {load[1]:.1f} after.",
        f"`python bench/ig_groups.py --n {args.n} --rounds {args.rounds} --tolerance {args.tolerance} "
        f"--groups {args.groups}`: "
        f"{len(texts)} held-out reviews in chunks of {CHUNK}, the variants taking turns in every round; "
        f"`group_size` on this device: {group_size(lm)}.",
        "",
        "| variant | seconds per round (median) | each round | x one call per text | mean steps |",
        "|---|---:|---|---:|---:|",
    ]
    for k, v in seconds.items():
        lines.append(f"| {k} | {statistics.median(v):.2f} | {', '.join(f'{x:.2f}' for x in v)} | "
                     f"{statistics.median(v) / base:.2f} | {steps[k]:.2f} |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
