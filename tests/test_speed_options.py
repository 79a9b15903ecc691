"""The opt-in speed options of the core (bench/ measures them; tests never assert timings)."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_app as bv

SENTENCE = "the film is not good, it was a tedious slog"


@pytest.mark.parametrize("tolerance", [0.05, 0.005])
@pytest.mark.parametrize("baseline", ["pad", "zero"])
def test_adaptive_steps_meet_the_tolerance(tiny, tolerance, baseline):
    a = bv.attribute(tiny, SENTENCE, baseline=baseline, tolerance=tolerance)
    assert a.relative_delta <= tolerance or abs(a.delta) <= 1e-6
    assert 2 <= a.n_steps <= bv.get_settings().max_n_steps
    # completeness still holds for the steps actually used
    assert float(a.scores.sum()) - a.delta == pytest.approx(a.f_x - a.f_baseline, abs=1e-5)


def test_adaptive_steps_start_small_and_grow(tiny):
    loose = bv.attribute(tiny, SENTENCE, tolerance=0.5)
    tight = bv.attribute(tiny, SENTENCE, tolerance=1e-4)
    from bertviz_app.attribution import SEGMENT_STEPS

    assert loose.n_steps <= 2 * SEGMENT_STEPS
    assert tight.n_steps >= loose.n_steps
    assert tight.relative_delta <= 1e-4 or abs(tight.delta) <= 1e-6


def test_fixed_steps_without_tolerance(tiny):
    assert bv.attribute(tiny, SENTENCE, n_steps=13).n_steps == 13


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, "0.1", True])
def test_bad_tolerance_is_refused(tiny, bad):
    with pytest.raises(bv.InputError, match="tolerance"):
        bv.attribute(tiny, SENTENCE, tolerance=bad)


@pytest.mark.parametrize("baseline", ["pad", "mask"])
def test_attribute_equals_captum_layer_integrated_gradients(tiny, baseline):
    """IG on the word vectors is the same integral as Captum's LayerIntegratedGradients on the
    word-embedding layer (what attribute used before), with the same convergence delta."""
    from captum.attr import LayerIntegratedGradients

    from bertviz_app.attribution import _setup

    a = bv.attribute(tiny, SENTENCE, baseline=baseline, n_steps=16)
    s = _setup(tiny, SENTENCE, None, None, baseline, 16, "prob")
    ref, delta = LayerIntegratedGradients(s.forward_ids, s.model.bert.embeddings.word_embeddings).attribute(
        s.ids, baselines=s.base_ids, target=s.target_idx, n_steps=16, additional_forward_args=(s.mask, s.types),
        return_convergence_delta=True,
    )
    np.testing.assert_allclose(a.scores, ref.sum(-1)[0].detach().numpy(), atol=2e-6)
    assert a.delta == pytest.approx(float(delta), abs=2e-6)


def test_predict_sdpa_switch_restores_eager(tiny):
    """predict runs with SDPA but leaves the shared model eager, so attention maps still work."""
    bv.predict(tiny, [SENTENCE, "great fun"])
    assert tiny.model.config._attn_implementation == "eager"
    maps = bv.attention(tiny, SENTENCE)
    np.testing.assert_allclose(maps.weights.sum(-1), 1.0, atol=1e-5)


def test_predict_same_with_sdpa_and_eager(tiny, monkeypatch):
    import bertviz_app.inference as inf

    fast = [p.probs for p in bv.predict(tiny, [SENTENCE, "great fun", "awful"])]
    monkeypatch.setattr(inf, "PREDICT_ATTENTION", "eager")
    monkeypatch.setattr(inf, "SORT_BY_LENGTH", False)
    slow = [p.probs for p in bv.predict(tiny, [SENTENCE, "great fun", "awful"])]
    np.testing.assert_allclose(fast, slow, atol=1e-5)


TEXTS = ["good", "the film is not good, it was a tedious slog", "a fine, warm and very funny film", SENTENCE + " indeed"]


@pytest.mark.parametrize("tolerance", [None, 0.05])
def test_attribute_many_equals_one_call_per_text(tiny, tolerance):
    """Texts explained together (padded to one length, one Captum call per round) give what one
    call per text gives, in input order, including a sentence pair among single texts."""
    pairs = [None, None, "it was fun", None]
    many = bv.attribute_many(tiny, TEXTS, pairs=pairs, n_steps=12, tolerance=tolerance)
    assert [a.info.text for a in many] == TEXTS
    for a, text, pair in zip(many, TEXTS, pairs):
        one = bv.attribute(tiny, text, pair=pair, n_steps=12, tolerance=tolerance)
        assert a.tokens == one.tokens and a.target == one.target and a.n_steps == one.n_steps
        np.testing.assert_allclose(a.scores, one.scores, atol=1e-5)
        assert a.delta == pytest.approx(one.delta, abs=1e-5)
        assert float(a.scores.sum()) - a.delta == pytest.approx(a.f_x - a.f_baseline, abs=1e-5)
    assert many[2].info.pair == "it was fun" and 1 in many[2].info.sequence_ids


def test_adaptive_segments_converge_to_the_path_integral(tiny):
    """The segmented rule is the same integral: at a tight tolerance its per-token scores match a
    256-step single rule (not just their sum)."""
    tight = bv.attribute(tiny, SENTENCE, tolerance=1e-4)
    ref = bv.attribute(tiny, SENTENCE, n_steps=256)
    np.testing.assert_allclose(tight.scores, ref.scores, atol=2e-3 * np.abs(ref.scores).max())


def test_attribute_many_target_and_bad_input(tiny):
    neg = bv.attribute_many(tiny, TEXTS[:2], target="negative", n_steps=8)
    assert [a.target for a in neg] == ["negative", "negative"]
    with pytest.raises(bv.InputError, match="No text"):
        bv.attribute_many(tiny, [])
    with pytest.raises(bv.InputError, match="2 texts but 1 second"):
        bv.attribute_many(tiny, TEXTS[:2], pairs=["x"])
    with pytest.raises(bv.InputError, match="Text 2 is empty"):
        bv.attribute_many(tiny, ["fine", "  "])


def test_cls_only_last_layer_changes_nothing_but_the_cost(tiny, monkeypatch):
    """The [CLS]-only last layer gives the same logits (padded batches, both attention kernels)
    and the same attributions, and puts the full layer back afterwards."""
    import torch

    import bertviz_app.registry as reg

    model = tiny.model
    enc = tiny.tokenizer(TEXTS, padding=True, return_tensors="pt")
    for impl in ("eager", "sdpa"):
        with torch.no_grad(), reg.attention_implementation(model, impl):
            full = model(**enc).logits
            with reg.cls_only_last_layer(model):
                assert isinstance(model.bert.encoder.layer[-1], reg._ClsOnlyLayer)
                fast = model(**enc).logits
        torch.testing.assert_close(fast, full, atol=1e-5, rtol=1e-5)
    assert not isinstance(model.bert.encoder.layer[-1], reg._ClsOnlyLayer)
    with_it = bv.attribute(tiny, SENTENCE, n_steps=10)
    monkeypatch.setattr(reg, "CLS_ONLY_LAST_LAYER", False)
    without = bv.attribute(tiny, SENTENCE, n_steps=10)
    np.testing.assert_allclose(with_it.scores, without.scores, atol=1e-6)


def test_cpu_int8_predictions_are_opt_in_and_close(tiny, monkeypatch):
    """BERTVIZ_CPU_INT8=1 predicts with int8 dynamically quantised Linear layers (a copy; the
    float32 model that attention and attributions use is untouched); probabilities stay close."""
    import torch

    fp32 = bv.predict(tiny, TEXTS)
    assert tiny.predict_model() is tiny.model
    monkeypatch.setenv("BERTVIZ_CPU_INT8", "1")
    q = tiny.predict_model()
    assert q is not tiny.model and q is tiny.predict_model()  # made once
    assert any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in q.modules())
    assert not any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in tiny.model.modules())
    int8 = bv.predict(tiny, TEXTS)
    for a, b in zip(fp32, int8):
        np.testing.assert_allclose(a.probs, b.probs, atol=0.05)
        assert sum(b.probs) == pytest.approx(1.0, abs=1e-5)
    assert "int8" in tiny.device_label


def test_repeated_explanations_come_from_the_cache(tiny, monkeypatch):
    """attribute/cls_path with the same arguments are computed once (LRU per model); other
    arguments compute; cached arrays are read-only; bad arguments still get their message."""
    import bertviz_app.attribution as attr
    import bertviz_app.registry as reg

    monkeypatch.setattr(reg, "MEMO_SIZE", 2)
    tiny._memo.clear()
    calls = []
    real = attr.attribute_many
    monkeypatch.setattr(attr, "attribute_many", lambda *a, **k: calls.append(k) or real(*a, **k))
    first = bv.attribute(tiny, SENTENCE, n_steps=8)
    assert bv.attribute(tiny, SENTENCE, n_steps=8) is first and len(calls) == 1
    with pytest.raises(ValueError):
        first.scores[0] = 1.0  # shared, so read-only
    other = bv.attribute(tiny, SENTENCE, n_steps=8, baseline="mask")
    assert other is not first and len(calls) == 2
    bv.attribute(tiny, SENTENCE, n_steps=9)  # a third key evicts the oldest (size 2)
    assert bv.attribute(tiny, SENTENCE, n_steps=8) is not first and len(calls) == 4
    path = bv.cls_path(tiny, SENTENCE, n_steps=4)
    assert bv.cls_path(tiny, SENTENCE, n_steps=4) is path
    with pytest.raises(bv.InputError, match="must be a string"):
        bv.attribute(tiny, ["a list"], n_steps=8)
    tiny._memo.clear()
