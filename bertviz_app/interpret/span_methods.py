"""LIME and KernelSHAP of a question answering model's answer span, and ERASER faithfulness of any span attribution
(Integrated Gradients, occlusion, LIME, KernelSHAP) on the span's probability (issue 33).

**Sampled methods** (``sample_span``). The targets are ``explain_answer``'s (the predicted span, a chosen span or "no
answer"; as a whole, its start or its end; F = log p(start) + log p(end) or, ``target="prob"``, p(start) x p(end)),
read in the same window. The features are **the context's words** (``side="context"``, the default): each kept, or
all its tokens given the baseline's word vectors (as occlusion replaces them); the question is kept as it is. Why
the context: the span is a piece of the context and the question is what is asked of it; "which words of the context
make the model answer this span" is the question a reader's explanation answers, and the context's words are where
LIME's and KernelSHAP's samples are spent. ``side="both"`` samples the question's words too (one feature set, the
question's first). Captum's ``Lime`` (ridge, alpha 1, its exponential cosine kernel) or ``KernelShap`` fits a linear
model of F over random subsets of the words, seeded, with the tagger's shared sampler (``entity_methods
.WordSubsets``): every sampled subset goes through the model once and is read by every part asked for, so the span,
its start and its end are fitted on the same samples at the cost of one. A word's score is its fitted weight; each
of its tokens gets an equal share; a word that is not a feature scores 0. No completeness (``delta`` None);
``f_baseline`` is F with every feature word replaced (KernelSHAP's weights add up to about F(x) - f_baseline).

**Faithfulness** (``span_faithfulness``), ERASER's (DeYoung et al. 2020) on the span's probability p (the span:
p(start) x p(end); its start or end: its own probability; "no answer": both at the first position)::

    comprehensiveness_k = p(x) - p(x with the top k% words of the side replaced by the baseline)
    sufficiency_k       = p(x) - p(x with every other word of the side replaced)

where the words are the record's words of ``side`` ("context" by default, as sampled; "both") ranked by their
scores, highest first, and k% of them is rounded up. A word is replaced by giving all its tokens the baseline's word
vectors (masking, not removal: removing a token would shift every later position, and the span's own tokens, read
at fixed positions, with them); the span's offsets stay put, and the span's own words can be among those replaced.
Special tokens are always kept. ``n_tokens`` of the result counts words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import InputError
from ..models.answering import whole_number
from ..models.registry import LoadedModel
from ..results import Faithfulness
from .entity_attribution import variant_values
from .entity_methods import SAMPLED, WordSubsets, fit_word_weights, refuse_if_slow
from .faithfulness_eval import KS, check_ks, faithfulness_reading
from .methods import default_samples
from .span_attribution import (
    SpanAttribution,
    SpanEngine,
    explain_answer,
    occlude_answer,
    prepare_span,
    side_words,
    span_record,
)

__all__ = ["SAMPLED", "SPAN_METHODS", "FEATURE_SIDES", "explain_span_by", "sample_span", "span_faithfulness",
           "span_target_name"]

SPAN_METHODS = ("integrated_gradients", "occlusion", *SAMPLED)  # every method a span is explained by

FEATURE_SIDES = ("context", "both")


def _side(side: str) -> str:
    if side not in FEATURE_SIDES:
        raise InputError(f"side must be one of {', '.join(FEATURE_SIDES)} (whose words are the features), got "
                         f"{side!r}.")
    return side


def _features(words, side: str) -> list[int]:
    """Indices into ``side_words``' list of the words that are features: the context's, or every word."""
    return [i for i, w in enumerate(words) if side == "both" or w[0] == "context"]



def explain_span_by(lm: LoadedModel, question: str, context: str, span: tuple[int, int] | str | None = None, *,
                    method: str = "integrated_gradients", part: str | Sequence[str] = "span", target: str = "logprob",
                    baseline: str = "pad", n_steps: int | None = None, tolerance: float | None = None,
                    n_samples: int | None = None, seed: int = 0, side: str = "context", max_answer_len: int = 30,
                    stride: int | None = None) -> list[SpanAttribution]:
    """The same targets (``span``, ``part``, ``target``, ``baseline``, ``max_answer_len``, ``stride``) explained by
    one of ``SPAN_METHODS``: Integrated Gradients (``explain_answer``: ``n_steps``, ``tolerance``), occlusion
    (``occlude_answer``), LIME or KernelSHAP (``sample_span``: ``n_samples``, ``seed``, ``side``). One record per
    part, in order; another method name: InputError naming those there are."""
    common = dict(part=part, target=target, baseline=baseline, max_answer_len=max_answer_len, stride=stride)
    if method == "integrated_gradients":
        return explain_answer(lm, question, context, span, n_steps=n_steps, tolerance=tolerance, **common)
    if method == "occlusion":
        return occlude_answer(lm, question, context, span, **common)
    if method in SAMPLED:
        return sample_span(lm, question, context, span, method=method, n_samples=n_samples, seed=seed, side=side,
                           **common)
    raise InputError(f"method must be one of {', '.join(SPAN_METHODS)}, got {method!r}.")


def sample_span(lm: LoadedModel, question: str, context: str, span: tuple[int, int] | str | None = None, *,
                method: str = "lime", part: str | Sequence[str] = "span", target: str = "logprob",
                baseline: str = "pad", n_samples: int | None = None, seed: int = 0, side: str = "context",
                max_answer_len: int = 30, stride: int | None = None, batch_size: int = 64) -> list[SpanAttribution]:
    """LIME (``method="lime"``) or KernelSHAP (``"kernel_shap"``) of the same targets as ``explain_answer`` (same
    ``span``, ``part``, ``target``, ``baseline``, ``max_answer_len``, ``stride``): one record per part, in order,
    every part fitted on the same samples. ``side``: whose words are the features ("context", the default: the
    question kept; "both"). ``n_samples``: subsets of the words sampled (None: ``methods.default_samples`` of the
    features); ``seed``: the sampling's. A run estimated to take longer than the settings' ``max_method_seconds``
    is refused before it starts, saying how to make it shorter. See the module's docstring."""
    if method not in SAMPLED:
        raise InputError(f"method must be one of {', '.join(SAMPLED)}, got {method!r}.")
    side = _side(side)
    batch_size, seed = whole_number(batch_size, "batch_size", 1), whole_number(seed, "seed", 0)
    n_samples = None if n_samples is None else whole_number(n_samples, "n_samples", 2)
    question, context, parts, plan = prepare_span(lm, question, context, span, part, target, baseline,
                                                  max_answer_len, stride)
    e = plan.enc.encodings[plan.w]
    words = side_words(e, question, context)
    feats = _features(words, side)
    with lm.run_lock:
        engine = SpanEngine.for_parts(lm, plan, parts, target, baseline, question, context)
        subsets = WordSubsets(engine, [list(range(words[i][4], words[i][5])) for i in feats], batch_size)
        n = default_samples(len(feats)) if n_samples is None else n_samples
        refuse_if_slow(method, len(feats), subsets.seconds_per_row(), n, lm.settings.max_method_seconds)
        every = [p for positions in subsets.words for p in positions]
        ends = variant_values(engine, [[], every], batch_size)  # (2, K): F(x), F(every feature word replaced)
        weights = (fit_word_weights(subsets, method, len(parts), n, seed) if feats
                   else np.zeros((len(parts), 0)))  # (K, W)
    out = []
    for j, p in enumerate(parts):
        scores = np.zeros(len(e.ids), dtype=np.float32)  # (T,)
        word_scores = np.zeros(len(words), dtype=np.float64)
        for f, (i, positions) in enumerate(zip(feats, subsets.words)):
            scores[positions] = weights[j, f] / len(positions)
            word_scores[i] = weights[j, f]
        out.append(span_record(question, context, plan, p, scores, method, target, ends[0, j], ends[1, j], None,
                               None, None, baseline, word_scores=word_scores))
    return out


