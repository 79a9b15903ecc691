"""Small frozen records returned by the analyses. Fields run in parallel: ``tokens[i]`` goes
with ``scores[i]``, ``weights[l, h, i, j]`` is how much token i attends to token j."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "TokenInfo",
    "Prediction",
    "AttentionMaps",
    "Attribution",
    "ClsPath",
    "ClsLens",
    "ModelSummary",
    "Faithfulness",
    "MethodComparison",
    "METHOD_LABELS",
    "MIXING_METHODS",
    "NO_COMPLETENESS",
    "FAITHFULNESS_TIE",
    "method_label",
]

# How every attribution method is named to a reader (the page, the CLI's readings, exports).
# Everyone's default Integrated Gradients steps (library, CLI, JSON API, explain-csv, the page's
# "choose the steps automatically"): as few as it takes for a relative convergence delta <= 5%,
# the level above which the page warns. On the default model that is ~4x the speed of 50 fixed
# steps, and every result meets it (50 fixed steps promise nothing). Here, in the shared kernel,
# so the CLI's --help states it without importing torch.
DEFAULT_TOLERANCE = 0.05
# The steps of the fixed mode where an edge asks for it without a count (the CLI's and the API's
# "tolerance 0"); library callers pass n_steps.
FIXED_N_STEPS = 50

METHOD_LABELS = {
    "integrated_gradients": "Integrated Gradients",
    "gradient_x_input": "gradient × input",
    "saliency": "saliency (gradient norm)",
    "occlusion": "occlusion (per word)",
    "kernel_shap": "KernelSHAP (per word)",
    "lime": "LIME (per word)",
    "raw": "raw attention (rollout)",
    "norm": "attention-norm",
    "value_zeroing": "value zeroing",
    "alti": "ALTI",
}

# The context-mixing measures (``mixing_measures.MEASURES``) scored as attribution methods: each one's
# aggregated [CLS] row is a token ranking (>= 0, summing to 1: how much [CLS] takes from each token),
# not a share of f(x) - f(baseline), so no completeness (delta) reading applies to them.
MIXING_METHODS = ("raw", "norm", "value_zeroing", "alti")
# What a reader is told in place of the delta of such a method.
NO_COMPLETENESS = ("does not apply: a context-mixing measure says how much [CLS] takes from each token (its scores "
                   "sum to 1), not how much each token adds to f(x) - f(baseline)")

# AOPC comprehensiveness values closer than this are a tie: half a percentage point of the target's
# probability, below the two decimals a reading prints. Two methods that rank the same tokens first
# differ only by float rounding (4e-6 seen), and that rounding differs between CPUs.
FAITHFULNESS_TIE = 0.005


def method_label(method: str) -> str:
    """The reader's name of an attribution method (its id when it has none)."""
    return METHOD_LABELS.get(method, method)


def _and(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


@dataclass(frozen=True, eq=False)
class TokenInfo:
    """The tokens of one encoded input, with what is needed to map them back to words."""

    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]  # character span in its own sequence; (0, 0) for specials
    sequence_ids: tuple[int | None, ...]  # 0 = text, 1 = pair, None = special token
    text: str
    pair: str | None
    truncated: bool

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True, eq=False)
class Prediction:
    text: str
    pair: str | None
    labels: tuple[str, ...]
    probs: tuple[float, ...]  # parallel to labels: softmax, or sigmoid for multi-label models
    label: str  # the most probable class
    truncated: bool  # the input was longer than the model's max length and was cut
    n_tokens: int
    multi_label: bool = False
    windows: int = 1  # predict(window=True): how many overlapping windows were read and pooled
    temperature: float = 1.0  # the calibration.json temperature the logits were divided by (1.0: none, raw)

    @property
    def scores(self) -> dict[str, float]:
        return dict(zip(self.labels, self.probs))

    @property
    def active_labels(self) -> tuple[str, ...]:
        """Multi-label: every class with probability >= 0.5; single-label: the predicted one."""
        if not self.multi_label:
            return (self.label,)
        return tuple(lab for lab, p in zip(self.labels, self.probs) if p >= 0.5)

    def to_dict(self) -> dict:
        out = {"text": self.text, "label": self.label, "scores": self.scores, "truncated": self.truncated}
        if self.pair is not None:
            out["pair"] = self.pair
        if self.multi_label:
            out["active_labels"] = list(self.active_labels)
        if self.windows > 1:
            out["windows"] = self.windows
        if self.temperature != 1.0:
            out["temperature"] = self.temperature
        return out


@dataclass(frozen=True, eq=False)
class AttentionMaps:
    info: TokenInfo
    weights: np.ndarray  # (L, H, T, T) float32, rows sum to 1, real tokens only

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.info.tokens

    @property
    def num_layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.weights.shape[1])

    def to_dict(self) -> dict:
        return {"tokens": list(self.tokens), "weights": np.round(self.weights, 6).tolist()}


