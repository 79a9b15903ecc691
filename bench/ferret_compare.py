"""Our ERASER faithfulness (``bertviz_app.interpret.faithfulness_eval``) against ferret's implementation of the
same metrics (``AOPC_Comprehensiveness_Evaluation`` / ``AOPC_Sufficiency_Evaluation``, ferret-xai
0.4.2) on the same explanations of the same texts: every method of ours on N held-out reviews
(the ones bench/explain_csv.py uses) with the default model.

    pip install ferret-xai==0.4.2 --no-deps     # bench-only, not in requirements.txt
    python bench/ferret_compare.py              # writes bench/ferret_results.md

``import ferret`` fails with only our dependencies (its ``__init__`` imports ``benchmark``, which
imports ``datasets`` and ``seaborn``); the evaluators themselves need only numpy, scipy,
scikit-learn, tqdm and transformers. So the package is registered without running its
``__init__`` (a bare module whose ``__path__`` is ferret's folder) and the evaluator modules are
imported from it, unchanged.

Three pairings per explanation (see ferret_results.md for the exact differences):
  shipped  ours (baseline [PAD] replaces removed tokens, k = 10..50% rounded up) vs ferret's
           defaults (tokens deleted, k = 10..100% rounded down, only positive-scored tokens ranked)
  aligned  ours with [MASK] replacement vs ferret with remove_tokens=False ([MASK]), our per-text
           token counts given as its thresholds (based_on="k") and every token ranked
  same-k   as aligned, with ours averaged over the distinct token counts only (ferret skips a k
           whose token set equals the previous one; short texts repeat counts)
  ids      same-k, with ferret's evaluators handed the id sequences they build instead of their
           decoded text (``IdsTokenizer``), which isolates the round trip's share of the difference
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sys
import time
import types
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/ferret_compare.py``
    sys.path.insert(0, str(ROOT))

from bertviz_app.config import Settings  # noqa: E402

# An entry point: BERTVIZ_* read once, here; every explanation computed (memo_size 0).
SETTINGS = replace(Settings.from_env(), memo_size=0)

METHODS = ("integrated_gradients", "gradient_x_input", "saliency", "occlusion", "kernel_shap", "lime")


DIFFERENCES = """### Where the two definitions differ

Both compute, per threshold, p(target | x) - p(target | x perturbed) with softmax probabilities,
keep [CLS]/[SEP] (ferret's `remove_first_last=True`) and average over the thresholds (AOPC).
Comprehensiveness perturbs the top-ranked tokens, sufficiency everything else. The differences:

1. **Removal.** ferret's default `remove_tokens=True` deletes the tokens (the sequence gets shorter
   and the later tokens move to other positions); ours replaces them with the baseline token
   ([PAD] by default, as attended to as any token; `baseline="mask"`/`"unk"` on request).
   Aligned: ferret `remove_tokens=False` (replaces with [MASK]) vs ours `baseline="mask"`.
2. **Thresholds.** ferret's default `based_on="perc"`, 10%, 20%, ..., 100% of the tokens, each
   count rounded *down* (`int(p * n)`; a count of 0 is skipped); ours k = 10..50%, rounded *up*
   (`ceil(k * n / 100)`), so 100% (every token removed / none kept) never enters ours. Aligned:
   ferret `based_on="k"` with our per-text token counts as its `thresholds`.
3. **Which tokens are ranked.** ferret's default `only_pos=True` ranks only tokens with a score
   above 0 (a text with few positive tokens gets a smaller rationale than k asks for); ours ranks
   every token by signed score. ferret's `only_pos=False` crashes on numpy 2 (`if id_top_k == []`
   on an array raises "operands could not be broadcast"), so the aligned run shifts every score
   by the same constant to make them all positive, which ranks exactly as `only_pos=False`.
4. **Repeated token sets.** ferret skips a threshold whose token set equals the previous one and
   averages over the rest; ours averages over every k, so a short text whose 10% and 20% both
   round up to 1 token counts that value twice (the same-k table averages ours the ferret way).