def span_target_name(rec: SpanAttribution) -> str:
    """What a record's probability is of, in words: "the span 'joy'", "the start of 'joy'", "no answer"."""
    t = rec.target
    if t.kind == "no-answer":
        return "no answer" if t.part == "span" else f"no answer's {t.part}"
    return {"span": "the span", "start": "the start of", "end": "the end of"}[t.part] + f" {t.text!r}"


def _again(lm, rec: SpanAttribution, baseline: str, max_answer_len: int, stride):
    """The record's target planned again with ``lm`` (InputError when it is not found as it was)."""
    t = rec.target
    span = "no-answer" if t.kind == "no-answer" else None if t.kind == "predicted" else (t.start, t.end)
    try:
        _, _, _, plan = prepare_span(lm, rec.question, rec.context, span, t.part, "prob", baseline, max_answer_len,
                                     stride)
    except InputError as err:
        raise InputError(f"This attribution's span is not found again with this model or settings ({err}) explain "
                         "the answer with this model, max_answer_len and stride.") from None
    e = plan.enc.encodings[plan.w]
    if (plan.w != rec.window or (plan.first, plan.last, plan.start, plan.end) != (t.first, t.last, t.start, t.end)
            or tuple(e.tokens) != rec.tokens):
        raise InputError("This attribution was made with another model or other settings (its span is not found "
                         "again in the same window and tokens): explain the answer with this model, max_answer_len "
                         "and stride.")
    return plan


