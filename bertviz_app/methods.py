"""Attribution methods besides Integrated Gradients, over the same model and forward pass, and a
side-by-side comparison of them.

Every method explains the same f (the target's probability, or logit) of the same composed
[CLS] path (``forward.classifier_logits`` through ``attribution._Group``: the family adapter's
word embeddings, layers and head) and returns the same ``Attribution`` record, with its
``method``, passes and seconds filled in:

- ``integrated_gradients``: ``attribution.attribute`` (the path integral; completeness up to delta).
- ``gradient_x_input``: grad_e f . e per token, e = the token's word-embedding vector (one backward).
- ``saliency``: the L2 norm over the embedding dimension of grad_e f (one backward; >= 0, no sign).
- ``occlusion``: per word, f(x) - f(x with that word's pieces replaced by the baseline token), all
  occluded inputs in one batch; a word's drop is shared equally by its pieces, so summing a word's
  pieces (``words.merge_scores``) gives the measured drop. Special tokens score 0.
- ``kernel_shap``: Captum KernelShap over words (one binary feature per word: kept, or replaced by
  the baseline token; special tokens always kept and scored 0), ``n_samples`` perturbed inputs,
  seeded, batched; shared by a word's pieces like occlusion.
- ``lime``: Captum Lime over the same word features (Captum's default sampling and exponential
  cosine kernel; a ridge regression with alpha 1, as the original LIME for text), seeded, batched.

"Replaced by the baseline token" is the same replacement Integrated Gradients starts from: the
word vectors of [PAD]/[MASK]/[UNK], or zero vectors for the "zero" baseline.
Occlusion and KernelSHAP cost grows with the word count: their cost is estimated up front (the
rows needed times the time of one row in a batch, timed on a probe batch of 8) and refused above
the settings' ``max_method_seconds``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence

import numpy as np
import torch

from .attention_maps import attention, rollout
from .attribution import TOKEN_BUDGET, _check_args, _Group, _options, attribute
from .config import get_settings
from .encoding import check_texts
from .errors import InputError
from .registry import LoadedModel
from .results import Attribution, MethodComparison
from .words import word_groups

__all__ = ["METHODS", "explain", "compare_methods", "estimate_seconds"]

METHODS = ("integrated_gradients", "gradient_x_input", "saliency", "occlusion", "kernel_shap", "lime")
_PER_WORD = ("occlusion", "kernel_shap", "lime")  # cost grows with the number of words
MAX_SAMPLES = 2000


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise InputError(f"Unknown attribution method {method!r}: choose one of {', '.join(METHODS)}.")
    return method


def default_samples(n_words: int) -> int:
    """KernelSHAP's and LIME's default sample count: 8 per word, at least 64, at most 400."""
    return int(min(400, max(64, 8 * n_words)))


def _rows_needed(method: str, n_words: int, n_samples: int | None) -> int:
    if method == "occlusion":
        return n_words
    if method in ("kernel_shap", "lime"):
        return default_samples(n_words) if n_samples is None else int(n_samples)
    return 1


def estimate_seconds(method: str, n_words: int, seconds_per_row: float, n_samples: int | None = None) -> float:
    """Forward rows a per-word method needs times the measured time of one row."""
    return _rows_needed(_check_method(method), n_words, n_samples) * seconds_per_row


class _Words:
    """The non-special words of one input and which token belongs to which of them."""

    def __init__(self, g: _Group):
        info = g.infos[0]
        groups = word_groups(info)
        self.groups = [grp for grp in groups.groups if info.sequence_ids[grp[0]] is not None]
        t = g.ids.shape[1]
        owner = torch.full((t,), -1, dtype=torch.long)  # (T,): word index, -1 for specials and padding
        for w, grp in enumerate(self.groups):
            owner[list(grp)] = w
        self.owner = owner.to(g.ids.device)
        self.n_tokens = len(info)

    def __len__(self) -> int:
        return len(self.groups)

    def spread(self, per_word: np.ndarray) -> np.ndarray:
        """(W,) word scores -> (T,) token scores, each word's score shared equally by its pieces."""
        out = np.zeros(self.n_tokens, dtype=np.float32)
        for w, grp in enumerate(self.groups):
            out[list(grp)] = per_word[w] / len(grp)
        return out


