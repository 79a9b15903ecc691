"""A 3,000-token document explained with Integrated Gradients in windows (issue 20's numbers),
beside its yardsticks in the same run, on the default model:

- memory: the peak RSS (``VmHWM``) a fresh process gains while explaining the whole document in
  windows (``explain_windows``), against a fresh process explaining one 512-token text (the
  document's first window, ``attribute``); both measured from the RSS after loading the model and
  one short warm-up explanation. Target: within 1.5x.
- seconds: ``explain_windows`` on the document against the sum of its windows' single
  explanations (each window's text explained alone with ``attribute``, as a user cutting the
  document by hand would), alternated in one process. Target: within 1.2x.

    python bench/long_documents.py                 # writes bench/long_documents_results.md
    BERTVIZ_MODELS_DIR=/path/to/models python bench/long_documents.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/long_documents.py``
    sys.path.insert(0, str(ROOT))

from bertviz_app.config import Settings  # noqa: E402

# An entry point: BERTVIZ_* read once, here; nothing comes from the result cache (memo_size 0).
SETTINGS = replace(Settings.from_env(), memo_size=0)
WARM_UP = "A gorgeous, moving film."


def document(lm, n_tokens: int) -> str:
    """Held-out reviews joined and cut to exactly ``n_tokens`` tokens (specials included)."""
    from bench.run import long_text
    from bertviz_app.train.default_model import rotten_tomatoes_split

    texts = rotten_tomatoes_split()[1].text.tolist()
    return long_text(texts, lm.tokenizer, n_tokens)


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def child(kind: str, n_tokens: int, stride: int) -> None:
    """One measurement in this (fresh) process: prints {"delta_mb", ...} as JSON."""
    import bertviz_app as bv

    lm = bv.load_model(SETTINGS.default_model, settings=SETTINGS)
    doc = document(lm, n_tokens)
    windows = bv.document_windows(lm, doc, stride=stride)
    bv.attribute(lm, WARM_UP)
    base = _rss_kb("VmRSS")
    start = time.perf_counter()
    if kind == "single":
        a, b = windows.windows[0].char_span
        r = bv.attribute(lm, doc[a:b])
        extra = {"tokens": len(r.tokens)}
    else:
        r = bv.explain_windows(lm, doc, stride=stride)
        extra = {"tokens": len(r.tokens), "windows": len(r.windows)}
    seconds = time.perf_counter() - start
    peak = _rss_kb("VmHWM")
    print(json.dumps({"kind": kind, "base_mb": base / 1024, "peak_mb": peak / 1024,
                      "delta_mb": (peak - base) / 1024, "seconds": seconds, **extra}))


def memory(n_tokens: int, stride: int) -> dict:
    out = {}
    for kind in ("single", "windows"):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, __file__, "--child", kind, "--tokens", str(n_tokens), "--stride",
                               str(stride)], capture_output=True, text=True, env=env, check=True)
        out[kind] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def timing(lm, doc: str, stride: int, rounds: int) -> dict:
    import bertviz_app as bv

    plan = bv.document_windows(lm, doc, stride=stride)
    texts = [doc[a:b] for a, b in (w.char_span for w in plan.windows)]
    bv.attribute(lm, WARM_UP)
    windowed, singles, steps_w, steps_s = [], [], 0, 0
    for r in range(rounds):
        order = ("windows", "singles") if r % 2 == 0 else ("singles", "windows")
        for which in order:
            start = time.perf_counter()
            if which == "windows":
                d = bv.explain_windows(lm, doc, stride=stride)
                windowed.append(time.perf_counter() - start)
                steps_w = d.attribution.n_steps
                n_windows, rel = len(d.windows), d.attribution.relative_delta
            else:
                res = [bv.attribute(lm, t) for t in texts]
                singles.append(time.perf_counter() - start)
                steps_s = sum(a.n_steps for a in res)
    return {"windows": n_windows, "windowed_s": statistics.median(windowed), "singles_s": statistics.median(singles),
            "windowed_runs": windowed, "singles_runs": singles, "steps_windowed": steps_w, "steps_singles": steps_s,
            "worst_relative_delta": rel, "window_tokens": [len(w) for w in plan.windows]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=3000)
    ap.add_argument("--stride", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=1, help="alternated timing rounds (default: %(default)s)")
    ap.add_argument("--child", choices=["single", "windows"], help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(ROOT / "bench" / "long_documents_results.md"))
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.tokens, args.stride)
        return 0
    import torch

    import bertviz_app as bv

    lm = bv.load_model(SETTINGS.default_model, settings=SETTINGS)
    doc = document(lm, args.tokens)
    n_doc = len(lm.tokenizer(doc)["input_ids"])
    mem = memory(args.tokens, args.stride)
    t = timing(lm, doc, args.stride, args.rounds)
    mem_ratio = mem["windows"]["delta_mb"] / mem["single"]["delta_mb"]
    time_ratio = t["windowed_s"] / t["singles_s"]
    load = os.getloadavg()[0]
    verdict = lambda ok: "**met**" if ok else "**not met**"  # noqa: E731
    lines = [
        "# A long document explained in windows (issue 20)",
        "",
        f"`python bench/long_documents.py --tokens {args.tokens} --stride {args.stride} --rounds {args.rounds}`, "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), 1-minute load average at the end {load:.2f}"
        + (" (busy: other processes shared the cores)" if load > 0.6 * (os.cpu_count() or 1) else "") + ".",
        "",
        f"Model: `{lm.name}` ({lm.model.config.num_hidden_layers} layers, hidden {lm.model.config.hidden_size}, "
        f"reads {lm.max_length} tokens). Document: held-out reviews joined and cut to {n_doc} tokens; read in "
        f"{t['windows']} windows of {', '.join(map(str, t['window_tokens']))} tokens ({args.stride} shared by "
        "neighbours). Integrated Gradients at the default tolerance (relative delta <= 0.05, steps chosen per "
        "window).",
        "",
        "| measure | windows (`explain_windows`) | yardstick | ratio | target | |",
        "|---|---|---|---|---|---|",
        f"| peak RSS gained (VmHWM - RSS after load and warm-up, fresh process each) | "
        f"{mem['windows']['delta_mb']:.0f} MB | one 512-token explanation: {mem['single']['delta_mb']:.0f} MB | "
        f"{mem_ratio:.2f}x | <= 1.5x | {verdict(mem_ratio <= 1.5)} |",
        f"| seconds (median of {args.rounds}) | {t['windowed_s']:.1f} s | sum of its {t['windows']} windows' single "
        f"explanations: {t['singles_s']:.1f} s | {time_ratio:.2f}x | <= 1.2x | {verdict(time_ratio <= 1.2)} |",
        "",
        f"Memory is resident set size (Linux `/proc/self/status`), not tracemalloc: torch's tensors are not "
        f"Python allocations. Process RSS after load: {mem['single']['base_mb']:.0f} MB (single), "
        f"{mem['windows']['base_mb']:.0f} MB (windows); peaks {mem['single']['peak_mb']:.0f} / "
        f"{mem['windows']['peak_mb']:.0f} MB.",
        "",
        f"Gradient evaluations: {t['steps_windowed']} in windows, {t['steps_singles']} for the single explanations "
        "(each window's own text re-tokenized; a window that starts inside a word starts with another token there, "
        f"so the two are close, not identical). Worst window's relative delta: {t['worst_relative_delta']:.3f}. "
        f"Runs: windows {', '.join(f'{s:.1f}' for s in t['windowed_runs'])} s; singles "
        f"{', '.join(f'{s:.1f}' for s in t['singles_runs'])} s. The windowed run also predicts every window "
        "once (to pick the document's class) and merges the scores.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
