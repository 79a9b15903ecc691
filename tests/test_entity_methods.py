"""LIME, KernelSHAP and ERASER faithfulness of a tagger's entities (``interpret.entity_methods``), on the tiny
seeded taggers of test_entity_attribution: KernelSHAP against exact Shapley values enumerated with the model's own
forward, every record's F(x) and F(all replaced) against that forward, the targets of one text fitted on shared
samples (equal to one at a time), faithfulness against masking done by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from test_entity_attribution import BIO, TEXT, _inputs, label_ids_of, reference_f, tagger  # noqa: F401

import bertviz_app as bv
from bertviz_app.errors import InputError
from bertviz_app.interpret.entity_attribution import explain_entities
from bertviz_app.interpret.entity_methods import entity_faithfulness, sample_entities

SHORT = "the film was awful joy"


def _word_f(lm, rec, keep_words):
    """F of the record's target with the words not in ``keep_words`` given [PAD]'s word vectors, by hand."""
    ids, x, rest, positions, offsets = _inputs(lm, rec.text)
    at = [p for p in positions if offsets[p][0] < rec.target.end and offsets[p][1] > rec.target.start]
    labels = label_ids_of(lm, rec)
    pad = lm.model.get_input_embeddings()(torch.tensor([lm.tokenizer.pad_token_id]))[0]
    y = x.clone()
    for i, w in enumerate(rec.words):
        if i not in keep_words:
            y[0, [positions[p] for p in range(*w.pieces)]] = pad
    with torch.no_grad():
        return float(reference_f(lm, y, rest, at, labels)[0])


def exact_shapley(lm, rec) -> np.ndarray:
    """Each word's Shapley value of F, every subset of the words enumerated."""
    n = len(rec.words)
    f = {s: _word_f(lm, rec, set(s)) for r in range(n + 1) for s in itertools.combinations(range(n), r)}
    phi = np.zeros(n)
    for i in range(n):
        for s, value in f.items():
            if i in s:
                continue
            with_i = tuple(sorted((*s, i)))
            phi[i] += math.factorial(len(s)) * math.factorial(n - len(s) - 1) / math.factorial(n) * (f[with_i] - value)
    return phi


