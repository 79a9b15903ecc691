"""Integrated Gradients of the class a text gets, with the numbers that say how far to trust them.

- ``attribute``: token attributions on the word embeddings: Integrated Gradients on the word
  vectors, batched forward/backward passes with ``torch.autograd.grad`` (the same integral and
  nodes as Captum's LayerIntegratedGradients on the word-embedding layer; the "zero" baseline
  starts from all-zero word vectors), by the engine in ``ig_engine``.
- ``attribute_many``: the same for many texts, grouped where that is faster (``group_size``).
The same attribution taken at every layer, and each layer's [CLS] read through the head: ``cls_path``.
What a call may ask (baselines, outputs, steps, speed options): ``attribution_options``.
Every family in ``families.py`` works the same way: its adapter names the word embeddings, the
layers and the head (the first position, [CLS] or <s>, is what every head reads).
Attributions always run in float32 (``LoadedModel.fp32_model``).
"""

from __future__ import annotations

from ..models.encoding import check_texts, whole_number
from ..models.registry import LoadedModel
from ..results import Attribution
from .attribution_options import check_args, speed_options, steps_mode
from .ig_engine import AttributionEngine

__all__ = ["attribute", "attribute_many", "GROUP_TEXTS", "group_size"]


def attribute(
    lm: LoadedModel,
    text: str,
    target: str | int | None = None,
    baseline: str = "pad",
    n_steps: int | None = None,
    pair: str | None = None,
    output: str = "prob",
    tolerance: float | None = None,
    *,
    attention: str | None = None,
    cls_only_last_layer: bool | None = None,
) -> Attribution:
    """Signed per-token attribution of class ``target`` (default: the predicted class).

    ``scores.sum() + delta == f(x) - f(baseline)`` where f is the class probability
    (``output="prob"``) or logit, and ``delta`` is the convergence delta (Captum's definition).

    Steps (``steps_mode``): by default as many as it takes for ``relative_delta <= DEFAULT_TOLERANCE``
    (0.05, what the page does); ``tolerance=t``: as many as it takes for t; ``n_steps=n`` alone:
    exactly n Gauss-Legendre points on [0, 1] (``n_steps=50``: the fixed 50 steps of Captum's
    default). The result's ``tolerance`` and ``n_steps`` say which was used.

    ``tolerance``: a guaranteed relative delta, at the fewest gradient evaluations we
    can manage. The straight path is split into segments; each segment gets its own
    Gauss-Lobatto rule, whose nodes include the segment's ends, so the pass that computes the
    gradients also gives f at the ends and every segment's own convergence error is known exactly
    (no separate forward passes). Segments with the largest errors are halved
    until ``relative_delta <= tolerance`` (or ``|delta| <= 1e-6``). Only if the settings'
    ``max_n_steps`` gradient evaluations are spent first is a looser result returned (its
    ``relative_delta`` says so, and a warning is logged). ``n_steps`` is then ignored, and the
    result's ``n_steps`` is the number of gradient evaluations actually used.

    Speed options, for this call only (None: the settings' ``ig_attention`` and
    ``cls_only_last_layer``): ``attention`` "sdpa" or "eager" for the IG passes, and
    ``cls_only_last_layer``. They change the scores by float rounding at most, and never the shared model.
    """
    n_steps, tolerance = steps_mode(n_steps, tolerance)
    attention, cls_only = speed_options(lm, attention, cls_only_last_layer)
    key = ("attribute", text, pair, target, baseline, n_steps, output, tolerance,
           lm.settings.max_n_steps if tolerance is not None else None, attention, cls_only)
    return lm.memo(key, lambda: attribute_many(lm, [text], target=target, baseline=baseline, n_steps=n_steps,
                                               pairs=None if pair is None else [pair], output=output,
                                               tolerance=tolerance, attention=attention,
                                               cls_only_last_layer=cls_only)[0])


def attribute_many(
    lm: LoadedModel,
    texts: list[str],
    target: str | int | None = None,
    baseline: str = "pad",
    n_steps: int | None = None,
    pairs: list[str | None] | None = None,
    output: str = "prob",
    tolerance: float | None = None,
    *,
    attention: str | None = None,
    cls_only_last_layer: bool | None = None,
    group: int | None = None,
) -> list[Attribution]:
    """``attribute`` for many texts at once, in input order: up to ``group`` texts of similar length share
    their forward/backward passes (None: ``group_size(lm)``); the same attributions as one call per text, up
    to float rounding. ``target`` applies to every text (None: each text's predicted class). Steps
    (``n_steps``, ``tolerance``; default: adaptive at ``DEFAULT_TOLERANCE``), ``attention`` and
    ``cls_only_last_layer`` as for ``attribute``."""
    group = group_size(lm) if group is None else whole_number(group, "group", 1)
    n_steps, tolerance = steps_mode(n_steps, tolerance)
    check_args(baseline, n_steps, output, tolerance, max_n_steps=lm.settings.max_n_steps)
    attention, cls_only = speed_options(lm, attention, cls_only_last_layer)
    texts, pairs = check_texts(texts, pairs, optional_pairs=True, max_chars=lm.settings.max_chars,
                               max_batch_texts=lm.settings.max_batch_texts)
    items = list(zip(texts, pairs or [None] * len(texts)))
    target_idx = lm.label_index(target)
    results: list[Attribution | None] = [None] * len(items)
    with lm.run_lock:
        # Texts with and without a second text never share a batch (their encodings differ).
        order = sorted(range(len(items)),
                       key=lambda i: (items[i][1] is not None, len(items[i][0]) + len(items[i][1] or "")))
        groups: list[list[int]] = []
        for i in order:
            if (not groups or len(groups[-1]) == group
                    or (items[groups[-1][0]][1] is None) != (items[i][1] is None)):
                groups.append([])
            groups[-1].append(i)
        for idx in groups:
            engine = AttributionEngine(lm, [items[i] for i in idx], baseline, output, target_idx,
                                       attention=attention, cls_only=cls_only)
            for i, res in zip(idx, engine.integrated_gradients(n_steps, tolerance)):
                results[i] = res
    return results  # type: ignore[return-value]


# Texts explained together on an accelerator (sorted by length, so they pad little); the internal batches
# are still capped by TOKEN_BUDGET.
GROUP_TEXTS = 8


def group_size(lm: LoadedModel) -> int:
    """Texts ``attribute_many`` explains together by default: ``GROUP_TEXTS`` on an accelerator, where a
    batch runs its rows in parallel (an H200: groups of 8 took 0.34x as long as one text at a time, 16 0.31x
    with their passes then split by ``TOKEN_BUDGET``), and 1 on the CPU, where a group padded to its longest text
    and refined in shared rounds took 1.24x as long as one text at a time (bench/ig_groups.py: 160 reviews, the
    default model's architecture, 2 threads; groups of 4: 1.06x)."""
    return 1 if lm.device.type == "cpu" else GROUP_TEXTS