@dataclass(frozen=True, eq=False)
class Attribution:
    """Integrated Gradients of one class output with respect to the word embeddings.

    Completeness: ``scores.sum() == f_x - f_baseline - delta`` up to float error, where ``delta``
    is Captum's convergence delta; ``relative_delta = |delta| / |f_x - f_baseline|`` is the number
    that says how far to trust the scores (below ~0.05 is good).
    """

    info: TokenInfo
    scores: np.ndarray  # (T,) signed, summed over the embedding dimension
    target: str
    target_index: int
    output: str  # "prob" or "logit": what f is
    f_x: float
    f_baseline: float
    delta: float
    n_steps: int
    baseline: str
    # Which method made the scores (``methods.METHODS``) and what it cost. For methods other than
    # Integrated Gradients ``delta`` is the completeness gap ``f_x - f_baseline - scores.sum()``
    # (not a convergence error: gradient x input, saliency and occlusion do not promise completeness)
    # and ``n_steps`` is the number of perturbed inputs (occlusion, KernelSHAP) or 1.
    method: str = "integrated_gradients"
    n_forward: int = 0  # model passes without gradients, batch rows counted one each (0: not counted)
    n_backward: int = 0  # rows that also went through a backward pass
    seconds: float = 0.0  # wall time of the computation (0: not measured)
    # Integrated Gradients: the relative delta its steps were chosen for (``n_steps`` = the gradient
    # evaluations that took); None: exactly ``n_steps`` fixed steps, or another method
    tolerance: float | None = None

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.info.tokens

    @property
    def has_completeness(self) -> bool:
        """Whether the scores are meant to add up to f(x) - f(baseline) (so ``delta`` reads as a gap in
        that); False for the context-mixing measures (``MIXING_METHODS``), whose ``delta`` is only
        the record's identity f(x) - f(baseline) - sum(scores)."""
        return self.method not in MIXING_METHODS

    @property
    def relative_delta(self) -> float:
        gap = abs(self.f_x - self.f_baseline)
        return float(abs(self.delta) / gap) if gap > 1e-12 else float("inf") if abs(self.delta) > 1e-12 else 0.0

    def to_dict(self) -> dict:
        """The record as JSON types; the cost fields only where they were measured (``methods.explain``)."""
        cost = ({"n_forward": self.n_forward, "n_backward": self.n_backward, "seconds": self.seconds}
                if self.seconds else {})
        # a context-mixing measure: no delta to read (null), and why, under "completeness"
        gap = {} if self.has_completeness else {"delta": None, "relative_delta": None, "completeness": NO_COMPLETENESS}
        return {
            "tokens": list(self.tokens),
            "attributions": [float(s) for s in self.scores],
            "target": self.target,
            "delta": float(self.delta),
            "n_steps": self.n_steps,
            "baseline": self.baseline,
            "output": self.output,
            "f_x": self.f_x,
            "f_baseline": self.f_baseline,
            "relative_delta": self.relative_delta,
            "tolerance": self.tolerance,
            "method": self.method,
            **cost,
            **gap,
        }


@dataclass(frozen=True, eq=False)
class ClsPath:
    """How much each token position, at each depth, contributes to the target class through [CLS].

    Row 0 is the embedding output, row l the output of encoder layer l. Each row is a Layer
    Integrated Gradients attribution of the same target from the same baseline, so each row
    sums to f(x) - f(baseline) - deltas[row].
    """

    info: TokenInfo
    layer_names: tuple[str, ...]
    scores: np.ndarray  # (L + 1, T)
    deltas: np.ndarray  # (L + 1,)
    target: str
    f_x: float
    f_baseline: float
    n_steps: int
    baseline: str

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.info.tokens


@dataclass(frozen=True, eq=False)
class ClsLens:
    """Class probabilities read from each depth's [CLS] hidden state through the trained head
    (BERT: pooler tanh(W h + b) and classifier; other families: their own, see ``families.py``).
    The last row equals the model's prediction."""

    layer_names: tuple[str, ...]
    labels: tuple[str, ...]
    probs: np.ndarray  # (L + 1, C)


@dataclass(frozen=True, eq=False)
class ModelSummary:
    name: str
    architecture: str  # e.g. "BertForSequenceClassification"
    components: tuple[tuple[str, int], ...]  # (component, parameter count), in model order
    encoder_params: int  # everything in the encoder (BertModel: embeddings + layers + pooler)
    classifier_params: int  # the head outside it (BERT: classifier; DeBERTa: pooler + classifier)
    total_params: int
    config: dict
    labels: tuple[str, ...]
    device: str
    dtype: str
    num_layers: int
    num_heads: int
    hidden_size: int
    max_length: int
    head: str = "sequence classification"  # what the head outside the encoder answers (heads.Head.name)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "architecture": self.architecture,
            "head": self.head,
            "components": [{"name": n, "params": p} for n, p in self.components],
            "encoder_params": self.encoder_params,
            "classifier_params": self.classifier_params,
            "total_params": self.total_params,
            "labels": list(self.labels),
            "device": self.device,
            "dtype": self.dtype,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_size": self.hidden_size,
            "max_length": self.max_length,
            "config": self.config,
        }


