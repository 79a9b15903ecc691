"""The opt-in speed options of the core (bench/ measures them; tests never assert timings)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_families import attention_maps_work

import bertviz_app as bv

from conftest import assert_scores_match, check_against_reference

SENTENCE = "the film is not good, it was a tedious slog"


@pytest.mark.parametrize("tolerance", [0.05, 0.005])
@pytest.mark.parametrize("baseline", ["pad", "zero"])
def test_adaptive_steps_meet_the_tolerance(signal, tolerance, baseline):
    """On the trained fixture (f(x) - f(baseline) about 0.4): the scores add up to f(x) - f(baseline),
    from separate forward passes, within the tolerance, and equal the integral (conftest)."""
    a = bv.attribute(signal, SENTENCE, baseline=baseline, tolerance=tolerance)
    assert a.relative_delta <= tolerance
    assert 2 <= a.n_steps <= signal.settings.max_n_steps
    check_against_reference(signal, a, SENTENCE, tolerance=tolerance)


def test_adaptive_steps_start_small_and_grow(signal):
    """No escape: a tolerance of 1e-4 is reached (against separate forward passes) with more steps than
    the first round's, which a loose tolerance stops at."""
    loose = bv.attribute(signal, SENTENCE, tolerance=0.5)
    tight = bv.attribute(signal, SENTENCE, tolerance=1e-4)
    from bertviz_app.interpret.ig_engine import FIRST_STEPS

    assert loose.n_steps <= FIRST_STEPS
    assert tight.n_steps > loose.n_steps
    assert tight.relative_delta <= 1e-4
    check_against_reference(signal, tight, SENTENCE, tolerance=1e-4)


def test_fixed_steps_without_tolerance(tiny):
    assert bv.attribute(tiny, SENTENCE, n_steps=13).n_steps == 13


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, "0.1", True])
def test_bad_tolerance_is_refused(tiny, bad):
    with pytest.raises(bv.InputError, match="tolerance"):
        bv.attribute(tiny, SENTENCE, tolerance=bad)


@pytest.mark.parametrize("baseline", ["pad", "mask"])
def test_attribute_equals_captum_layer_integrated_gradients(signal, baseline):
    """IG on the word vectors is the same integral as Captum's LayerIntegratedGradients on the
    word-embedding layer (what attribute used before), with the same convergence delta."""
    from captum.attr import LayerIntegratedGradients

    from bertviz_app.interpret.ig_engine import AttributionEngine

    a = bv.attribute(signal, SENTENCE, baseline=baseline, n_steps=16)
    s = AttributionEngine.for_text(signal, SENTENCE, baseline=baseline)
    ref, delta = LayerIntegratedGradients(s.forward_ids, s.model.bert.embeddings.word_embeddings).attribute(
        s.ids, baselines=s.base_ids, target=s.targets[0], n_steps=16, additional_forward_args=(s.mask, s.types),
        return_convergence_delta=True,
    )
    gap = abs(a.f_x - a.f_baseline)  # about 0.4 on the trained fixture: halved or zeroed scores are far off
    assert_scores_match(a.scores, ref.sum(-1)[0].detach().numpy(), gap, rtol=1e-4)
    assert a.delta == pytest.approx(float(delta), abs=1e-4 * gap)


def test_predict_sdpa_switch_restores_eager(tiny):
    """predict runs with SDPA but leaves the shared model eager, so attention maps still work."""
    bv.predict(tiny, [SENTENCE, "great fun"])
    assert attention_maps_work(tiny.model)
    maps = bv.attention(tiny, SENTENCE)
    np.testing.assert_allclose(maps.weights.sum(-1), 1.0, atol=1e-5)


def test_predict_same_with_every_speed_option(tiny):
    texts = [SENTENCE, "great fun", "awful"]
    ref = [p.probs for p in bv.predict(tiny, texts, attention="eager", sort_by_length=False, cls_only_last_layer=False)]
    for attention in ("auto", "eager", "sdpa"):
        for sort in (True, False):
            for cls_only in (True, False):
                got = bv.predict(tiny, texts, attention=attention, sort_by_length=sort, cls_only_last_layer=cls_only)
                assert [p.text for p in got] == texts
                np.testing.assert_allclose([p.probs for p in got], ref, atol=1e-6)
    with pytest.raises(bv.InputError, match="attention must be one of auto, eager, sdpa"):
        bv.predict(tiny, texts, attention="flash")
    with pytest.raises(bv.InputError, match="attention must be one of eager, sdpa"):
        bv.attribute(tiny, SENTENCE, attention="auto")


