"""The context-mixing measures scored like the attributions (issue 20): each measure's aggregated
[CLS] row (``MixingMaps.cls_scores``) as a token ranking, beside Integrated Gradients and occlusion
as yardsticks, through the comparison the app offers (``compare_methods``).

    python bench/context_mixing.py [--texts 200] [--family-texts 100] [--family roberta] [--threads 1]
    python bench/context_mixing.py --quick          # 20 + 10 texts, 3 long ones: a smoke run

Per model and text: ``compare_methods(lm, text, methods=...)`` with IG, occlusion, raw, norm,
value_zeroing and alti, the order rotated per text (load from other processes hits every method
alike); every method explains the predicted class from the [PAD] baseline. Per method: ERASER AOPC
comprehensiveness (higher = more faithful) and sufficiency (lower = more faithful) over k = 10..50%
(``faithfulness_eval``), Spearman of |scores| over the non-special tokens against IG and against
occlusion, and seconds per text (the method's own ``Attribution.seconds``: the engine's set-up, f(x)
and f(baseline) included, as for every method). Paired differences (measure A minus measure B, per
text, mean +- 2 standard errors) test the papers' ordering: value zeroing and ALTI above
attention-norm above raw attention in agreement with perturbation-based scores.

Cost at 128 tokens: texts made by joining held-out reviews and cutting them to exactly 128 tokens
(``bench.run.long_text``), each explained by IG (the default adaptive tolerance 0.05), value zeroing
and ALTI in turn (rotated), same process; target: value zeroing and ALTI at most IG's seconds.

Models: ``models/default`` (MiniLM-L6, fine-tuned on the reviews) on the first ``--texts`` held-out
reviews, and a model of another family built as bench/explain_families.py builds it (``--family``,
default RoBERTa: hidden 256, 4 layers, 4 heads, byte-level BPE over the training reviews' words;
random weights, then trained here on the training reviews for ``--family-epochs``, default 0.5, so it
is a classifier that reads the reviews; 0 keeps it random) on the first ``--family-texts``.
Writes bench/context_mixing_results.md (and .json).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # ``python bench/context_mixing.py``
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bertviz_app.config import Settings  # noqa: E402

# An entry point: BERTVIZ_* read once, here; every call computes (memo_size 0: no method's result
# is served from the cache, so every cost is measured). Occlusion is never refused on these texts.
SETTINGS = dataclasses.replace(Settings.from_env(), memo_size=0, max_method_seconds=3600.0)

YARDSTICKS = ("integrated_gradients", "occlusion")
MEASURES = ("raw", "norm", "value_zeroing", "alti")
METHODS = YARDSTICKS + MEASURES
NAMES = {"integrated_gradients": "IG (yardstick)", "occlusion": "occlusion (yardstick)",
         "raw": "raw attention (rollout)", "norm": "attention-norm", "value_zeroing": "value zeroing", "alti": "ALTI"}
# the papers' ordering, as pairs (higher, lower) of agreement with perturbation-based scores
ORDER = (("value_zeroing", "norm"), ("alti", "norm"), ("norm", "raw"))
LONG_METHODS = ("integrated_gradients", "value_zeroing", "alti")


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def score_texts(lm, texts: list[str], label: str) -> list[dict]:
    """One record per text: per method its comprehensiveness, sufficiency, seconds and Spearman
    against IG and occlusion."""
    from bertviz_app.interpret.methods import compare_methods

    rows = []
    t0 = time.time()
    for i, text in enumerate(texts):
        order = METHODS[i % len(METHODS):] + METHODS[: i % len(METHODS)]
        c = compare_methods(lm, text, methods=order)
        at = {m: k for k, m in enumerate(c.methods)}
        rec = {"n_tokens": len(c.tokens), "target": c.attributions[0].target, "p": c.faithfulness[0].p_x}
        for m in METHODS:
            k = at[m]
            rec[m] = {"comp": c.faithfulness[k].comprehensiveness, "suff": c.faithfulness[k].sufficiency,
                      "seconds": c.attributions[k].seconds, "rho_ig": float(c.spearman[k, at["integrated_gradients"]]),
                      "rho_occ": float(c.spearman[k, at["occlusion"]])}
        rows.append(rec)
        if (i + 1) % 10 == 0 or i + 1 == len(texts):
            say(f"{label}: {i + 1}/{len(texts)} texts, {time.time() - t0:.0f} s")
    return rows


def train_family(path: Path, train, test, epochs: float, seed: int = 0) -> dict:
    """Train the family's random model (bench/explain_families.py's build) on the training reviews
    in place: AdamW 5e-4, batch 32, 64 tokens, linear decay, ``epochs`` passes; held-out accuracy on
    test reviews 1000-1999 (the scored texts are the first ones, the 128-token ones 200-399)."""
    import transformers as tf

    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)  # every core for the training (not timed against anything)
    tok = tf.AutoTokenizer.from_pretrained(path)
    model = tf.AutoModelForSequenceClassification.from_pretrained(path)
    texts, labels = train.text.tolist(), train.label.tolist()
    steps = int(math.ceil(len(texts) / 32 * epochs))
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: max(0.0, 1 - k / steps))
    gen = torch.Generator().manual_seed(seed)
    order = torch.cat([torch.randperm(len(texts), generator=gen) for _ in range(int(math.ceil(epochs)))])
    model.train()
    t0 = time.time()
    for k in range(steps):
        idx = order[k * 32:(k + 1) * 32].tolist()
        enc = tok([texts[i] for i in idx], truncation=True, max_length=64, padding=True, return_tensors="pt")
        loss = model(**enc, labels=torch.tensor([labels[i] for i in idx])).loss
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        if (k + 1) % 100 == 0:
            say(f"training step {k + 1}/{steps}, loss {float(loss):.3f}")
    model.eval()
    held = test.iloc[1000:2000]
    right = 0
    with torch.no_grad():
        for s in range(0, len(held), 64):
            enc = tok(held.text.tolist()[s:s + 64], truncation=True, max_length=128, padding=True, return_tensors="pt")
            right += int((model(**enc).logits.argmax(-1) == torch.tensor(held.label.tolist()[s:s + 64])).sum())
    model.save_pretrained(path, safe_serialization=True)
    torch.set_num_threads(threads)
    return {"steps": steps, "seconds": time.time() - t0, "accuracy": right / len(held), "held_out": len(held)}


def long_costs(lm, texts: list[str], label: str) -> list[dict]:
    """Seconds of IG, value zeroing and ALTI on each (128-token) text, the order rotated."""
    from bertviz_app.interpret.methods import explain

    rows = []
    for i, text in enumerate(texts):
        order = LONG_METHODS[i % 3:] + LONG_METHODS[: i % 3]
        rec = {}
        for m in order:
            a = explain(lm, text, m)
            rec[m] = a.seconds
            rec["n_tokens"] = len(a.tokens)
        rows.append(rec)
        say(f"{label} long {i + 1}/{len(texts)}: " + ", ".join(f"{m} {rec[m]:.2f} s" for m in LONG_METHODS))
    return rows


def _mean_se(x) -> tuple[float, float, int]:
    x = np.asarray([v for v in x if v is not None and math.isfinite(v)], dtype=np.float64)
    if not len(x):
        return float("nan"), float("nan"), 0
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan"), len(x)


def summarise(rows: list[dict], long_rows: list[dict]) -> dict:
    out = {"texts": len(rows), "mean_tokens": float(np.mean([r["n_tokens"] for r in rows])), "methods": {},
           "order": [], "long": {}}
    for m in METHODS:
        out["methods"][m] = {key: _mean_se([r[m][key] for r in rows]) for key in ("comp", "suff", "rho_ig",
                                                                                    "rho_occ", "seconds")}
    for hi, lo in ORDER:
        cmp = {}
        for key, better in (("rho_occ", 1), ("rho_ig", 1), ("comp", 1), ("suff", -1)):
            diffs = [r[hi][key] - r[lo][key] for r in rows
                     if math.isfinite(r[hi][key]) and math.isfinite(r[lo][key])]
            mean, se, n = _mean_se(diffs)
            signif = n > 1 and abs(mean) > 2 * se
            verdict = ("agrees" if better * mean > 0 else "disagrees") + ("" if signif else " (within noise)")
            cmp[key] = {"diff": mean, "se": se, "n": n, "verdict": verdict}
        out["order"].append({"higher": hi, "lower": lo, **cmp})
    if long_rows:
        out["long"] = {"texts": len(long_rows), "n_tokens": long_rows[0]["n_tokens"],
                       **{m: _mean_se([r[m] for r in long_rows]) for m in LONG_METHODS},
                       "worst_ratio": {m: max(r[m] / r["integrated_gradients"] for r in long_rows)
                                       for m in ("value_zeroing", "alti")}}
    return out


def machine() -> dict:
    import captum
    import transformers

    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                         "transformers": transformers.__version__, "captum": captum.__version__}}


def _f(v: float, digits: int = 3, sign: bool = True) -> str:
    return "-" if not math.isfinite(v) else (f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}")


def write(models: list[dict], info: dict, started, loads: list[float], seconds: float, argv: str, path: Path) -> None:
    busy = max(loads) > 0.6 * (info["cores"] or 1)
    v = info["versions"]
    lines = [
        "# Context-mixing measures scored like the attributions (issue 20)",
        "",
        f"Date: {started:%Y-%m-%d %H:%M} UTC; run took {seconds / 60:.1f} min. Machine: {info['cpu']}, "
        f"{info['cores']} cores, torch threads {info['torch_threads']}, no GPU. Command: "
        f"`python bench/context_mixing.py {argv}`.",
        f"Versions: python {v['python']}, torch {v['torch']}, transformers {v['transformers']}, captum {v['captum']}.",
        f"Load average (1 min) at start / per model / end: {' / '.join(f'{x:.2f}' for x in loads)}"
        + (" -- other processes were using the CPU: absolute seconds are noisy; the methods of one text ran "
           "back to back, their order rotated per text." if busy else "."),
        "",
        "Every method explains the predicted class from the [PAD] baseline through `compare_methods` (the "
        "Attributions tab's comparison and `explain --compare`). A measure's scores are its aggregated [CLS] "
        "row at the last layer. Comprehensiveness / sufficiency: ERASER AOPC over k = 10..50% of the non-special "
        "tokens (probability of the target; comprehensiveness higher = more faithful, sufficiency lower = more "
        "faithful). Spearman: of |scores| over the non-special tokens, against IG and against occlusion (a text "
        "where one side is constant is left out of that mean). Seconds per text: the method's own wall time "
        "(tokenising, f(x) and f(baseline) included, as for every method). Means +- one standard error.",
        "",
    ]
    for mod in models:
        s = mod["summary"]
        lines += [f"## {mod['title']}", "",
                  f"{s['texts']} texts, {s['mean_tokens']:.0f} tokens on average. {mod['about']}", "",
                  "| method | comprehensiveness ↑ | sufficiency ↓ | Spearman vs IG | Spearman vs occlusion | s/text |",
                  "|---|---|---|---|---|---|"]
        for m in METHODS:
            r = s["methods"][m]
            cells = [f"{_f(r[k][0])} ± {_f(r[k][1], sign=False)}" for k in ("comp", "suff")]
            for key, itself in (("rho_ig", "integrated_gradients"), ("rho_occ", "occlusion")):
                cells.append("1 (itself)" if m == itself else f"{_f(r[key][0], 2)} ± {_f(r[key][1], 2, False)}")
            cells.append(f"{r['seconds'][0]:.3f}")
            lines.append(f"| {NAMES[m]} | " + " | ".join(cells) + " |")
        lines += ["", "The papers' ordering, per text (A - B, mean ± 2 SE; \"within noise\": |mean| <= 2 SE):", "",
                  "| A above B | Spearman vs occlusion | Spearman vs IG | comprehensiveness "
                  "| sufficiency (lower: better) |",
                  "|---|---|---|---|---|"]
        for o in s["order"]:
            cells = [f"{_f(o[k]['diff'])} ± {_f(2 * o[k]['se'], sign=False)}: {o[k]['verdict']}"
                     for k in ("rho_occ", "rho_ig", "comp", "suff")]
            lines.append(f"| {NAMES[o['higher']]} > {NAMES[o['lower']]} | " + " | ".join(cells) + " |")
        lg = s.get("long") or {}
        if lg:
            ig = lg["integrated_gradients"][0]
            lines += ["", f"Cost at {lg['n_tokens']} tokens ({lg['texts']} texts, each explained by the three in "
                          "turn, order rotated; target: value zeroing and ALTI at most IG's seconds):", "",
                      "| method | s/text | vs IG (mean) | worst text vs IG | at most IG? |", "|---|---|---|---|---|",
                      f"| IG (adaptive, tolerance 0.05) | {ig:.3f} | 1 | 1 | - |"]
            for m in ("value_zeroing", "alti"):
                mean = lg[m][0]
                ok = "yes" if mean <= ig else "**no**"
                lines.append(f"| {NAMES[m]} | {mean:.3f} | {mean / ig:.2f}x | {lg['worst_ratio'][m]:.2f}x | {ok} |")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    path.with_suffix(".json").write_text(json.dumps({"info": info, "argv": argv, "models": [
        {k: mod[k] for k in ("title", "about", "summary")} for mod in models]}, indent=1), encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=200, help="held-out reviews on the default model")
    ap.add_argument("--family-texts", type=int, default=100, help="held-out reviews on the other family's model")
    ap.add_argument("--family", default="roberta",
                    help="the other family, as bench/explain_families.py builds it (distilbert, roberta, xlm-roberta, "
                         "albert, electra, deberta-v2; '' for none)")
    ap.add_argument("--family-epochs", type=float, default=0.5,
                    help="train the family's random model on the training reviews this many passes first (0: "
                         "score the random model)")
    ap.add_argument("--long-texts", type=int, default=10, help="texts of --long-tokens tokens for the cost row")
    ap.add_argument("--long-tokens", type=int, default=128)
    ap.add_argument("--quick", action="store_true", help="20 + 10 texts and 3 long ones")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--out", default=str(HERE / "context_mixing_results.md"))
    a = ap.parse_args(argv)
    if a.quick:
        a.texts, a.family_texts, a.long_texts = min(a.texts, 20), min(a.family_texts, 10), min(a.long_texts, 3)
    if a.threads:
        torch.set_num_threads(a.threads)
    from transformers import logging as hf_logging

    hf_logging.set_verbosity_error()
    import bertviz_app as bv
    from bench.explain_families import SIZE_TEXT, build
    from bench.run import long_text
    from bertviz_app.train.default_model import rotten_tomatoes_split

    started, t_start = dt.datetime.now(dt.timezone.utc), time.time()
    loads = [os.getloadavg()[0]]
    info = machine()
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    say(f"machine: {info}")
    train, test = rotten_tomatoes_split()
    texts = test.text.tolist()
    tmp = Path(tempfile.mkdtemp(prefix="bench-cm-"))
    models = []
    plan = [(fam, n) for fam, n in [("default", a.texts)] + ([(a.family, a.family_texts)] if a.family else [])
            if n > 0]
    for fam, n in plan:
        if fam == "default":
            lm = bv.load_model("default", device="cpu", settings=SETTINGS)
            cfg = lm.model.config
            title = f"Default model (MiniLM-L6, hidden {cfg.hidden_size}, {cfg.num_hidden_layers} layers, fine-tuned)"
            about = "The first held-out Rotten Tomatoes reviews (never seen in training)."
        else:
            folder = build(fam, tmp / fam, train.text.tolist())
            if a.family_epochs > 0:
                say(f"{fam}: training {a.family_epochs:g} epoch(s)")
                tr = train_family(folder, train, test, a.family_epochs)
                say(f"{fam}: trained, held-out accuracy {tr['accuracy']:.3f}")
            lm = bv.load_model(str(folder), device="cpu", settings=SETTINGS)
            if a.family_epochs > 0:
                title = (f"{fam}: {type(lm.model).__name__}, {SIZE_TEXT}, trained from random weights here "
                         f"({a.family_epochs:g} epoch of the training reviews)")
                about = (f"Built as bench/explain_families.py builds it (seed 0; its own tokenizer class over the "
                         f"training reviews' words), then trained on the {len(train)} training reviews by this script "
                         f"({tr['steps']} steps of 32, AdamW 5e-4, 64 tokens, {tr['seconds']:.0f} s): held-out "
                         f"accuracy {tr['accuracy']:.3f} on {tr['held_out']} reviews the scored texts are not among "
                         "(no pre-training: a weak classifier, but one that reads the reviews). The same first "
                         "held-out reviews as the default model.")
            else:
                title = f"{fam}: {type(lm.model).__name__}, random weights (seed 0), {SIZE_TEXT}"
                about = ("Built as bench/explain_families.py builds it (its own tokenizer class over the training "
                         "reviews' words); its weights are random, so its predictions sit near 0.5 and its "
                         "faithfulness numbers are small: they say which ranking tracks this random function, not "
                         "a trained classifier. The same first held-out reviews.")
        say(f"{fam}: {n} texts")
        rows = score_texts(lm, texts[:n], fam)
        long_rows = []
        if a.long_texts:
            longs = [long_text(texts[200 + 20 * i:], lm.tokenizer, a.long_tokens) for i in range(a.long_texts)]
            long_rows = long_costs(lm, longs, fam)
        models.append({"title": title, "about": about, "summary": summarise(rows, long_rows), "rows": rows})
        loads.append(os.getloadavg()[0])
        write(models, info, started, loads + [os.getloadavg()[0]], time.time() - t_start, argv_text, Path(a.out))
        del lm
    loads.append(os.getloadavg()[0])
    seconds = time.time() - t_start
    write(models, info, started, loads, seconds, argv_text, Path(a.out))
    say(f"wrote {a.out} in {seconds / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