def _word_forward(g: _Group, words: _Words):
    """f(z) for z (B, W) in {0, 1}: word w kept where z[:, w] = 1, replaced by the baseline otherwise."""

    def forward(z: torch.Tensor) -> torch.Tensor:  # (B, W)
        b = z.shape[0]
        keep = z[:, words.owner.clamp(min=0)] > 0.5  # (B, T)
        keep = keep | (words.owner < 0)  # specials (and padding) always kept
        embeds = torch.where(keep.unsqueeze(-1), g.emb[0], g.base[0])  # (B, T, D)
        return g._forward(embeds, torch.zeros(b, dtype=torch.long, device=g.ids.device))  # (B, C)

    return forward


def _group(lm: LoadedModel, text: str, pair, target, baseline: str, output: str) -> _Group:
    """The shared setup: encoding, word vectors, baseline, f(x), f(baseline)."""
    _check_args(baseline, 2, output)
    texts, pairs = check_texts([text], None if pair is None else [pair], optional_pairs=True)
    attn, cls_only = _options(None, None)
    return _Group(lm, [(texts[0], pairs[0] if pairs else None)], baseline, output, lm.label_index(target),
                  adaptive=False, attention=attn, cls_only=cls_only)


PROBE_ROWS = 8


def _seconds_per_row(g: _Group, words: _Words) -> float:
    """Seconds one perturbed input costs in a batch: a batch of PROBE_ROWS timed twice, the faster
    kept (a busy machine makes single timings noisy)."""
    if not len(words):
        return 0.0
    forward = _word_forward(g, words)
    z = torch.ones(PROBE_ROWS, len(words), device=g.ids.device)  # (P, W)
    best = float("inf")
    with torch.no_grad():
        for _ in range(2):
            start = time.perf_counter()
            forward(z)
            best = min(best, time.perf_counter() - start)
    return best / PROBE_ROWS


def _record(g: _Group, scores: np.ndarray, method: str, n_steps: int, n_forward: int, n_backward: int,
            seconds: float) -> Attribution:
    info = g.infos[0]
    scores = np.asarray(scores, dtype=np.float32)[: len(info)]  # (T,)
    return Attribution(
        info=info, scores=scores, target=g.lm.labels[g.targets[0]], target_index=g.targets[0], output=g.output,
        f_x=g.f_x[0], f_baseline=g.f_b[0], delta=float(g.f_x[0] - g.f_b[0] - scores.sum()), n_steps=int(n_steps),
        baseline=g.baseline, method=method, n_forward=int(n_forward), n_backward=int(n_backward),
        seconds=float(seconds),
    )


def _refuse_if_slow(method: str, n_words: int, per_row: float, n_samples: int | None) -> None:
    limit = get_settings().max_method_seconds
    est = estimate_seconds(method, n_words, per_row, n_samples)
    if est > limit:
        rows = _rows_needed(method, n_words, n_samples)
        raise InputError(
            f"{method} on this text ({n_words} words) needs {rows} forward passes, about {est:.3g} s; the limit is "
            f"{limit:g} s (BERTVIZ_MAX_METHOD_SECONDS). Use gradient_x_input or saliency (one forward and one "
            "backward pass) or integrated_gradients, or shorten the text."
        )