def test_speed_options_default_to_the_settings(tiny, monkeypatch):
    """Without arguments a call uses its model's settings (``lm.settings``, given to load_model or
    ``with_settings``); a call's own arguments beat them; a bad value says what to use."""
    import bertviz_app.interpret.ig_engine as engine
    import bertviz_app.models.inference as inf
    from bertviz_app.config import Settings

    seen = []
    real = inf.classifier_logits
    spy = lambda *a, **k: seen.append((k["attention"], k["cls_only"])) or real(*a, **k)  # noqa: E731
    monkeypatch.setattr(inf, "classifier_logits", spy)
    monkeypatch.setattr(engine, "classifier_logits", spy)
    bv.predict(tiny, "great fun")
    assert set(seen) == {("eager", True)}  # auto: eager below SDPA_MIN_TOKENS
    seen.clear()
    other = tiny.with_settings(predict_attention="sdpa", cls_only_last_layer=False)
    bv.predict(other, "great fun")
    assert set(seen) == {("sdpa", False)}
    seen.clear()
    bv.attribute(other.with_settings(ig_attention="eager"), SENTENCE, n_steps=4)
    assert set(seen) == {("eager", False)}
    seen.clear()
    bv.attribute(tiny, SENTENCE, n_steps=4)  # the original handle keeps its own settings
    assert set(seen) == {("sdpa", True)}
    seen.clear()
    bv.predict(other, "great fun", attention="eager", cls_only_last_layer=True)  # arguments beat settings
    assert set(seen) == {("eager", True)}
    with pytest.raises(ValueError, match="BERTVIZ_PREDICT_ATTENTION must be auto, eager or sdpa"):
        tiny.with_settings(predict_attention="flash")
    with pytest.raises(ValueError, match="BERTVIZ_SORT_BY_LENGTH must be 1 or 0"):
        Settings.from_env({"BERTVIZ_SORT_BY_LENGTH": "maybe"})
    assert Settings.from_env({"BERTVIZ_SORT_BY_LENGTH": ""}).sort_by_length is True  # empty: the default
    assert Settings.from_env({"BERTVIZ_SORT_BY_LENGTH": " Off "}).sort_by_length is False
    with pytest.raises(ValueError, match="BERTVIZ_MEMO_SIZE must be 0"):
        Settings.from_env({"BERTVIZ_MEMO_SIZE": "-1"})