def span_faithfulness(lm: LoadedModel, records: Sequence[SpanAttribution], ks: Sequence[int] = KS,
                      baseline: str | None = None, side: str = "context", max_answer_len: int = 30,
                      stride: int | None = None, batch_size: int = 64) -> list[Faithfulness]:
    """Comprehensiveness and sufficiency (per k and as AOPC) of each record's ranking of the words of ``side``
    ("context" or "both"), on its target's probability (see the module's docstring). ``baseline``: what replaces a
    word's tokens ("pad", "mask", "unk" or "zero"; None: the record's own); ``max_answer_len`` and ``stride``: those
    the records were explained with (the answer is read again to find the span's window). A record of another model
    or other settings (its span not found again at the same tokens): InputError."""
    ks = check_ks(ks)
    side = _side(side)
    batch_size = whole_number(batch_size, "batch_size", 1)
    out = []
    for rec in records:
        base = baseline or rec.baseline
        plan = _again(lm, rec, base, max_answer_len, stride)
        words = side_words(plan.enc.encodings[plan.w], rec.question, rec.context)
        feats = _features(words, side)
        if len(words) != len(rec.words):
            raise InputError("This attribution's words are not this window's: explain the answer with this model.")
        order = sorted(feats, key=lambda i: (-rec.words[i].score, i))
        total = len(order)
        counts = tuple(min(total, math.ceil(k * total / 100 - 1e-9)) for k in ks)

        tokens = [list(range(words[i][4], words[i][5])) for i in order]  # each ranked word's positions
        variants = [[]] + [[p for positions in v for p in positions] for n in counts
                           for v in (tokens[:n], tokens[n:])]
        with lm.run_lock:
            engine = SpanEngine.for_parts(lm, plan, [rec.target.part], "prob", base, rec.question, rec.context)
            p = variant_values(engine, variants, batch_size)[:, 0].astype(np.float64)  # (1 + 2K,)
        comp = tuple(float(p[0] - p[1 + 2 * i]) for i in range(len(ks)))
        suff = tuple(float(p[0] - p[2 + 2 * i]) for i in range(len(ks)))
        at = ks.index(20) if 20 in ks else len(ks) // 2
        name = span_target_name(rec)
        reading = faithfulness_reading(name, ks[at], counts[at], total, comp[at]).replace("tokens", "words")
        out.append(Faithfulness(method=rec.method, target=name, ks=ks, n_tokens=counts, comprehensiveness_k=comp,
                                sufficiency_k=suff, comprehensiveness=float(np.mean(comp)),
                                sufficiency=float(np.mean(suff)), p_x=float(p[0]), reading=reading))
    return out
