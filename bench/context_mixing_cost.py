"""Seconds per 128-token text of each context-mixing measure beside Integrated Gradients (issue 20:
value zeroing and ALTI should cost at most what IG costs on the same text, in the same run).

    python bench/context_mixing_cost.py [--texts 4] [--tokens 128] [--rounds 2] [--threads N] [--compare DIR ...]

Model: ``models/default`` of this checkout (MiniLM-L6, hidden 384, 12 heads, feed-forward 1536).
Texts: held-out Rotten Tomatoes reviews joined and cut to exactly ``--tokens`` tokens. Per text every
candidate runs in turn (raw, norm, alti, value_zeroing, IG with the default adaptive tolerance), the
order rotating per text, with the result cache off; the table gives the median seconds per text and
each measure's ratio to IG's median in the same
process, in wall-clock and in CPU seconds (steadier when other processes load the machine).

``--compare DIR`` times the package of another checkout (e.g. ``/work/main``, the code before a
change) on the same model and texts: each checkout runs in its own child process, the children
alternate (this, DIR, this, DIR, ... for ``--rounds`` rounds), so load from other processes hits both
alike. Absolute seconds are indicative only (the 1-minute load average is printed); compare ratios.
No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CANDIDATES = ("raw", "norm", "alti", "value_zeroing", "IG")


def long_text(texts: list[str], tokenizer, n_tokens: int) -> str:
    """Reviews joined until at least ``n_tokens`` tokens, cut to exactly that many with [CLS]/[SEP]."""
    out, i = "", 0
    while len(tokenizer(out)["input_ids"]) < n_tokens + 2 and i < len(texts):
        out = (out + " " + texts[i]).strip()
        i += 1
    enc = tokenizer(out, return_offsets_mapping=True, add_special_tokens=False)
    return out[:enc["offset_mapping"][min(n_tokens - 2, len(enc["offset_mapping"])) - 1][1]]


def child(code: str, n_texts: int, n_tokens: int, threads: int) -> dict:
    """Time every candidate on ``n_texts`` texts with the package of checkout ``code``."""
    sys.path.insert(0, code)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    import dataclasses

    import torch

    if threads:
        torch.set_num_threads(threads)
    from transformers import logging as hf_logging

    hf_logging.set_verbosity_error()
    import bertviz_app as bv
    from bertviz_app.config import Settings
    from bertviz_app.interpret import mixing_measures as cm
    from bertviz_app.train.default_model import rotten_tomatoes_split

    assert Path(bv.__file__).resolve().is_relative_to(Path(code).resolve()), bv.__file__
    lm = bv.load_model(str(ROOT / "models" / "default"), device="cpu",
                       settings=dataclasses.replace(Settings(), memo_size=0))
    reviews = rotten_tomatoes_split()[1].text.tolist()
    texts = [long_text(reviews[40 * k:], lm.tokenizer, n_tokens) for k in range(n_texts)]
    run = {m: (lambda t, m=m: cm.context_mixing(lm, t, measure=m)) for m in CANDIDATES[:-1]}
    run["IG"] = lambda t: bv.attribute(lm, t)
    run["raw"](texts[0])  # warm-up: first-call costs (threads, kernels) out of the table
    run["IG"](texts[0])
    times: dict[str, list[float]] = {m: [] for m in CANDIDATES}
    cpu: dict[str, list[float]] = {m: [] for m in CANDIDATES}
    steps = []
    for k, text in enumerate(texts):
        order = CANDIDATES[k % len(CANDIDATES):] + CANDIDATES[:k % len(CANDIDATES)]
        for m in order:
            t0, c0 = time.perf_counter(), time.process_time()
            res = run[m](text)
            times[m].append(time.perf_counter() - t0)
            cpu[m].append(time.process_time() - c0)
            if m == "IG":
                steps.append(int(res.n_steps))
    n_real = len(lm.tokenizer(texts[0])["input_ids"])
    return {"times": times, "cpu": cpu, "ig_steps": steps, "tokens": n_real, "threads": torch.get_num_threads()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=4, help="texts per child")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2, help="children per checkout, alternating")
    ap.add_argument("--compare", nargs="*", default=[], help="other checkouts whose package to time too")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.texts, a.tokens, a.threads)))
        return 0
    codes = [str(ROOT)] + [str(Path(c).resolve()) for c in a.compare]
    got: dict[str, dict] = {c: {k: {m: [] for m in CANDIDATES} for k in ("times", "cpu")} for c in codes}
    for c in codes:
        got[c]["ig_steps"] = []
    for r in range(a.rounds):
        for code in (codes if r % 2 == 0 else codes[::-1]):
            out = subprocess.run([sys.executable, __file__, "--child", code, "--texts", str(a.texts),
                                  "--tokens", str(a.tokens), "--threads", str(a.threads)],
                                 capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            for m in CANDIDATES:
                for k in ("times", "cpu"):
                    got[code][k][m] += res[k][m]
            got[code]["ig_steps"] += res["ig_steps"]
            print(f"round {r + 1} {code}: done, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    print(f"\n{a.tokens}-token texts ({res['tokens']} with specials), {a.texts} texts x {a.rounds} rounds per "
          f"checkout, torch threads {res['threads']}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for key, what in (("times", "wall-clock"), ("cpu", "CPU (this process, all threads)")):
        print(f"\nmedian {what} seconds per text (ratio to IG's median in the same processes)\n")
        print("| code | " + " | ".join(CANDIDATES) + " | IG steps |")
        print("|---" * (len(CANDIDATES) + 2) + "|")
        for code in codes:
            med = {m: statistics.median(got[code][key][m]) for m in CANDIDATES}
            cells = [f"{med[m]:.2f} ({med[m] / med['IG']:.2f}x)" for m in CANDIDATES]
            print(f"| {code} | " + " | ".join(cells) + f" | {statistics.median(got[code]['ig_steps']):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