def explain(
    lm: LoadedModel,
    text: str,
    method: str = "integrated_gradients",
    target: str | int | None = None,
    baseline: str = "pad",
    pair: str | None = None,
    output: str = "prob",
    *,
    n_steps: int | None = None,
    n_samples: int | None = None,
    seed: int = 0,
    tolerance: float | None = None,
) -> Attribution:
    """One score per token of ``text`` for class ``target`` (default: the predicted class) by
    ``method`` (one of ``METHODS``, see the module docstring). ``n_steps``, ``tolerance``: Integrated
    Gradients' steps as for ``attribute`` (default: as many as it takes for a relative delta of
    ``DEFAULT_TOLERANCE``; ``n_steps`` alone: exactly that many);
    ``n_samples`` (None: ``default_samples``) and ``seed``: KernelSHAP's and LIME's perturbed
    inputs and their random draw (the same seed gives the same scores)."""
    _check_method(method)
    if method == "integrated_gradients":
        start = time.perf_counter()
        a = attribute(lm, text, target=target, baseline=baseline, n_steps=n_steps, pair=pair, output=output,
                      tolerance=tolerance)
        return dataclasses.replace(a, n_forward=2, n_backward=a.n_steps, seconds=time.perf_counter() - start)
    if n_samples is not None and (isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer))
                                  or not 2 <= n_samples <= MAX_SAMPLES):
        raise InputError(f"n_samples must be a whole number from 2 to {MAX_SAMPLES}, got {n_samples!r}.")
    attn, cls_only = _options(None, None)
    sampled = method in ("kernel_shap", "lime")
    key = ("explain", method, text, pair, target, baseline, output, n_samples if sampled else None,
           seed if sampled else None, attn, cls_only)
    # Asked again (another view of the same text), the result comes from the model's LRU; its
    # seconds are those of the computation that made it.
    return lm.memo(key, lambda: _explain(lm, text, method, target, baseline, pair, output, n_samples, seed))