@dataclass(frozen=True, eq=False)
class Faithfulness:
    """ERASER (DeYoung et al. 2020) faithfulness of one attribution, as probabilities of its target.

    ``comprehensiveness[k] = p(x) - p(x without its top k% tokens)``: high when the top-ranked tokens
    are what the model uses. ``sufficiency[k] = p(x) - p(only its top k% tokens)``: low (near 0 or
    negative) when they suffice. Removed tokens are replaced by the baseline token; special tokens
    are always kept. The AOPC values are the means over ``ks``."""

    method: str
    target: str
    ks: tuple[int, ...]  # percentages of the ranked (non-special) tokens
    n_tokens: tuple[int, ...]  # parallel to ks: how many tokens each k removes/keeps
    comprehensiveness_k: tuple[float, ...]  # parallel to ks
    sufficiency_k: tuple[float, ...]  # parallel to ks
    comprehensiveness: float  # AOPC: mean over ks
    sufficiency: float  # AOPC: mean over ks
    p_x: float  # probability of the target on the whole input
    reading: str  # one plain sentence

    def to_dict(self) -> dict:
        return {
            "method": self.method, "target": self.target, "ks": list(self.ks), "n_tokens": list(self.n_tokens),
            "comprehensiveness_k": list(self.comprehensiveness_k), "sufficiency_k": list(self.sufficiency_k),
            "comprehensiveness": self.comprehensiveness, "sufficiency": self.sufficiency, "p_x": self.p_x,
            "reading": self.reading,
        }


@dataclass(frozen=True, eq=False)
class MethodComparison:
    """Several attribution methods on one input, side by side. ``spearman[i, j]`` and
    ``top_k_overlap[i, j]`` compare methods ``methods[i]`` and ``methods[j]`` over the non-special
    tokens, on score magnitudes (which tokens matter, whatever the sign); ``rollout_spearman[i]``
    compares method i with attention rollout's [CLS] row at the last layer."""

    methods: tuple[str, ...]
    attributions: tuple[Attribution, ...]  # parallel to methods
    faithfulness: tuple[Faithfulness, ...]  # parallel to methods
    spearman: np.ndarray  # (M, M)
    top_k: int
    top_k_overlap: np.ndarray  # (M, M): shared tokens among each pair's top_k, divided by top_k
    rollout: np.ndarray  # (T,) last layer's rollout, [CLS] row
    rollout_spearman: np.ndarray  # (M,)

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.attributions[0].tokens

    @property
    def most_faithful_methods(self) -> tuple[str, ...]:
        """Every method whose AOPC comprehensiveness is within ``FAITHFULNESS_TIE`` of the best, in the
        order of ``methods``: two methods that rank the same tokens first score the same up to float
        rounding, which differs between CPUs, so such a difference names no winner."""
        best = max(f.comprehensiveness for f in self.faithfulness)
        return tuple(m for m, f in zip(self.methods, self.faithfulness)
                     if best - f.comprehensiveness <= FAITHFULNESS_TIE)

    @property
    def most_faithful(self) -> str:
        """The method whose top tokens, removed, lower the target's probability most (AOPC); of methods
        tied with it (``most_faithful_methods``), the first in ``methods``."""
        return self.most_faithful_methods[0]

    @property
    def reading(self) -> str:
        """One sentence: which method's top tokens the model depends on most, here (ties said as such)."""
        tied = self.most_faithful_methods
        f = self.faithfulness[self.methods.index(tied[0])]
        names = _and([method_label(m) for m in tied])
        if f.comprehensiveness < 0.05:
            return (f"no method's top-ranked tokens matter much to the model here (best AOPC comprehensiveness "
                    f"{f.comprehensiveness:+.2f}, {names}): the prediction does not rest on a few tokens")
        others = ", ".join(f"{method_label(m)} {g.comprehensiveness:+.2f}"
                           for m, g in zip(self.methods, self.faithfulness) if m not in tied)
        if len(tied) == 1:
            lead = f"{names} is the most faithful here: removing its top-ranked tokens lowers"
        else:
            lead = (f"{names} are tied as the most faithful here (comprehensiveness within {FAITHFULNESS_TIE} of "
                    f"each other): removing the top-ranked tokens of any of them lowers")
        return (f"{lead} the probability of {f.target} by {f.comprehensiveness:.2f} on average over k = "
                f"{', '.join(str(k) for k in f.ks)}%" + (f" (others: {others})" if others else ""))

    def to_dict(self) -> dict:
        return {
            "tokens": list(self.tokens),
            "methods": {m: {**a.to_dict(), "faithfulness": f.to_dict(), "rollout_spearman": float(r)}
                        for m, a, f, r in zip(self.methods, self.attributions, self.faithfulness,
                                              self.rollout_spearman)},
            "spearman": np.round(self.spearman, 6).tolist(),
            "top_k": self.top_k,
            "top_k_overlap": np.round(self.top_k_overlap, 6).tolist(),
            "rollout": [float(v) for v in self.rollout],
            "most_faithful": self.most_faithful,
            "most_faithful_methods": list(self.most_faithful_methods),
            "faithfulness_tie": FAITHFULNESS_TIE,
            "reading": self.reading,
        }