5. **Ids vs text.** ferret decodes each perturbed id sequence to a string and tokenizes it again;
   a masked or deleted word piece glued to its neighbours then becomes other pieces (`st ##yl
   ##ish` with `##yl` masked decodes to `st [MASK]ish` and re-tokenizes as `st [MASK] is ##h`):
   {changed} of the {pieces} single-piece maskings of these {n} reviews change the token sequence. Ours
   perturbs the ids the explanation ranked. This is what remains in the same-k table.
6. **Ties.** ferret picks the top k with numpy's default (unstable) argsort; ours breaks ties by
   position. Occlusion, KernelSHAP and LIME give a multi-piece word's pieces equal shares, so
   their ties are real; which tied piece goes first can differ.
7. **No rationale.** When no threshold yields a token (e.g. every score <= 0 under
   `only_pos=True`), ferret returns comprehensiveness 0 and sufficiency 1; ours always has >= 1
   token per k when the text has any.
8. **Forward pass.** ferret runs the Hugging Face model's own forward in batches of 8 texts, one
   call for comprehensiveness and one for sufficiency, each also re-running the full text; ours
   runs the 1 + 2K inputs of one explanation (or many: `faithfulness_many`) in one padded batch
   through `classifier_logits` (the last layer for [CLS] only): the same logits up to float
   rounding.
"""


def roundtrip_changes(tok, texts) -> tuple[int, int]:
    """(maskings whose decode + re-tokenize differs from the masked ids, maskings): one piece of
    each text masked at a time, as ferret's text round trip sees it."""
    changed = pieces = 0
    for text in texts:
        ids = tok(text, truncation=True)["input_ids"][1:-1]
        for i in range(len(ids)):
            s = list(ids)
            s[i] = tok.mask_token_id
            changed += tok(tok.decode(s), truncation=True)["input_ids"][1:-1] != s
            pieces += 1
    return changed, pieces


class IdsTokenizer:
    """The tokenizer with ferret's text round trip taken out: ``decode`` hands back a key for the
    ids and calling it on keys gives those ids back ([CLS] ids [SEP], padded), so ferret's own
    evaluator code scores exactly the id sequences it built. Everything else is the tokenizer's."""

    def __init__(self, tok):
        self._tok, self._ids = tok, {}

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def decode(self, ids, **kw):
        key = f"<<ids {len(self._ids)}>>"
        self._ids[key] = [int(i) for i in ids]
        return key

    def __call__(self, text, **kw):
        import torch

        texts = [text] if isinstance(text, str) else list(text)
        if not all(t in self._ids for t in texts):
            return self._tok(text, **kw)
        rows = [[self._tok.cls_token_id, *self._ids[t], self._tok.sep_token_id] for t in texts]
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [self._tok.pad_token_id] * (width - len(r)) for r in rows])  # (B, T)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])  # (B, T)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def load_ferret():
    """ferret's evaluators without ferret's __init__ (see the module docstring); (comp, suff, Explanation,
    version) or raises ImportError with the reason."""
    spec = importlib.util.find_spec("ferret")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("ferret-xai is not installed (pip install ferret-xai==0.4.2 --no-deps)")
    if "ferret" not in sys.modules:
        pkg = types.ModuleType("ferret")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["ferret"] = pkg
    from importlib.metadata import version

    from ferret.evaluators.faithfulness_measures import AOPC_Comprehensiveness_Evaluation, AOPC_Sufficiency_Evaluation
    from ferret.explainers.explanation import Explanation

    return AOPC_Comprehensiveness_Evaluation, AOPC_Sufficiency_Evaluation, Explanation, version("ferret-xai")


def agreement(a, b) -> tuple[float, float, float]:
    """(mean absolute difference, Pearson r, Spearman rho); NaN where a side is constant."""
    from scipy.stats import pearsonr, spearmanr

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    mad = float(np.mean(np.abs(a - b)))
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return mad, float("nan"), float("nan")
    return mad, float(pearsonr(a, b)[0]), float(spearmanr(a, b)[0])


