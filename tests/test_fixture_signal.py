"""The fixture models with signal (conftest ``make_signal_model``, one per family) keep their signal,
and the independent Integrated Gradients reference (conftest ``reference_ig``) is right: the numeric
tests of the engine (test_core, test_families, test_speed_options, test_batching, ...) lean on both.
A random tiny model answers every text with p within 1e-5 of 0.5 and attributions of 1e-6, where
tolerances of 1e-5 cannot fail; these checks make sure the fixtures never quietly drift back there."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bertviz_app as bv

from conftest import FAMILIES, SIGNAL_TEXTS, assert_scores_match, reference_f, reference_ig

TEXT = "the film was awful"


@pytest.fixture(scope="module", params=FAMILIES)
def fam_signal(request, signal_model_dir):
    return bv.load_model(str(signal_model_dir(request.param)), device="cpu")


def test_answers_span_the_probability_range(fam_signal):
    p = [pred.probs[1] for pred in bv.predict(fam_signal, list(SIGNAL_TEXTS))]
    assert min(p) < 0.05 and max(p) > 0.95, p
    # a text without a sentiment word sits in between: the model reads the words, not the length
    assert 0.2 < bv.predict(fam_signal, "the film")[0].probs[1] < 0.8


def test_attributions_are_of_order_one_tenth_from_every_baseline(fam_signal):
    """From every baseline whose path is smooth, f(x) - f(baseline) is large and the largest score
    (computed by the reference, not the engine) is of order 0.1: a halved or zeroed score is far
    outside any tolerance the tests use."""
    jumps = {b for b in ("pad", "zero") if bv.baseline_jumps(fam_signal, b)}
    for baseline in ("pad", "mask", "unk", "zero"):
        if baseline in jumps:
            continue
        scores, f_x, f_b, _ = reference_ig(fam_signal, TEXT, baseline=baseline, steps=256)
        assert abs(f_x - f_b) > 0.15, (baseline, f_x, f_b)
        assert np.abs(scores).max() > 0.05, (baseline, scores)


def test_pad_and_zero_baselines_differ(fam_signal):
    """The [PAD] word vector is not zero (as in a real checkpoint), so tests parametrized over "pad"
    and "zero" test two things; except on DeBERTa-v2, whose [PAD] row stays zero (``baseline_jumps``)."""
    pad = reference_f(fam_signal, TEXT, baseline="pad")
    zero = reference_f(fam_signal, TEXT, baseline="zero")
    if fam_signal.model.config.model_type == "deberta-v2":
        np.testing.assert_array_equal(pad, zero)
    else:
        assert np.abs(pad - zero).max() > 1e-3, (pad, zero)


def test_the_reference_is_complete_where_the_path_is_smooth(fam_signal):
    """The reference's Riemann sum adds up to f(x) - f(baseline) (its own forward passes) within 1e-4 of
    that change: it is the integral, not an approximation the engine's tests would have to allow for.
    DistilBERT's head has a ReLU: the path has kinks, where a Riemann sum converges as 1/n only (1e-3
    at 1024 points, 1e-4 at 8192). Scores halved, the same check is far off (the check can fail)."""
    baseline = bv.recommended_baseline(fam_signal)
    kinks = fam_signal.model.config.model_type == "distilbert"
    scores, f_x, f_b, _ = reference_ig(fam_signal, TEXT, baseline=baseline, steps=8192 if kinks else 1024)
    gap = f_x - f_b
    assert scores.sum() == pytest.approx(gap, rel=3e-4 if kinks else 1e-4)
    assert abs(0.5 * scores.sum() - gap) > 0.1 * abs(gap)


def test_reference_equals_captums_integrated_gradients(signal):
    """A third implementation: Captum's IntegratedGradients on the model's own forward from word
    vectors, with its Gauss-Legendre rule, equals the reference with the same rule; and the reference's
    fine Riemann sum equals Captum at 512 steps."""
    from captum.attr import IntegratedGradients

    tok, model = signal.tokenizer, signal.model
    enc = tok(TEXT, return_tensors="pt")
    words = model.get_input_embeddings()
    with torch.no_grad():
        x = words(enc["input_ids"])
        base_ids = enc["input_ids"].clone()
        base_ids[0, 1:-1] = tok.pad_token_id
        b = words(base_ids)

    def f(embeds):
        n = embeds.shape[0]
        return torch.softmax(model(inputs_embeds=embeds, attention_mask=enc["attention_mask"].expand(n, -1),
                                   token_type_ids=enc["token_type_ids"].expand(n, -1)).logits, -1)

    ref, f_x, f_b, target = reference_ig(signal, TEXT, gauss_legendre=50)
    captum = IntegratedGradients(f).attribute(x, baselines=b, target=target, n_steps=50).sum(-1)[0]
    assert_scores_match(captum.detach().numpy(), ref, abs(f_x - f_b), rtol=1e-5)
    fine, *_ = reference_ig(signal, TEXT)
    captum = IntegratedGradients(f).attribute(x, baselines=b, target=target, n_steps=512,
                                              internal_batch_size=256).sum(-1)[0]
    assert_scores_match(captum.detach().numpy(), fine, abs(f_x - f_b), rtol=1e-4)


def test_score_comparison_fails_on_broken_scores(signal):
    """``assert_scores_match`` (what the engine's tests use) refuses halved, zeroed and sign-flipped
    scores, and scores of another text; and refuses a comparison whose scale is too small to test."""
    ref, f_x, f_b, _ = reference_ig(signal, TEXT, steps=256)
    scale = abs(f_x - f_b)
    assert_scores_match(ref, ref, scale)
    for broken in (0.5 * ref, 0 * ref, -ref, ref[::-1]):
        with pytest.raises(AssertionError):
            assert_scores_match(broken, ref, scale)
    with pytest.raises(AssertionError, match="too small"):
        assert_scores_match(ref, ref, 1e-5)