def test_kernel_shap_approaches_the_exact_shapley_values(tagger):  # noqa: F811
    lm = tagger("bert")
    recs = sample_entities(lm, SHORT, method="kernel_shap", n_samples=400)
    assert recs, "the fixture tags no entity in the text: the test would test nothing"
    for rec in recs:
        phi = exact_shapley(lm, rec)
        scale = float(np.abs(phi).max())
        assert scale > 1e-2  # the tiny tagger's words matter
        got = np.array([w.score for w in rec.words])
        assert np.abs(got - phi).max() <= 0.02 * scale, (got, phi)  # 32 subsets: all sampled, near exact
        assert rec.f_x == pytest.approx(_word_f(lm, rec, set(range(len(rec.words)))), rel=1e-4, abs=1e-6)
        assert rec.f_baseline == pytest.approx(_word_f(lm, rec, set()), rel=1e-4, abs=1e-6)
        assert rec.method == "kernel_shap" and rec.delta is None
        for w in rec.words:  # each piece an equal share of its word's weight
            assert float(rec.scores[w.pieces[0]:w.pieces[1]].sum()) == pytest.approx(w.score, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("method", ["lime", "kernel_shap"])
def test_targets_of_one_text_share_their_samples_and_equal_one_at_a_time(tagger, method):  # noqa: F811
    lm = tagger("bert")
    together = sample_entities(lm, TEXT, method=method, n_samples=200, seed=3)
    assert len(together) >= 2, "the fixture tags fewer than two entities: nothing is shared"
    for k, rec in enumerate(together):
        [alone] = sample_entities(lm, TEXT, k, method=method, n_samples=200, seed=3)
        np.testing.assert_allclose(rec.scores, alone.scores, rtol=1e-5, atol=1e-7)
        assert rec.target == alone.target
    again = sample_entities(lm, TEXT, method=method, n_samples=200, seed=3)
    other = sample_entities(lm, TEXT, method=method, n_samples=200, seed=4)
    assert all(np.array_equal(a.scores, b.scores) for a, b in zip(together, again))  # seeded
    assert not all(np.allclose(a.scores, b.scores) for a, b in zip(together, other))  # control: the seed matters


def test_faithfulness_equals_masking_by_hand_for_each_method(tagger):  # noqa: F811
    lm = tagger("bert")
    [ig] = explain_entities(lm, TEXT, 0, n_steps=32, tolerance=None)
    [lime] = sample_entities(lm, TEXT, 0, n_samples=200)
    ids, x, rest, positions, offsets = _inputs(lm, TEXT)
    at = [p for p in positions if offsets[p][0] < ig.target.end and offsets[p][1] > ig.target.start]
    labels = label_ids_of(lm, ig)
    pad = lm.model.get_input_embeddings()(torch.tensor([lm.tokenizer.pad_token_id]))[0]

    def p_without(pieces):
        y = x.clone()
        if pieces:
            y[0, [positions[p] for p in pieces]] = pad
        with torch.no_grad():
            return math.exp(float(reference_f(lm, y, rest, at, labels)[0]))

    ks = (20, 50, 100)
    results = entity_faithfulness(lm, [ig, lime], ks=ks)
    for rec, fa in zip((ig, lime), results):
        order = sorted(range(len(positions)), key=lambda i: (-rec.scores[i], i))
        p_x = p_without([])
        assert fa.p_x == pytest.approx(p_x, rel=1e-4)
        for k, n, comp, suff in zip(ks, fa.n_tokens, fa.comprehensiveness_k, fa.sufficiency_k):
            assert n == math.ceil(k * len(positions) / 100)
            assert comp == pytest.approx(p_x - p_without(order[:n]), rel=1e-3, abs=1e-6)
            assert suff == pytest.approx(p_x - p_without(order[n:]), rel=1e-3, abs=1e-6)
        assert fa.sufficiency_k[-1] == pytest.approx(0.0, abs=1e-6)  # every piece kept: nothing changes
        assert fa.method == rec.method and ig.target.label in fa.target and fa.reading
    assert abs(results[0].comprehensiveness_k[-1]) > 1e-3  # control: removing every piece changes p


def test_refusals_say_what_to_send(tagger, signal_model_dir):  # noqa: F811
    lm = tagger("bert")
    for kwargs, message in (({"method": "shap"}, "method must be one of lime, kernel_shap"),
                            ({"n_samples": 1}, "n_samples must be a whole number of at least 2"),
                            ({"batch_size": 0}, "batch_size must be a whole number"),
                            ({"target": "odds"}, "target must be one of")):
        with pytest.raises(InputError, match=message):
            sample_entities(lm, TEXT, **kwargs)
    slow = bv.load_model(str(tagger.paths["bert", 1.5]), device="cpu",
                         settings=bv.Settings(max_method_seconds=1e-9))
    with pytest.raises(InputError, match="Use integrated_gradients or occlusion"):
        sample_entities(slow, TEXT, method="lime")
    [ok] = sample_entities(lm, TEXT, 0, n_samples=64)  # control: the same call within the limit
    assert ok.words
    with pytest.raises(InputError, match="ks must be percentages"):
        entity_faithfulness(lm, [ok], ks=(0,))
    last = sample_entities(lm, TEXT, len(bv.tag(lm, TEXT)[0].entities) - 1, n_samples=64)
    other = tagger("bert", 0.5)  # another tagger reads the last entity with one more word
    assert bv.tag(other, TEXT)[0].entities[-1].text != last[0].target.text
    with pytest.raises(InputError, match="made with another model or other settings"):
        entity_faithfulness(other, last)
    assert entity_faithfulness(lm, last)[0].p_x > 0  # control: the model it was made with
    with pytest.raises(InputError, match="is a sequence classification model"):
        sample_entities(bv.load_model(str(signal_model_dir("bert")), device="cpu"), TEXT)