def distinct_mean(values, counts) -> float:
    """Mean over the first value of each distinct token count (ferret's skipping of repeated sets)."""
    seen, kept = set(), []
    for v, n in zip(values, counts):
        if n not in seen:
            seen.add(n)
            kept.append(v)
    return float(np.mean(kept))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=30, help="held-out reviews (default: %(default)s)")
    ap.add_argument("--model", default="default")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", default=str(ROOT / "bench" / "ferret_results.md"))
    ap.add_argument("--no-ids-check", dest="ids_check", action="store_false",
                    help="skip the run of ferret's evaluators without their decode/re-tokenize round trip")
    args = ap.parse_args(argv)
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    head = ["# Faithfulness: ours vs ferret", "",
            f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, CPU only, "
            f"model `{args.model}`, `python bench/ferret_compare.py --n {args.n}`.", ""]
    try:
        Comp, Suff, Explanation, fversion = load_ferret()
    except ImportError as exc:
        text = "\n".join(head + [f"ferret could not be run: {exc}.", ""])
        Path(args.out).write_text(text, encoding="utf-8")
        print(text)
        return 1

    import torch

    import bertviz_app as bv
    from bertviz_app.interpret.faithfulness_eval import faithfulness, faithfulness_many
    from bertviz_app.train.default_model import rotten_tomatoes_split

    torch.set_num_threads(max(1, torch.get_num_threads()))
    texts = rotten_tomatoes_split()[1]["text"].tolist()[: args.n]
    lm = bv.load_model(args.model, device="cpu", settings=SETTINGS)
    model, tok = lm.fp32_model(), lm.tokenizer
    comp_eval, suff_eval = Comp(model, tok), Suff(model, tok)
    ids_tok = IdsTokenizer(tok)
    comp_ids, suff_ids = Comp(model, ids_tok), Suff(model, ids_tok)
    load_before = os.getloadavg()[0]

    def ferret(a, comp=comp_eval, suff=suff_eval, **kw):
        e = Explanation(text=a.info.text, tokens=list(a.tokens), scores=np.asarray(a.scores, dtype=np.float64),
                        explainer=a.method, target=a.target_index)
        c = comp.compute_evaluation(e, target=a.target_index, **kw).score
        s = suff.compute_evaluation(e, target=a.target_index, **kw).score
        return float(c), float(s)

    rows = {m: [] for m in methods}
    t_ours, t_ferret, t_many = {m: 0.0 for m in methods}, {m: 0.0 for m in methods}, {m: 0.0 for m in methods}
    explain_s = {m: 0.0 for m in methods}
    for m in methods:
        attrs = []
        for text in texts:
            t = time.perf_counter()
            attrs.append(bv.explain(lm, text, m))
            explain_s[m] += time.perf_counter() - t
        for a in attrs:
            # interleaved per explanation, so both sides see the same machine load
            t = time.perf_counter()
            pad = faithfulness(lm, a)
            t_ours[m] += time.perf_counter() - t
            mask = faithfulness(lm, a, baseline="mask")
            t = time.perf_counter()
            f_default = ferret(a)
            t_ferret[m] += time.perf_counter() - t
            # every token ranked: ferret's only_pos=False crashes on numpy 2 (``if id_top_k == []`` on an
            # array), so the scores are shifted to be all positive, which ranks exactly as only_pos=False
            shifted = a.__class__(**{**a.__dict__, "scores": a.scores - a.scores.min() + 1.0})
            aligned = {"remove_tokens": False, "based_on": "k", "thresholds": list(mask.n_tokens)}
            f_aligned = ferret(shifted, removal_args=aligned)
            f_ids = ferret(shifted, comp_ids, suff_ids, removal_args=aligned) if args.ids_check else (np.nan, np.nan)
            rows[m].append(dict(pad=(pad.comprehensiveness, pad.sufficiency), mask=(mask.comprehensiveness,
                                mask.sufficiency), same_k=(distinct_mean(mask.comprehensiveness_k, mask.n_tokens),
                                                           distinct_mean(mask.sufficiency_k, mask.n_tokens)),
                                ferret_default=f_default, ferret_aligned=f_aligned, ferret_ids=f_ids,
                                n=len(mask.n_tokens),
                                repeats=len(set(mask.n_tokens)) < len(mask.n_tokens)))
        t = time.perf_counter()
        faithfulness_many(lm, attrs)
        t_many[m] = time.perf_counter() - t
    load_after = os.getloadavg()[0]

    def block(title, ours_key, ferret_key):
        out = [f"### {title}", "", "| method | comprehensiveness: ours / ferret (means) | MAD | Pearson | Spearman "
               "| sufficiency: ours / ferret (means) | MAD | Pearson | Spearman |",
               "|---|---|---|---|---|---|---|---|---|"]
        for m in methods:
            o = np.array([r[ours_key] for r in rows[m]])  # (N, 2)
            f = np.array([r[ferret_key] for r in rows[m]])  # (N, 2)
            cells = []
            for j in (0, 1):
                mad, r, rho = agreement(o[:, j], f[:, j])
                cells += [f"{o[:, j].mean():+.3f} / {f[:, j].mean():+.3f}", f"{mad:.4f}", f"{r:.3f}", f"{rho:.3f}"]
            out.append(f"| {m} | " + " | ".join(cells) + " |")
        return out + [""]

    n = len(texts)
    repeats = sum(r["repeats"] for r in rows[methods[0]])
    lines = head + [
        f"ferret-xai {fversion} (`pip install ferret-xai==0.4.2 --no-deps`; its evaluator modules imported without "
        "its `__init__`, which needs `datasets` and `seaborn`), torch " + torch.__version__ + f", {n} held-out "
        f"Rotten Tomatoes reviews (`rotten_tomatoes_split()[1][:{n}]`), each explained by every method of ours "
        f"(`bv.explain`, baseline [PAD], defaults); both implementations score the same explanation for the "
        f"same target (the predicted class). Load average {load_before:.1f} before / {load_after:.1f} after.",
        "",
        "MAD: mean absolute difference of the per-text AOPC values (probabilities, so in [0, 2]); Pearson and "
        "Spearman over the texts.",
        "",
    ]
    lines += block(
        "Aligned settings: [MASK] replacement, the same token counts, every token ranked", "mask", "ferret_aligned"
    )
    lines += block(
        "Same-k: as aligned, ours averaged over distinct token counts only (ferret skips a k whose "
        "token set repeats the previous one)",
        "same_k",
        "ferret_aligned",
    )
    if args.ids_check:
        lines += block(
            "Same-k without ferret's text round trip: its evaluators given the id sequences they build "
            "(`IdsTokenizer`; what is left is tie order and float rounding)",
            "same_k",
            "ferret_ids",
        )
    lines += block("Shipped settings: ours as the app computes it vs ferret's defaults", "pad", "ferret_default")
    lines += [
        "### Time",
        "",
        "| method | explain (s/text) | ours, one call (ms/expl.) | ours, `faithfulness_many` "
        "over all texts (ms/expl.) | ferret comp + suff (ms/expl.) | ferret / ours |",
        "|---|---|---|---|---|---|",
    ]
    for m in methods:
        lines.append(
            f"| {m} | {explain_s[m] / n:.3f} | {1000 * t_ours[m] / n:.1f} | {1000 * t_many[m] / n:.1f} | "
            f"{1000 * t_ferret[m] / n:.1f} | {t_ferret[m] / t_ours[m]:.2f}x |"
        )
    changed, pieces = roundtrip_changes(tok, texts)
    lines += ["", DIFFERENCES.format(changed=changed, pieces=pieces, n=n)]
    lines += [
        "",
        f"{repeats} of the {n} texts are short enough that two of our k = 10..50% give the same token "
        "count (the same-k table accounts for it).",
        "",
    ]
    text = "\n".join(lines)
    Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
