"""LIME and KernelSHAP of a tagger's entities, and ERASER faithfulness of any entity attribution (Integrated
Gradients, occlusion, LIME, KernelSHAP).

**Sampled methods** (``sample_entities``). The features are the words of the window the target is read in (a word
kept, or all its pieces given the baseline's word vectors, as occlusion replaces them); F is the target's own
(``explain_entities``' log-probability of its labels at its pieces, or its exponent). Captum's ``Lime`` (ridge,
alpha 1, its exponential cosine kernel) or ``KernelShap`` fits a linear model of F over random subsets of the
words, seeded. Every sampled subset goes through the model once and is read by every target of the window: the
targets of one text are fitted on the same samples, at the cost of one. A word's score is the fitted weight; each
of its pieces gets an equal share. No completeness (``delta`` None); ``f_baseline`` is F with every word replaced.

**Faithfulness** (``entity_faithfulness``), ERASER's (DeYoung et al. 2020) as ``faithfulness_eval`` measures a
classifier's, on the target's probability p = exp(sum of the log-probabilities of its labels at its pieces)::

    comprehensiveness_k = p(x) - p(x with the top k% pieces of the window replaced by the baseline)
    sufficiency_k       = p(x) - p(x with every other piece of the window replaced)

Pieces are replaced by the baseline's word vectors (masking, not removal: removing a piece would shift every other
position, the entity's own among them). Special tokens are always kept; pieces outside the window read are not
part of the input.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import torch

from ..errors import InputError
from ..models.answering import whole_number
from ..models.registry import LoadedModel
from ..results import Faithfulness
from .entity_attribution import (
    EntityAttribution,
    TargetEngine,
    entity_record,
    prepare_targets,
    variant_values,
    window_words,
    with_word_scores,
)
from .faithfulness_eval import KS, check_ks, faithfulness_reading
from .methods import PROBE_ROWS, default_samples, estimate_seconds

__all__ = ["SAMPLED", "sample_entities", "entity_faithfulness", "WordSubsets", "fit_word_weights", "refuse_if_slow"]

SAMPLED = ("lime", "kernel_shap")


def _explainer(method: str, forward):
    from captum._utils.models.linear_model import SkLearnRidge
    from captum.attr import KernelShap, Lime

    return Lime(forward, SkLearnRidge(alpha=1.0)) if method == "lime" else KernelShap(forward)


class WordSubsets:
    """F of every target of one window on inputs keeping a subset of its words: z (B, W) in {0, 1} -> (B, K), each
    distinct subset computed once (the targets' fits share their samples). ``engine``: any ``LogitsTargetEngine``
    whose rows are the targets (an entity's, an answer span's: ``span_methods`` samples with it too); ``words``: the
    positions of each word (the features), a word left out given the baseline's vectors at all of them."""

    def __init__(self, engine: TargetEngine, words: list[list[int]], batch_size: int):
        self.engine, self.words, self.batch_size = engine, words, batch_size
        self.seen: dict[bytes, np.ndarray] = {}

    def variant(self, keep: np.ndarray) -> list[int]:
        return [p for w, positions in enumerate(self.words) if not keep[w] for p in positions]

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        keep = (z.detach().cpu().numpy() > 0.5)  # (B, W)
        keys = [row.tobytes() for row in keep]
        todo = list(dict.fromkeys(k for k in keys if k not in self.seen))
        if todo:
            rows = [np.frombuffer(k, dtype=bool) for k in todo]
            values = variant_values(self.engine, [self.variant(r) for r in rows], self.batch_size)  # (V, K)
            self.seen.update(zip(todo, values))
        return torch.tensor(np.stack([self.seen[k] for k in keys]), dtype=torch.float32)  # (B, K)

    def seconds_per_row(self) -> float:
        """One subset's cost, from a probe batch timed twice (the faster kept)."""
        probe = [self.variant(np.ones(len(self.words), dtype=bool))] * PROBE_ROWS
        best = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            variant_values(self.engine, probe, self.batch_size)
            best = min(best, time.perf_counter() - start)
        return best / PROBE_ROWS


def refuse_if_slow(method: str, n_words: int, per_row: float, n_samples: int, max_seconds: float) -> None:
    rows = min(n_samples, 2 ** n_words)  # each distinct subset is computed once
    est = estimate_seconds(method, n_words, per_row, rows)
    if est > max_seconds:
        raise InputError(f"{method} on this text ({n_words} words) needs {rows} forward passes, about {est:.3g} "
                         f"s; the limit is {max_seconds:g} s (BERTVIZ_MAX_METHOD_SECONDS). Use integrated_gradients "
                         "or occlusion, fewer n_samples, or a shorter text.")


def fit_word_weights(subsets: WordSubsets, method: str, k: int, n_samples: int, seed: int) -> np.ndarray:
    """(K, W): each target's word weights (``method`` "lime" or "kernel_shap"), fitted on the same seeded samples."""
    ones = torch.ones(1, len(subsets.words))  # (1, W)
    out = []
    for j in range(k):
        with torch.random.fork_rng(devices=[]):  # seeded here, the global RNG untouched
            torch.manual_seed(seed)
            attrs = _explainer(method, subsets).attribute(ones, baselines=torch.zeros_like(ones), target=j,
                                                          n_samples=n_samples,
                                                          perturbations_per_eval=subsets.batch_size)  # (1, W)
        out.append(attrs[0].float().numpy())
    return np.stack(out)


def sample_entities(lm: LoadedModel, text: str, entities: int | Sequence[int] | None = None, *, method: str = "lime",
                    token: int | Sequence[int] | None = None, label: str | int | None = None,
                    target: str = "logprob", baseline: str = "pad", n_samples: int | None = None, seed: int = 0,
                    aggregation: str = "simple", stride: int | None = None,
                    batch_size: int = 64) -> list[EntityAttribution]:
    """LIME (``method="lime"``) or KernelSHAP (``"kernel_shap"``) of the same targets as ``explain_entities`` (same
    arguments): one record per target, in order. ``n_samples``: subsets of the words sampled per window (None:
    ``methods.default_samples`` of its words); ``seed``: the sampling's. A run estimated to take longer than the
    settings' ``max_method_seconds`` is refused before it starts, saying how to make it shorter."""
    if method not in SAMPLED:
        raise InputError(f"method must be one of {', '.join(SAMPLED)}, got {method!r}.")
    batch_size, seed = whole_number(batch_size, "batch_size", 1), whole_number(seed, "seed", 0)
    n_samples = None if n_samples is None else whole_number(n_samples, "n_samples", 2)
    t, targets, windows, groups = prepare_targets(lm, text, entities, token, label, target, baseline, aggregation,
                                                  stride)
    out: list[EntityAttribution | None] = [None] * len(targets)
    with lm.run_lock:
        for w, rows in groups.items():
            win = windows[w]
            engine = TargetEngine.for_targets(lm, win, [targets[r] for r in rows], target, baseline)
            inside = window_words(t, win)
            words = [x for x, _ in inside]
            subsets = WordSubsets(engine, [positions for _, positions in inside], batch_size)
            n = default_samples(len(words)) if n_samples is None else n_samples
            refuse_if_slow(method, len(words), subsets.seconds_per_row(), n, lm.settings.max_method_seconds)
            ends = variant_values(engine, [[], list(win.positions)], batch_size)  # (2, K): F(x), F(all replaced)
            weights = fit_word_weights(subsets, method, len(rows), n, seed) if words else np.zeros((len(rows), 0))
            for j, r in enumerate(rows):
                token_scores = np.zeros(engine.ids.shape[1], dtype=np.float32)
                for i, positions in enumerate(subsets.words):
                    token_scores[positions] = weights[j, i] / len(positions)
                rec = entity_record(t, targets[r], win, w, token_scores, method, target, ends[0, j], ends[1, j],
                                    None, None, None, baseline)
                out[r] = with_word_scores(rec, {x.pieces: float(weights[j, i]) for i, x in enumerate(words)})
    return out  # type: ignore[return-value]


def _name(rec: EntityAttribution) -> str:
    tg = rec.target
    return f"{tg.label} at {tg.text!r}" if tg.kind == "entity" else f"{tg.label} at piece {tg.token} ({tg.text!r})"


def entity_faithfulness(lm: LoadedModel, records: Sequence[EntityAttribution], ks: Sequence[int] = KS,
                        baseline: str | None = None, aggregation: str = "simple", stride: int | None = None,
                        batch_size: int = 64) -> list[Faithfulness]:
    """Comprehensiveness and sufficiency (per k and as AOPC) of each record's ranking of the pieces of its window,
    on its target's probability (see the module's docstring). ``baseline``: what replaces a piece ("pad", "mask",
    "unk" or "zero"; None: the record's own); ``aggregation`` and ``stride``: those the records were explained
    with (the text is tagged again to find the target's window). A record of another model or other settings
    (its target not found again): InputError."""
    ks = check_ks(ks)
    out = []
    with lm.run_lock:
        for rec in records:
            tg = rec.target
            which = dict(entities=[tg.entity]) if tg.kind == "entity" else dict(token=[tg.token], label=tg.label)
            _, [again], windows, _ = prepare_targets(lm, rec.text, which.get("entities"), which.get("token"),
                                                     which.get("label"), "prob", baseline or rec.baseline,
                                                     aggregation, stride)
            if again.pieces != tg.pieces or again.piece_labels != tg.piece_labels or rec.window >= len(windows):
                raise InputError("This attribution was made with another model or other settings (its target is not "
                                 "found again): explain the text with this model, aggregation and stride.")
            win = windows[rec.window]
            engine = TargetEngine.for_targets(lm, win, [again], "prob", baseline or rec.baseline)
            scores = np.asarray(rec.scores, dtype=np.float64)[win.first: win.first + len(win.positions)]
            order = [win.positions[i] for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i))]
            total = len(order)
            counts = tuple(min(total, math.ceil(k * total / 100 - 1e-9)) for k in ks)
            variants = [[]] + [v for n in counts for v in (order[:n], order[n:])]
            p = variant_values(engine, variants, batch_size)[:, 0].astype(np.float64)  # (1 + 2K,)
            comp = tuple(float(p[0] - p[1 + 2 * i]) for i in range(len(ks)))
            suff = tuple(float(p[0] - p[2 + 2 * i]) for i in range(len(ks)))
            at = ks.index(20) if 20 in ks else len(ks) // 2
            out.append(Faithfulness(method=rec.method, target=_name(rec), ks=ks, n_tokens=counts,
                                    comprehensiveness_k=comp, sufficiency_k=suff,
                                    comprehensiveness=float(np.mean(comp)), sufficiency=float(np.mean(suff)),
                                    p_x=float(p[0]), reading=faithfulness_reading(_name(rec), ks[at], counts[at],
                                                                                  total, comp[at])))
    return out