def test_per_call_options_do_not_leak_to_other_callers(tiny, monkeypatch):
    """One caller's options hold for its own call only: callers in other threads, running at the
    same time and afterwards, get the settings' options, and the shared model is never changed
    (its config stays eager and its layers stay the model's own, as an attention map needs)."""
    import threading

    import torch

    import bertviz_app.models.inference as inf

    model = tiny.model
    layers = list(model.bert.encoder.layer)
    seen: dict[str, set] = {}
    real = inf.classifier_logits

    def spy(m, *a, **k):
        # what every forward pass sees: the caller's options, and the shared model as loaded
        assert attention_maps_work(m)
        assert list(m.bert.encoder.layer) == layers and all(type(x).__name__ == "BertLayer" for x in layers)
        seen.setdefault(threading.current_thread().name, set()).add((k["attention"], k["cls_only"]))
        return real(m, *a, **k)

    monkeypatch.setattr(inf, "classifier_logits", spy)
    texts = [SENTENCE, "great fun", "awful", "good"]
    ref = [p.probs for p in bv.predict(tiny, texts)]
    out: dict[str, list] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def caller(name, **options):
        try:
            start.wait()
            for _ in range(10):
                out.setdefault(name, []).append([p.probs for p in bv.predict(tiny, texts, batch_size=2, **options)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    options = dict(attention="sdpa", cls_only_last_layer=False, sort_by_length=False)
    threads = [threading.Thread(target=caller, name="options", args=("options",), kwargs=options),
               threading.Thread(target=caller, name="defaults", args=("defaults",))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert seen["options"] == {("sdpa", False)}
    assert seen["defaults"] == {("eager", True)}
    for name in ("options", "defaults"):
        for probs in out[name]:
            np.testing.assert_allclose(probs, ref, atol=1e-6)
    seen.clear()
    bv.predict(tiny, texts)  # afterwards, in this thread: the settings again
    assert seen[threading.current_thread().name] == {("eager", True)}
    with torch.no_grad():
        maps = bv.attention(tiny, SENTENCE)
    np.testing.assert_allclose(maps.weights.sum(-1), 1.0, atol=1e-5)


TEXTS = ["good", "the film is not good, it was a tedious slog", "a fine, warm and very funny film",
         SENTENCE + " indeed"]


@pytest.mark.parametrize("tolerance", [None, 0.05])
def test_attribute_many_equals_one_call_per_text(signal, tolerance):
    """Texts explained together (padded to one length, one batched pass per round) give what one
    call per text gives, in input order, including a sentence pair among single texts; each against the
    independent reference (texts of both labels, so rows swapped in the batch are far off)."""
    pairs = [None, None, "it was fun", None]
    many = bv.attribute_many(signal, TEXTS, pairs=pairs, n_steps=12, tolerance=tolerance, group=len(TEXTS))
    assert [a.info.text for a in many] == TEXTS
    assert {a.target for a in many} == {"negative", "positive"}
    for a, text, pair in zip(many, TEXTS, pairs):
        one = bv.attribute(signal, text, pair=pair, n_steps=12, tolerance=tolerance)
        assert a.tokens == one.tokens and a.target == one.target and a.n_steps == one.n_steps
        gap = check_against_reference(signal, a, text, pair, n_steps=12 if tolerance is None else None,
                                       tolerance=tolerance)
        np.testing.assert_allclose(a.scores, one.scores, rtol=0, atol=1e-4 * abs(gap))
        assert a.delta == pytest.approx(one.delta, abs=1e-4 * abs(gap))
    assert many[2].info.pair == "it was fun" and 1 in many[2].info.sequence_ids


def test_adaptive_segments_converge_to_the_path_integral(signal):
    """The segmented rule is the same integral: at a tight tolerance its per-token scores match a
    256-step single rule (not just their sum)."""
    tight = bv.attribute(signal, SENTENCE, tolerance=1e-4)
    ref = bv.attribute(signal, SENTENCE, n_steps=256)
    assert np.abs(ref.scores).max() > 0.05
    np.testing.assert_allclose(tight.scores, ref.scores, atol=2e-3 * np.abs(ref.scores).max())


def test_texts_share_their_passes_on_an_accelerator_and_go_one_by_one_on_the_cpu(signal, monkeypatch):
    """group_size: one text at a time on the CPU (a group was slower there: bench/ig_groups.py), GROUP_TEXTS on
    an accelerator; the groups attribute_many forms follow it, or the group asked for."""
    from bertviz_app.interpret import attribution as attr

    assert attr.group_size(signal) == 1
    assert attr.group_size(SimpleNamespace(device=torch.device("cuda"))) == attr.GROUP_TEXTS == 8
    sizes = []
    real = attr.AttributionEngine.__init__

    def spy(self, lm, items, *a, **k):
        sizes.append(len(items))
        real(self, lm, items, *a, **k)

    monkeypatch.setattr(attr.AttributionEngine, "__init__", spy)
    bv.attribute_many(signal, TEXTS, n_steps=4)
    assert sizes == [1, 1, 1, 1]
    sizes.clear()
    bv.attribute_many(signal, TEXTS, n_steps=4, group=3)
    assert sorted(sizes) == [1, 3]
    for bad in (0, -1, 1.5, True, "8"):
        with pytest.raises(bv.InputError, match="group must be a whole number"):
            bv.attribute_many(signal, TEXTS, n_steps=4, group=bad)


def test_attribute_many_target_and_bad_input(tiny):
    neg = bv.attribute_many(tiny, TEXTS[:2], target="negative", n_steps=8)
    assert [a.target for a in neg] == ["negative", "negative"]
    with pytest.raises(bv.InputError, match="No text"):
        bv.attribute_many(tiny, [])
    with pytest.raises(bv.InputError, match="2 texts but 1 second"):
        bv.attribute_many(tiny, TEXTS[:2], pairs=["x"])
    with pytest.raises(bv.InputError, match="Text 2 is empty"):
        bv.attribute_many(tiny, ["fine", "  "])


@pytest.mark.parametrize("pair", [False, True])
def test_forward_wrapper_gives_the_models_logits(tiny, pair):
    """forward.classifier_logits (both kernels, [CLS]-only last layer or not) equals model(**inputs)
    on a padded batch, from ids and from word vectors, and changes nothing of the shared model."""
    import copy

    import torch

    from bertviz_app.models.forward import classifier_logits

    model = tiny.model
    config_before = copy.deepcopy(model.config.to_dict())
    layers = list(model.bert.encoder.layer)
    enc = tiny.tokenizer(TEXTS, ["it was fun"] * len(TEXTS) if pair else None, padding=True, return_tensors="pt")
    assert (enc["attention_mask"] == 0).any()  # padding is exercised
    with torch.no_grad():
        ref = model(**enc).logits  # (B, C)
        embeds = model.bert.embeddings.word_embeddings(enc["input_ids"])  # (B, T, D)
        for attention in ("eager", "sdpa"):
            for cls_only in (True, False):
                got = classifier_logits(model, **enc, attention=attention, cls_only=cls_only)
                torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)
                got = classifier_logits(model, inputs_embeds=embeds, attention_mask=enc["attention_mask"],
                                        token_type_ids=enc["token_type_ids"], attention=attention, cls_only=cls_only)
                torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)
    assert model.config.to_dict() == config_before and attention_maps_work(model)
    assert list(model.bert.encoder.layer) == layers
    with pytest.raises(ValueError, match="attention must be one of eager, sdpa"):
        classifier_logits(model, **enc, attention="flash")


def test_cls_only_last_layer_keeps_the_attributions(signal):
    """The [CLS]-only last layer and the IG kernel change the attributions by float rounding at most
    (on the trained fixture: scores of order 0.1, compared to 1e-5 of f(x) - f(baseline))."""
    ref = bv.attribute(signal, SENTENCE, n_steps=10, attention="eager", cls_only_last_layer=False)
    gap = abs(ref.f_x - ref.f_baseline)
    assert gap > 0.1
    for attention in ("eager", "sdpa"):
        got = bv.attribute(signal, SENTENCE, n_steps=10, attention=attention, cls_only_last_layer=True)
        np.testing.assert_allclose(got.scores, ref.scores, rtol=0, atol=1e-5 * gap)
    full = bv.cls_path(signal, SENTENCE, n_steps=6, cls_only_last_layer=False)
    fast = bv.cls_path(signal, SENTENCE, n_steps=6, cls_only_last_layer=True)
    np.testing.assert_allclose(fast.scores, full.scores, rtol=0, atol=1e-5 * gap)


def test_cpu_int8_predictions_are_opt_in_and_close(tiny, monkeypatch):
    """Settings' cpu_int8 (BERTVIZ_CPU_INT8=1) predicts with int8 dynamically quantised Linear layers (a copy; the
    float32 model that attention and attributions use is untouched); probabilities stay close."""
    import torch

    fp32 = bv.predict(tiny, TEXTS)
    assert tiny.predict_model() is tiny.model
    quant = tiny.with_settings(cpu_int8=True)
    q = quant.predict_model()
    assert q is not tiny.model and q is quant.predict_model()  # made once
    assert tiny.predict_model() is tiny.model  # the original handle is unchanged
    assert any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in q.modules())
    assert not any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in tiny.model.modules())
    int8 = bv.predict(quant, TEXTS)
    for a, b in zip(fp32, int8):
        np.testing.assert_allclose(a.probs, b.probs, atol=0.05)
        assert sum(b.probs) == pytest.approx(1.0, abs=1e-5)
    assert "int8" in quant.device_label and "int8" not in tiny.device_label


def test_repeated_explanations_come_from_the_cache(tiny, monkeypatch):
    """attribute/cls_path with the same arguments are computed once (LRU per model); other
    arguments compute; cached arrays are read-only; bad arguments still get their message."""
    import bertviz_app.interpret.attribution as attr

    tiny = tiny.with_settings(memo_size=2)  # the same weights with an empty cache of 2
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
