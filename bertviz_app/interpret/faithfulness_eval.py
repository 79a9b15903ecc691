"""ERASER faithfulness (DeYoung et al. 2020) of a token attribution: does removing the tokens it
ranks highest lower the model's probability of the explained class (comprehensiveness), and do
those tokens alone keep it (sufficiency)?

For each k in ``KS`` (percent of the non-special tokens, ranked by signed score, highest first):

    comprehensiveness_k = p(x) - p(x with its top k% tokens replaced by the baseline token)
    sufficiency_k       = p(x) - p(x with every other token replaced by the baseline token)

and the AOPC values are their means over k. Special tokens ([CLS], [SEP], <s>...) are always
kept. p is the target's probability (softmax, or sigmoid for multi-label models) whatever
``output`` the attribution explained. All perturbed inputs go through the model in one batch
(``faithfulness_many``: those of many attributions, padded together).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from ..errors import InputError
from ..models.encoding import encode
from ..models.forward import classifier_logits
from ..models.inference import probabilities
from ..models.registry import LoadedModel
from ..results import Attribution, Faithfulness
from .attribution_options import TOKEN_BUDGET, baseline_ids, speed_options

__all__ = ["KS", "faithfulness", "faithfulness_many", "faithfulness_reading", "check_ks"]

KS = (10, 20, 30, 40, 50)


def faithfulness_reading(target: str, k: int, n: int, total: int, drop: float) -> str:
    head = f"removing the {k}% top-ranked tokens ({n} of {total})"
    if drop >= 0.1:
        return f"{head} drops the probability of {target} by {drop:.2f}: the explanation points at what the model uses"
    if drop > -0.05:
        return (f"{head} changes the probability of {target} by only {drop:+.2f}: the model does not depend on "
                "them much, so this explanation may not show what it uses")
    return (f"{head} raises the probability of {target} by {-drop:.2f}: the top-ranked tokens work against "
            f"{target} in this model, so the ranking is not faithful")


def check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 < k <= 100 for k in ks):
        raise InputError(f"ks must be percentages from 1 to 100, got {ks!r}.")
    return ks


def _baseline_name(attribution: Attribution, baseline: str | None) -> str:
    name = baseline or attribution.baseline
    name = "pad" if name == "zero" else name
    if name not in ("pad", "mask", "unk"):
        raise InputError(f"Unknown baseline {name!r}: choose pad, mask or unk.")
    return name


def faithfulness(lm: LoadedModel, attribution: Attribution, ks: Sequence[int] = KS,
                 baseline: str | None = None) -> Faithfulness:
    """Comprehensiveness and sufficiency (per k and as AOPC) of ``attribution``'s ranking.
    ``baseline`` ("pad", "mask" or "unk"; None: the attribution's own, "zero" read as "pad") is the
    token that replaces removed tokens."""
    return faithfulness_many(lm, [attribution], ks, baseline)[0]


def faithfulness_many(lm: LoadedModel, attributions: Sequence[Attribution], ks: Sequence[int] = KS,
                      baseline: str | None = None) -> list[Faithfulness]:
    """``faithfulness`` of many attributions (other texts, other methods), in input order. Each
    needs 1 + 2K inputs (the text, and per k its top tokens removed / only them kept); the inputs of
    all of them go through the model together, texts of similar length padded into one batch of
    at most ``TOKEN_BUDGET`` tokens (the same values as one call each, up to float rounding)."""
    ks = check_ks(ks)
    names = [_baseline_name(a, baseline) for a in attributions]  # every bad argument fails before any pass
    model = lm.fp32_model()
    device = next(model.parameters()).device
    pad_id = lm.tokenizer.pad_token_id or 0
    items = []  # per attribution: (rows (1 + 2K, T), token types (T,), counts, total)
    for a, name in zip(attributions, names):
        info = a.info
        inputs, info2 = encode(lm, info.text, info.pair, device=device)
        if info2.tokens != info.tokens:
            raise InputError("This attribution was made with another model's tokenizer: explain the text with this "
                             "model.")
        ids = inputs["input_ids"]  # (1, T)
        base = baseline_ids(lm, ids, name)[0]  # (T,)
        real = [i for i, s in enumerate(info.sequence_ids) if s is not None]
        scores = np.asarray(a.scores, dtype=np.float64)
        order = sorted(real, key=lambda i: (-scores[i], i))  # highest first; ties by position
        total = len(order)
        counts = tuple(min(total, math.ceil(k * total / 100 - 1e-9)) for k in ks)
        rows = [ids[0]]
        for n in counts:
            top = torch.tensor(order[:n], dtype=torch.long, device=device)
            rest = torch.tensor(order[n:], dtype=torch.long, device=device)
            removed, kept = ids[0].clone(), ids[0].clone()  # (T,)
            removed[top] = base[top]
            kept[rest] = base[rest]
            rows += [removed, kept]
        types = inputs.get("token_type_ids", torch.zeros_like(ids))[0]  # (T,)
        items.append((torch.stack(rows), types, counts, total))  # (1 + 2K, T)
    r = 1 + 2 * len(ks)
    probs: list[np.ndarray | None] = [None] * len(items)
    # attributions of similar length share a batch; a batch holds at most TOKEN_BUDGET padded tokens
    by_len = sorted(range(len(items)), key=lambda i: items[i][0].shape[1])
    groups: list[list[int]] = []
    for i in by_len:
        t = items[i][0].shape[1]
        if groups and (len(groups[-1]) + 1) * r * t <= TOKEN_BUDGET:  # t is the group's longest so far
            groups[-1].append(i)
        else:
            groups.append([i])
    attn, cls_only = speed_options(lm)
    with lm.run_lock, torch.no_grad():
        for idx in groups:
            t = max(items[i][0].shape[1] for i in idx)
            batch = torch.full((len(idx) * r, t), pad_id, dtype=torch.long, device=device)  # (B, T)
            mask = torch.zeros_like(batch)  # (B, T)
            types = torch.zeros_like(batch)  # (B, T)
            for j, i in enumerate(idx):
                rows, tt, _, _ = items[i]
                n = rows.shape[1]
                batch[j * r : (j + 1) * r, :n] = rows
                mask[j * r : (j + 1) * r, :n] = 1
                types[j * r : (j + 1) * r, :n] = tt
            step = max(1, TOKEN_BUDGET // t)  # a single long text's rows may still need several passes
            logits = torch.cat([classifier_logits(model, input_ids=batch[s : s + step],
                                                  attention_mask=mask[s : s + step],
                                                  token_type_ids=types[s : s + step], attention=attn,
                                                  cls_only=cls_only)
                                for s in range(0, batch.shape[0], step)])  # (B, C)
            p = probabilities(lm, logits).float().cpu().numpy().astype(np.float64)  # (B, C)
            for j, i in enumerate(idx):
                probs[i] = p[j * r : (j + 1) * r, attributions[i].target_index]  # (1 + 2K,)
    out = []
    for a, (_, _, counts, total), p in zip(attributions, items, probs):
        comp = tuple(float(p[0] - p[1 + 2 * i]) for i in range(len(ks)))
        suff = tuple(float(p[0] - p[2 + 2 * i]) for i in range(len(ks)))
        at = ks.index(20) if 20 in ks else len(ks) // 2
        reading = faithfulness_reading(a.target, ks[at], counts[at], total, comp[at]) if total else (
            "the text has no tokens to remove besides the special ones, so faithfulness cannot be measured")
        out.append(Faithfulness(method=a.method, target=a.target, ks=ks, n_tokens=counts, comprehensiveness_k=comp,
                                sufficiency_k=suff, comprehensiveness=float(np.mean(comp)),
                                sufficiency=float(np.mean(suff)), p_x=float(p[0]), reading=reading))
    return out