def _explain(lm: LoadedModel, text: str, method: str, target, baseline: str, pair, output: str,
             n_samples: int | None, seed: int) -> Attribution:
    with lm.run_lock:
        start = time.perf_counter()
        g = _group(lm, text, pair, target, baseline, output)
        target_idx = g.targets[0]
        if method in ("gradient_x_input", "saliency"):
            emb = g.emb.detach().clone().requires_grad_(True)  # (1, T, D)
            out = g._forward(emb, torch.zeros(1, dtype=torch.long, device=g.ids.device))  # (1, C)
            (grad,) = torch.autograd.grad(out[0, target_idx], emb)  # (1, T, D)
            if method == "gradient_x_input":
                scores = (grad * emb).sum(dim=-1)[0]  # (T,)
            else:
                scores = grad.norm(dim=-1)[0]  # (T,) L2 over the embedding dimension
            return _record(g, scores.detach().float().cpu().numpy(), method, 1, 2, 1, time.perf_counter() - start)
        words = _Words(g)
        if len(words) == 0:
            return _record(g, np.zeros(len(g.infos[0])), method, 0, 2, 0, time.perf_counter() - start)
        _refuse_if_slow(method, len(words), _seconds_per_row(g, words), n_samples)
        setup = 2 + 2 * PROBE_ROWS  # f(x), f(baseline) and the timed probe batch
        forward = _word_forward(g, words)
        per_call = max(1, TOKEN_BUDGET // g.ids.shape[1])
        if method == "occlusion":
            z = 1.0 - torch.eye(len(words), device=g.ids.device)  # (W, W): row w drops word w
            with torch.no_grad():
                f = torch.cat([forward(z[s : s + per_call]) for s in range(0, len(words), per_call)])  # (W, C)
            drops = g.f_x[0] - f[:, target_idx].float().cpu().numpy()  # (W,)
            return _record(g, words.spread(drops), method, len(words), setup + len(words), 0,
                           time.perf_counter() - start)
        # kernel_shap, lime: a linear model fitted to f over random subsets of the words
        from captum._utils.models.linear_model import SkLearnRidge
        from captum.attr import KernelShap, Lime

        explainer = KernelShap(forward) if method == "kernel_shap" else Lime(forward, SkLearnRidge(alpha=1.0))
        n = default_samples(len(words)) if n_samples is None else int(n_samples)
        ones = torch.ones(1, len(words), device=g.ids.device)  # (1, W)
        cuda = [g.ids.device.index or 0] if g.ids.device.type == "cuda" else []
        with torch.no_grad(), torch.random.fork_rng(devices=cuda):  # seeded here, the global RNG untouched
            torch.manual_seed(seed)
            attrs = explainer.attribute(ones, baselines=torch.zeros_like(ones), target=target_idx,
                                        n_samples=n, perturbations_per_eval=min(n, per_call))  # (1, W)
        per_word = attrs[0].float().cpu().numpy()
        return _record(g, words.spread(per_word), method, n, setup + n, 0, time.perf_counter() - start)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties averaged (as Spearman's rho needs)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(len(x), dtype=np.float64)
    for v in np.unique(x):
        tie = x == v
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation; NaN where either side is constant (no ranking to compare)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) < 2:
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = math.sqrt(float((ra**2).sum() * (rb**2).sum()))
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


def top_k_overlap(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """Share of the k largest entries of ``a`` that are among the k largest of ``b``."""
    k = min(k, len(a))
    if k == 0:
        return float("nan")
    top = lambda x: set(np.argsort(-np.asarray(x), kind="stable")[:k].tolist())  # noqa: E731
    return len(top(a) & top(b)) / k


def compare_methods(
    lm: LoadedModel,
    text: str,
    methods: Sequence[str] = METHODS,
    target: str | int | None = None,
    baseline: str = "pad",
    pair: str | None = None,
    *,
    top_k: int = 3,
    n_steps: int | None = None,
    n_samples: int | None = None,
    seed: int = 0,
    tolerance: float | None = None,
) -> MethodComparison:
    """Every method in ``methods`` on one text, with its cost, its ERASER faithfulness, the rank
    agreement of every pair (Spearman and top-k overlap over the non-special tokens, on score
    magnitudes) and each one's agreement with attention rollout's [CLS] row at the last layer.
    Always explains the probability of one class (``target``; default: the predicted class)."""
    from .faithfulness_eval import faithfulness

    methods = tuple(methods)
    if not methods:
        raise InputError(f"No method given: choose some of {', '.join(METHODS)}.")
    for m in methods:
        _check_method(m)
    if len(set(methods)) != len(methods):
        raise InputError("A method is listed twice: name each once.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InputError(f"top_k must be a positive whole number, got {top_k!r}.")
    if any(m in _PER_WORD for m in methods):  # refuse before anything runs, not after the cheap methods
        with lm.run_lock:
            g = _group(lm, text, pair, target, baseline, "prob")
            words = _Words(g)
            n_words, per_row = len(words), _seconds_per_row(g, words)
        for m in methods:
            if m in _PER_WORD:
                _refuse_if_slow(m, n_words, per_row, n_samples)
    results: list[Attribution] = []
    for m in methods:
        a = explain(lm, text, m, target=target, baseline=baseline, pair=pair, n_steps=n_steps, n_samples=n_samples,
                    seed=seed, tolerance=tolerance)
        target = a.target_index  # every method explains the class the first one explained
        results.append(a)
    faith = tuple(faithfulness(lm, a) for a in results)
    info = results[0].info
    real = np.array([s is not None for s in info.sequence_ids])  # (T,) non-special tokens
    mags = [np.abs(a.scores)[real] for a in results]
    n = len(methods)
    rho = np.ones((n, n))
    over = np.ones((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            rho[i, j] = rho[j, i] = spearman(mags[i], mags[j])
            over[i, j] = over[j, i] = top_k_overlap(mags[i], mags[j], top_k)
    flow = rollout(attention(lm, info.text, info.pair))[-1, 0]  # (T,) last layer, [CLS] row
    with_rollout = np.array([spearman(m, flow[real]) for m in mags])
    return MethodComparison(methods=methods, attributions=tuple(results), faithfulness=faith, spearman=rho,
                            top_k=min(top_k, int(real.sum())), top_k_overlap=over, rollout=flow,
                            rollout_spearman=with_rollout)
