"""Attribution methods besides Integrated Gradients, over the same model and forward pass, and a
side-by-side comparison of them.

Every method explains the same f (the target's probability, or logit) of the same composed
[CLS] path (``forward.classifier_logits`` through ``ig_engine.AttributionEngine``: the family
adapter's word embeddings, layers and head) and returns the same ``Attribution`` record, with its
``method``, passes and seconds filled in. Each method is a small class with one ``attribute``
(``Method``), found by its name in ``METHOD_CLASSES`` (``register_method`` adds one), as Captum's
attribution classes are:

- ``integrated_gradients``: the engine's path integral, as ``attribution.attribute`` (completeness up to delta).
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
- ``raw``, ``norm``, ``value_zeroing``, ``alti``: the context-mixing measures (``mixing_measures``),
  each scoring a token by its measure's aggregated [CLS] row at the last layer (``cls_scores``: >= 0,
  summing to 1; the same whatever the target). A token ranking, so the comparison scores it like the
  attributions, but not an additive attribution: no completeness (delta) applies
  (``Attribution.has_completeness``). Registered after ``METHODS``: the default comparison is
  unchanged, and they are compared when named (``MIXING_METHODS``).

Names are read loosely (``canonical_method``): case and "-" for "_" do not matter, and "ig" is
``integrated_gradients``.

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
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
import torch

from ..errors import InputError
from ..models.registry import LoadedModel
from ..results import MIXING_METHODS, Attribution, MethodComparison
from .attention_maps import attention, rollout
from .attribution import attribute
from .attribution_options import TOKEN_BUDGET, speed_options, steps_mode
from .faithfulness_eval import faithfulness
from .ig_engine import AttributionEngine
from .mixing_measures import context_mixing_inputs
from .words import word_groups

__all__ = ["METHODS", "METHOD_CLASSES", "MIXING_METHODS", "METHOD_ALIASES", "Method", "register_method",
           "method_class", "canonical_method", "explain", "compare_methods", "estimate_seconds", "default_samples",
           "spearman", "top_k_overlap", "IntegratedGradients", "GradientXInput", "Saliency", "Occlusion", "KernelShap",
           "Lime", "ContextMixing", "RawAttention", "AttentionNorm", "ValueZeroing", "Alti", "WordFeatures",
           "refuse_if_slow"]

MAX_SAMPLES = 2000
PROBE_ROWS = 8


class Method:
    """One attribution method over an ``AttributionEngine`` holding one text (as Captum's
    attribution classes hold their forward function): ``Saliency(engine).attribute()``.

    ``attribute(n_steps=, tolerance=, n_samples=, seed=)`` returns the text's ``Attribution`` with
    the method's name, passes and seconds filled in; a method ignores the options it has no use for.
    Class attributes: ``name`` (its key in ``METHOD_CLASSES``), ``per_word`` (its cost grows with the
    number of words: estimated and refused above the settings' ``max_method_seconds``) and
    ``sampled`` (``n_samples`` and ``seed`` change its scores)."""

    name: ClassVar[str] = ""
    per_word: ClassVar[bool] = False
    sampled: ClassVar[bool] = False

    def __init__(self, engine: AttributionEngine):
        self.engine = engine

    @classmethod
    def rows_needed(cls, n_words: int, n_samples: int | None) -> int:
        """Forward rows one explanation needs (what ``estimate_seconds`` multiplies)."""
        return 1

    def attribute(self, *, n_steps: int | None = None, tolerance: float | None = None,
                  n_samples: int | None = None, seed: int = 0) -> Attribution:
        raise NotImplementedError

    @classmethod
    def explain(cls, lm: LoadedModel, text: str, target: str | int | None, baseline: str, pair: str | None,
                output: str, *, n_steps: int | None = None, tolerance: float | None = None,
                n_samples: int | None = None, seed: int = 0) -> Attribution:
        """The whole of ``methods.explain`` for this method: the options checked, the engine made for
        ``text`` and ``attribute`` run under the model's run lock, the result kept in the model's
        LRU (asked again, it comes back with the seconds of the computation that made it)."""
        if n_samples is not None and (isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer))
                                      or not 2 <= n_samples <= MAX_SAMPLES):
            raise InputError(f"n_samples must be a whole number from 2 to {MAX_SAMPLES}, got {n_samples!r}.")
        attn, cls_only = speed_options(lm)
        key = ("explain", cls.name, text, pair, target, baseline, output, n_samples if cls.sampled else None,
               seed if cls.sampled else None, attn, cls_only)

        def compute() -> Attribution:
            with lm.run_lock:
                start = time.perf_counter()
                engine = AttributionEngine.for_text(lm, text, pair, target, baseline, output)
                a = cls(engine).attribute(n_steps=n_steps, tolerance=tolerance, n_samples=n_samples, seed=seed)
                return dataclasses.replace(a, seconds=time.perf_counter() - start)  # the setup counted too

        return lm.memo(key, compute)

    def record(self, scores: np.ndarray, n_steps: int, n_forward: int, n_backward: int, seconds: float) -> Attribution:
        """The engine's text scored by this method (scores (T,), trimmed to the text's tokens)."""
        g = self.engine
        info = g.infos[0]
        scores = np.asarray(scores, dtype=np.float32)[: len(info)]  # (T,)
        return Attribution(
            info=info, scores=scores, target=g.lm.labels[g.targets[0]], target_index=g.targets[0], output=g.output,
            f_x=g.f_x[0], f_baseline=g.f_b[0], delta=float(g.f_x[0] - g.f_b[0] - scores.sum()),
            n_steps=int(n_steps), baseline=g.baseline, method=self.name, n_forward=int(n_forward),
            n_backward=int(n_backward), seconds=float(seconds),
        )


# The methods by name, in the order the UI lists them (``register_method`` adds one).
METHOD_CLASSES: dict[str, type[Method]] = {}


def register_method(cls: type[Method]) -> type[Method]:
    """Class decorator: make ``cls`` available to ``explain``/``compare_methods`` as ``cls.name``."""
    if not cls.name or cls.name in METHOD_CLASSES:
        raise ValueError(f"An attribution method needs a new name, got {cls.name!r}.")
    METHOD_CLASSES[cls.name] = cls
    return cls


# Short names accepted for a method (the CLI's and explain-csv's "ig").
METHOD_ALIASES = {"ig": "integrated_gradients"}


def canonical_method(method: str) -> str:
    """The registered name ``method`` means: stripped, lower case, "-" read as "_", an alias
    (``METHOD_ALIASES``) replaced; InputError listing the valid names otherwise."""
    name = method.strip().lower().replace("-", "_") if isinstance(method, str) else None
    name = METHOD_ALIASES.get(name, name)
    if name not in METHOD_CLASSES:
        aliases = "".join(f", {a} (= {m})" for a, m in METHOD_ALIASES.items())
        raise InputError(f"Unknown attribution method {method!r}: choose one of {', '.join(METHOD_CLASSES)}"
                         f"{aliases}.")
    return name


def method_class(method: str) -> type[Method]:
    """The class registered as ``method`` (read by ``canonical_method``); InputError naming the choices otherwise."""
    return METHOD_CLASSES[canonical_method(method)]


def default_samples(n_words: int) -> int:
    """KernelSHAP's and LIME's default sample count: 8 per word, at least 64, at most 400."""
    return int(min(400, max(64, 8 * n_words)))


@register_method
class IntegratedGradients(Method):
    """The path integral from the baseline (``AttributionEngine.integrated_gradients``); completeness
    up to its convergence delta. Steps as for ``attribution.attribute``."""

    name = "integrated_gradients"

    def attribute(self, *, n_steps=None, tolerance=None, n_samples=None, seed=0) -> Attribution:
        start = time.perf_counter()
        n_steps, tolerance = steps_mode(n_steps, tolerance)
        a = self.engine.integrated_gradients(n_steps, tolerance)[0]
        return dataclasses.replace(a, n_forward=2, n_backward=a.n_steps, seconds=time.perf_counter() - start)

    @classmethod
    def explain(cls, lm, text, target, baseline, pair, output, *, n_steps=None, tolerance=None, n_samples=None,
                seed=0) -> Attribution:
        """Through ``attribution.attribute`` and its cache (shared with the Attributions tab, so the
        IG already shown costs nothing here), timed afresh."""
        start = time.perf_counter()
        a = attribute(lm, text, target=target, baseline=baseline, n_steps=n_steps, pair=pair, output=output,
                      tolerance=tolerance)
        return dataclasses.replace(a, n_forward=2, n_backward=a.n_steps, seconds=time.perf_counter() - start)


class _Gradient(Method):
    """grad_e f at the text's word vectors e: one forward and one backward pass."""

    def attribute(self, *, n_steps=None, tolerance=None, n_samples=None, seed=0) -> Attribution:
        start = time.perf_counter()
        g = self.engine
        emb = g.emb.detach().clone().requires_grad_(True)  # (1, T, D)
        out = g.forward(emb, torch.zeros(1, dtype=torch.long, device=g.ids.device))  # (1, C)
        (grad,) = torch.autograd.grad(out[0, g.targets[0]], emb)  # (1, T, D)
        scores = self.reduce(grad, emb)  # (T,)
        return self.record(scores.detach().float().cpu().numpy(), 1, 2, 1, time.perf_counter() - start)

    def reduce(self, grad: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


@register_method
class GradientXInput(_Gradient):
    """grad_e f . e per token (signed)."""

    name = "gradient_x_input"

    def reduce(self, grad, emb):
        return (grad * emb).sum(dim=-1)[0]  # (T,)


@register_method
class Saliency(_Gradient):
    """The L2 norm over the embedding dimension of grad_e f (>= 0, no sign)."""

    name = "saliency"

    def reduce(self, grad, emb):
        return grad.norm(dim=-1)[0]  # (T,) L2 over the embedding dimension


class WordFeatures:
    """The non-special words of an engine's (one) text, which token belongs to which of them, and
    f of the text with some words replaced by the baseline (``forward``)."""

    def __init__(self, g: AttributionEngine):
        self.engine = g
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

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """f(z) (B, C) for z (B, W) in {0, 1}: word w kept where z[:, w] = 1, replaced by the baseline otherwise."""
        g = self.engine
        b = z.shape[0]
        keep = z[:, self.owner.clamp(min=0)] > 0.5  # (B, T)
        keep = keep | (self.owner < 0)  # specials (and padding) always kept
        embeds = torch.where(keep.unsqueeze(-1), g.emb[0], g.base[0])  # (B, T, D)
        return g.forward(embeds, torch.zeros(b, dtype=torch.long, device=g.ids.device))  # (B, C)

    def seconds_per_row(self) -> float:
        """Seconds one perturbed input costs in a batch: a batch of PROBE_ROWS timed twice, the faster
        kept (a busy machine makes single timings noisy)."""
        if not len(self):
            return 0.0
        z = torch.ones(PROBE_ROWS, len(self), device=self.engine.ids.device)  # (P, W)
        best = float("inf")
        with torch.no_grad():
            for _ in range(2):
                start = time.perf_counter()
                self.forward(z)
                best = min(best, time.perf_counter() - start)
        return best / PROBE_ROWS


class _PerWord(Method):
    """A method that replaces words by the baseline: its cost is estimated first and refused above
    the settings' ``max_method_seconds``; a text without words scores all zeros."""

    per_word = True

    def attribute(self, *, n_steps=None, tolerance=None, n_samples=None, seed=0) -> Attribution:
        start = time.perf_counter()
        g = self.engine
        words = WordFeatures(g)
        if len(words) == 0:
            return self.record(np.zeros(len(g.infos[0])), 0, 2, 0, time.perf_counter() - start)
        refuse_if_slow(self.name, len(words), words.seconds_per_row(), n_samples,
                       g.lm.settings.max_method_seconds)
        per_call = max(1, TOKEN_BUDGET // g.ids.shape[1])
        per_word, rows = self.word_scores(words, per_call, n_samples, seed)
        setup = 2 + 2 * PROBE_ROWS  # f(x), f(baseline) and the timed probe batch
        return self.record(words.spread(per_word), rows, setup + rows, 0, time.perf_counter() - start)

    def word_scores(self, words: WordFeatures, per_call: int, n_samples: int | None,
                    seed: int) -> tuple[np.ndarray, int]:
        """(W,) scores and the forward rows they took."""
        raise NotImplementedError


@register_method
class Occlusion(_PerWord):
    """Per word, f(x) - f(x with that word's pieces replaced by the baseline), all occluded inputs
    in batches; a word's drop is shared equally by its pieces."""

    name = "occlusion"

    @classmethod
    def rows_needed(cls, n_words: int, n_samples: int | None) -> int:
        return n_words

    def word_scores(self, words, per_call, n_samples, seed):
        g = self.engine
        z = 1.0 - torch.eye(len(words), device=g.ids.device)  # (W, W): row w drops word w
        with torch.no_grad():
            f = torch.cat([words.forward(z[s : s + per_call]) for s in range(0, len(words), per_call)])  # (W, C)
        return g.f_x[0] - f[:, g.targets[0]].float().cpu().numpy(), len(words)  # (W,)


class _Sampled(_PerWord):
    """A linear model fitted to f over random subsets of the words (Captum), seeded, batched."""

    sampled = True

    @classmethod
    def rows_needed(cls, n_words: int, n_samples: int | None) -> int:
        return default_samples(n_words) if n_samples is None else int(n_samples)

    def explainer(self, forward: Callable[[torch.Tensor], torch.Tensor]):
        raise NotImplementedError

    def word_scores(self, words, per_call, n_samples, seed):
        g = self.engine
        explainer = self.explainer(words.forward)
        n = self.rows_needed(len(words), n_samples)
        ones = torch.ones(1, len(words), device=g.ids.device)  # (1, W)
        cuda = [g.ids.device.index or 0] if g.ids.device.type == "cuda" else []
        with torch.no_grad(), torch.random.fork_rng(devices=cuda):  # seeded here, the global RNG untouched
            torch.manual_seed(seed)
            attrs = explainer.attribute(ones, baselines=torch.zeros_like(ones), target=g.targets[0],
                                        n_samples=n, perturbations_per_eval=min(n, per_call))  # (1, W)
        return attrs[0].float().cpu().numpy(), n


@register_method
class KernelShap(_Sampled):
    """Captum KernelShap over words (kept, or replaced by the baseline token)."""

    name = "kernel_shap"

    def explainer(self, forward):
        from captum.attr import KernelShap as CaptumKernelShap

        return CaptumKernelShap(forward)


@register_method
class Lime(_Sampled):
    """Captum Lime over the same word features (its default sampling and exponential cosine
    kernel; a ridge regression with alpha 1, as the original LIME for text)."""

    name = "lime"

    def explainer(self, forward):
        from captum._utils.models.linear_model import SkLearnRidge
        from captum.attr import Lime as CaptumLime

        return CaptumLime(forward, SkLearnRidge(alpha=1.0))


METHODS = tuple(METHOD_CLASSES)  # the built-in methods' names, in the order registered above


class ContextMixing(Method):
    """A context-mixing measure (``mixing_measures``) as a token ranking: the measure over the engine's
    encoded text, scored by its aggregated [CLS] row at the last layer (``MixingMaps.cls_scores``,
    >= 0, summing to 1). The target does not change the scores (f(x) and f(baseline) are still the
    target's, for the record). Cost: the engine's two rows, one forward with every hidden state and
    attention map, and for value zeroing one copy of the text per token through every layer."""

    measure: ClassVar[str] = ""

    def attribute(self, *, n_steps=None, tolerance=None, n_samples=None, seed=0) -> Attribution:
        start = time.perf_counter()
        g = self.engine
        info = g.infos[0]
        t = len(info)
        inputs = {"input_ids": g.ids[:1, :t], "attention_mask": g.mask[:1, :t], "token_type_ids": g.types[:1, :t]}
        maps = context_mixing_inputs(g.lm, inputs, self.measure, info)
        rows = 3 + (t if self.measure == "value_zeroing" else 0)
        return self.record(maps.cls_scores, 1, rows, 0, time.perf_counter() - start)


@register_method
class RawAttention(ContextMixing):
    """Raw attention weights, heads averaged, aggregated by rollout (residual as 0.5 I)."""

    name = measure = "raw"


@register_method
class AttentionNorm(ContextMixing):
    """Attention-norm ||alpha_ij f(x_j)|| (Kobayashi et al. 2020), aggregated by rollout."""

    name = measure = "norm"


@register_method
class ValueZeroing(ContextMixing):
    """Value zeroing (Mohebbi et al. 2023), aggregated across layers."""

    name = measure = "value_zeroing"


@register_method
class Alti(ContextMixing):
    """ALTI (Ferrando et al. 2022), aggregated across layers."""

    name = measure = "alti"


def estimate_seconds(method: str, n_words: int, seconds_per_row: float, n_samples: int | None = None) -> float:
    """Forward rows a per-word method needs times the measured time of one row."""
    return method_class(method).rows_needed(n_words, n_samples) * seconds_per_row


def refuse_if_slow(method: str, n_words: int, per_row: float, n_samples: int | None,
                   max_seconds: float) -> None:
    """InputError (with the estimate and cheaper methods) when ``method`` on ``n_words`` words would
    take longer than ``max_seconds``."""
    est = estimate_seconds(method, n_words, per_row, n_samples)
    if est > max_seconds:
        rows = method_class(method).rows_needed(n_words, n_samples)
        raise InputError(
            f"{method} on this text ({n_words} words) needs {rows} forward passes, about {est:.3g} s; the limit is "
            f"{max_seconds:g} s (BERTVIZ_MAX_METHOD_SECONDS). Use gradient_x_input or saliency (one forward and one "
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
    ``method`` (one of ``METHODS`` or ``MIXING_METHODS``, see the module docstring). ``n_steps``,
    ``tolerance``: Integrated Gradients' steps as for ``attribute`` (default: as many as it takes
    for a relative delta of ``DEFAULT_TOLERANCE``; ``n_steps`` alone: exactly that many);
    ``n_samples`` (None: ``default_samples``) and ``seed``: KernelSHAP's and LIME's perturbed
    inputs and their random draw (the same seed gives the same scores)."""
    return method_class(method).explain(lm, text, target, baseline, pair, output, n_steps=n_steps,
                                        tolerance=tolerance, n_samples=n_samples, seed=seed)


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
    """Every method in ``methods`` (default: the built-in ``METHODS``; name the context-mixing
    ``MIXING_METHODS`` to score them too) on one text, with its cost, its ERASER faithfulness, the rank
    agreement of every pair (Spearman and top-k overlap over the non-special tokens, on score
    magnitudes) and each one's agreement with attention rollout's [CLS] row at the last layer.
    Always explains the probability of one class (``target``; default: the predicted class)."""
    methods = tuple(methods)
    if not methods:
        raise InputError(f"No method given: choose some of {', '.join(METHOD_CLASSES)}.")
    methods = tuple(canonical_method(m) for m in methods)
    classes = [method_class(m) for m in methods]
    if len(set(methods)) != len(methods):
        raise InputError("A method is listed twice: name each once.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InputError(f"top_k must be a positive whole number, got {top_k!r}.")
    if any(c.per_word for c in classes):  # refuse before anything runs, not after the cheap methods
        with lm.run_lock:
            words = WordFeatures(AttributionEngine.for_text(lm, text, pair, target, baseline, "prob"))
            n_words, per_row = len(words), words.seconds_per_row()
        for c in classes:
            if c.per_word:
                refuse_if_slow(c.name, n_words, per_row, n_samples, lm.settings.max_method_seconds)
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
