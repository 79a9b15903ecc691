"""Every supported encoder family, each as a tiny random classifier built from its config in a
fixture (no downloads; a tiny tokenizer of the family's own class), saved with
save_pretrained(safe_serialization=True) and opened through the app's real ``load_model``.
The same invariants for each: probabilities and attention rows sum to 1, the composed forward
equals the model's own logits, Integrated Gradients completeness, the [CLS] path rows, the lens's
last layer equals the model's output, and the summary's rows add up to the total."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bertviz_app as bv
from bertviz_app import ModelLoadError
from bertviz_app.models.heads import SEQUENCE_CLASSIFICATION

from conftest import FAMILIES, LABELS, build_family_model, check_against_reference, reference_ends  # noqa: F401 (others import it from here)

SENTENCE = "a gorgeous, moving film!"
TEXTS = ["the film was awful", SENTENCE, "it is not good, it is bad, it is awful, awful, awful", "fun"]
def attention_maps_work(model) -> bool:
    """Does the shared model still give attention maps (it runs eager; SDPA silently gives none)?"""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([[1, 2, 3]]), output_attentions=True)
    return len(out.attentions or ()) == model.config.num_hidden_layers and all(a is not None for a in out.attentions)


@pytest.fixture(scope="module", params=FAMILIES)
def fam_lm(request, signal_model_dir):
    """The family's tiny classifier trained on the toy sentiment task (conftest.make_signal_model):
    answers from 0.01 to 0.99 and attributions of order 0.1, so the numeric checks below can fail."""
    return bv.load_model(str(signal_model_dir(request.param)), device="cpu")


IG_TEXT = "the film was awful"  # f(x) - f(baseline) is 0.2-0.6 on every family from every baseline


def test_every_family_is_supported():
    from bertviz_app.models.registry import SUPPORTED_MODEL_TYPES

    assert set(FAMILIES) <= set(SUPPORTED_MODEL_TYPES)


def test_loads_as_its_own_classifier(fam_lm):
    from bertviz_app.models.families import family_of

    fam = family_of(fam_lm.model)
    assert type(fam_lm.model).__name__ == SEQUENCE_CLASSIFICATION.class_name(fam)
    assert fam_lm.warnings == () and fam_lm.labels == tuple(LABELS)


def test_predict_probabilities_sum_to_one(fam_lm):
    preds = bv.predict(fam_lm, TEXTS, batch_size=3)
    assert [p.text for p in preds] == TEXTS
    for p in preds:
        assert sum(p.probs) == pytest.approx(1.0, abs=1e-6)
    pair = bv.predict(fam_lm, ["the film"], pairs=["was good"])[0]
    assert sum(pair.probs) == pytest.approx(1.0, abs=1e-6)


def test_long_text_is_truncated_to_what_the_positions_allow(fam_lm, monkeypatch):
    """Even with a tokenizer that sets no limit: RoBERTa-style positions start after the pad id, so
    66 position embeddings hold 64 tokens there."""
    monkeypatch.setattr(fam_lm.tokenizer, "model_max_length", int(1e30))
    assert fam_lm.max_length == 64
    p = bv.predict(fam_lm, " ".join(["good film"] * 100))[0]
    assert p.truncated and p.n_tokens == 64 and sum(p.probs) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("pair", [False, True])
def test_composed_forward_equals_the_models_logits(fam_lm, pair):
    """classifier_logits (both kernels, [CLS]-only last layer or not; from ids and from word vectors)
    equals the model's own forward on a padded batch, and leaves the shared config as it was."""
    from bertviz_app.models.families import family_of
    from bertviz_app.models.forward import classifier_logits

    model, fam = fam_lm.model, family_of(fam_lm.model)
    before = model.config.to_dict()
    enc = fam_lm.tokenizer(TEXTS, ["it was fun"] * len(TEXTS) if pair else None, padding=True, return_tensors="pt")
    assert (enc["attention_mask"] == 0).any()  # padding is exercised
    kw = fam.inputs(**enc)
    with torch.no_grad():
        ref = model(**kw).logits  # (B, C)
        embeds = fam.word_embeddings(model)(enc["input_ids"])  # (B, T, E)
        for attention in ("eager", "sdpa"):
            for cls_only in (True, False):
                got = classifier_logits(model, **enc, attention=attention, cls_only=cls_only)
                torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
                got = classifier_logits(model, inputs_embeds=embeds, attention_mask=enc["attention_mask"],
                                        token_type_ids=enc.get("token_type_ids"), attention=attention,
                                        cls_only=cls_only)
                torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    assert model.config.to_dict() == before and attention_maps_work(model)


def test_attention_rows_sum_to_one(fam_lm):
    maps = bv.attention(fam_lm, SENTENCE)
    t = len(maps.tokens)
    assert maps.weights.shape == (2, 2, t, t)
    np.testing.assert_allclose(maps.weights.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("pair", [None, "it was fun"])
def test_attention_and_rollout_rows_sum_to_one(fam_lm, pair):
    """Every head's attention row is a distribution over the tokens, with a second text too, and so is
    every row of attention rollout (products of row-stochastic matrices)."""
    maps = bv.attention(fam_lm, SENTENCE, pair)
    np.testing.assert_allclose(maps.weights.sum(-1), 1.0, atol=1e-5)
    assert (maps.weights >= 0).all()
    flow = bv.rollout(maps)  # (L, T, T)
    np.testing.assert_allclose(flow.sum(-1), 1.0, atol=1e-4)


@pytest.mark.parametrize("output", ["prob", "logit"])
def test_integrated_gradients_completeness_on_the_engine(fam_lm, output):
    """The engine's Integrated Gradients (fixed and adaptive steps, both outputs, with a second
    text) against the independent reference (``conftest.check_against_reference``), and f(x) is what predict
    reports for the text."""
    from bertviz_app.interpret.ig_engine import AttributionEngine

    baseline = bv.recommended_baseline(fam_lm)  # DeBERTa-v2's [PAD] path jumps: test_a_baseline_whose_path...
    for pair in (None, "it was fun"):
        engine = AttributionEngine.for_text(fam_lm, IG_TEXT, pair, baseline=baseline, output=output)
        p = bv.predict(fam_lm, IG_TEXT, pairs=None if pair is None else pair)[0]
        for n_steps, tolerance in ((32, None), (None, 0.05)):
            (a,) = engine.integrated_gradients(n_steps, tolerance)
            check_against_reference(fam_lm, a, IG_TEXT, pair, n_steps, tolerance)
            assert a.target == p.label
            if output == "prob":
                assert a.f_x == pytest.approx(max(p.probs), rel=1e-5)


def test_every_registered_method_explains_every_family(fam_lm):
    """Each method of the registry, looked up by name: one score per token, the record's identity
    delta = f(x) - f(baseline) - sum(scores), the same class explained, and the per-word methods
    scoring the special tokens 0."""
    from bertviz_app.interpret.methods import METHOD_CLASSES

    ref = bv.predict(fam_lm, SENTENCE)[0]
    f_x, f_b = reference_ends(fam_lm, SENTENCE)
    t = int(np.argmax(f_x))
    for name, cls in METHOD_CLASSES.items():
        a = bv.explain(fam_lm, SENTENCE, name, n_steps=16, n_samples=32)
        assert a.method == name and a.scores.shape == (len(a.tokens),) and np.isfinite(a.scores).all()
        assert a.f_x == pytest.approx(f_x[t], rel=1e-5) and a.f_baseline == pytest.approx(f_b[t], rel=1e-5, abs=1e-7)
        gap = f_x[t] - f_b[t]
        if name == "integrated_gradients":  # Captum's convergence delta
            assert a.delta == pytest.approx(float(a.scores.sum()) - gap, abs=1e-5 * abs(gap))
        else:  # the record's identity (methods.Method.record): the opposite sign
            assert a.delta == pytest.approx(gap - float(a.scores.sum()), abs=1e-5 * max(abs(gap), 1e-3))
        assert a.target == ref.label == fam_lm.labels[t] and a.f_x == pytest.approx(max(ref.probs), rel=1e-5)
        if cls.per_word:
            special = np.array([s is None for s in a.info.sequence_ids])
            assert np.all(a.scores[special] == 0)


@pytest.mark.parametrize("baseline", ["pad", "mask", "unk", "zero"])
def test_integrated_gradients_completeness(fam_lm, baseline):
    """Fixed 50 steps from each baseline against the independent reference; where the path jumps
    (DeBERTa-v2 from [PAD] or zero vectors) only f(x), f(baseline) and the delta are compared: no
    50-point rule, the engine's or the reference's, reaches that integral."""
    a = bv.attribute(fam_lm, IG_TEXT, baseline=baseline, n_steps=50)
    assert a.scores.shape == (len(a.tokens),)
    jumps = bv.baseline_jumps(fam_lm, baseline)
    check_against_reference(fam_lm, a, IG_TEXT, n_steps=None if jumps else 50)
    assert a.target == bv.predict(fam_lm, IG_TEXT)[0].label
    assert a.f_x == pytest.approx(max(bv.predict(fam_lm, IG_TEXT)[0].probs), rel=1e-5)
    if baseline == "pad":  # the first/last special tokens are the same in input and baseline: no attribution
        assert a.scores[0] == pytest.approx(0.0, abs=1e-7) and a.scores[-1] == pytest.approx(0.0, abs=1e-7)


def test_pad_and_zero_baselines_differ(fam_lm):
    """The fixture's [PAD] word vector is not zero (as in a real checkpoint), so "pad" and "zero" are two
    questions; on DeBERTa-v2 the [PAD] row is zero and the two are the same (baseline_jumps)."""
    pad = bv.attribute(fam_lm, IG_TEXT, baseline="pad", n_steps=20)
    zero = bv.attribute(fam_lm, IG_TEXT, baseline="zero", n_steps=20)
    if fam_lm.model.config.model_type == "deberta-v2":
        np.testing.assert_allclose(pad.scores, zero.scores, rtol=1e-5, atol=1e-7)
    else:
        assert abs(pad.f_baseline - zero.f_baseline) > 1e-3 and np.abs(pad.scores - zero.scores).max() > 1e-3


def test_speed_options_keep_the_attributions(fam_lm):
    """The IG kernel and the [CLS]-only last layer change attributions by float rounding at most."""
    baseline = bv.recommended_baseline(fam_lm)
    ref = bv.attribute(fam_lm, IG_TEXT, baseline=baseline, n_steps=10, attention="eager", cls_only_last_layer=False)
    got = bv.attribute(fam_lm, IG_TEXT, baseline=baseline, n_steps=10, attention="sdpa", cls_only_last_layer=True)
    gap = abs(ref.f_x - ref.f_baseline)
    assert gap > 0.1 and np.abs(ref.scores).max() > 0.02  # scores that a broken path would visibly change
    np.testing.assert_allclose(got.scores, ref.scores, rtol=0, atol=1e-5 * gap)


def test_batched_attributions_are_complete_and_match_single_ones(fam_lm):
    """A padded batch of texts (different lengths and labels) gives each text its own attributions:
    against the independent reference, and equal to one call per text to 1e-4 of f(x) - f(baseline)."""
    texts = [IG_TEXT, "it is good, it is great", "the movie was tedious"]  # different lengths: padded
    baseline = bv.recommended_baseline(fam_lm)
    many = bv.attribute_many(fam_lm, texts, baseline=baseline, n_steps=20, group=len(texts))
    assert len({a.target for a in many}) == 2
    for text, a in zip(texts, many):
        check_against_reference(fam_lm, a, text, n_steps=20)
        one = bv.attribute(fam_lm, text, baseline=baseline, n_steps=20)
        np.testing.assert_allclose(a.scores, one.scores, rtol=0, atol=1e-4 * abs(one.f_x - one.f_baseline))


@pytest.mark.parametrize("tolerance", [0.05, 0.01])
def test_adaptive_steps_reach_the_tolerance(fam_lm, tolerance):
    """No escape: f(x) - f(baseline) is 0.2-0.6 here, and the scores add up to it within the tolerance
    (measured with separate forward passes) and equal the integral (``conftest.check_against_reference``)."""
    a = bv.attribute(fam_lm, IG_TEXT, baseline=bv.recommended_baseline(fam_lm), tolerance=tolerance)
    assert a.tolerance == tolerance and a.relative_delta <= tolerance
    check_against_reference(fam_lm, a, IG_TEXT, tolerance=tolerance)


def test_cls_path_rows_are_complete_and_end_in_cls(fam_lm):
    path = bv.cls_path(fam_lm, SENTENCE, n_steps=20)
    t = len(path.tokens)
    assert path.layer_names == ("embeddings", "layer 1", "layer 2")
    assert path.scores.shape == (3, t)
    for row, delta in zip(path.scores, path.deltas):
        assert float(row.sum()) - float(delta) == pytest.approx(path.f_x - path.f_baseline, abs=1e-5)
    # After the last layer only the first position reaches the head: every other one has exactly 0.
    np.testing.assert_allclose(path.scores[-1, 1:], 0.0, atol=1e-7)


def test_cls_path_fast_last_layer_changes_nothing(fam_lm):
    full = bv.cls_path(fam_lm, SENTENCE, n_steps=6, cls_only_last_layer=False)
    fast = bv.cls_path(fam_lm, SENTENCE, n_steps=6, cls_only_last_layer=True)
    np.testing.assert_allclose(fast.scores, full.scores, atol=1e-6)


def test_cls_lens_last_layer_is_the_models_output(fam_lm):
    from bertviz_app.models.families import family_of

    lens = bv.cls_lens(fam_lm, SENTENCE)
    assert lens.probs.shape == (3, 2) and lens.layer_names[0] == "embeddings"
    np.testing.assert_allclose(lens.probs.sum(-1), 1.0, atol=1e-6)
    enc = fam_lm.tokenizer(SENTENCE, return_tensors="pt")
    with torch.no_grad():
        logits = fam_lm.model(**family_of(fam_lm.model).inputs(**enc)).logits[0]  # (C,)
    np.testing.assert_allclose(lens.probs[-1], torch.softmax(logits, -1).numpy(), atol=1e-5)


def test_word_merge_maps_every_tokenizers_pieces_back_to_words(fam_lm):
    from bertviz_app.interpret.words import word_groups
    from bertviz_app.models.encoding import encode

    _, info = encode(fam_lm, SENTENCE, "it was fun")
    groups = word_groups(info)
    words = [w for w, g in zip(groups.words, groups.groups) if info.sequence_ids[g[0]] is not None]
    assert words == ["a", "gorgeous,", "moving", "film!", "it", "was", "fun"]


def test_summary_rows_add_up_to_the_total(fam_lm):
    s = bv.summary(fam_lm)
    total = sum(p.numel() for p in fam_lm.model.parameters())
    assert s.total_params == total == sum(n for _, n in s.components)
    assert "other" not in dict(s.components)  # every parameter is named by its family's adapter
    assert s.encoder_params + s.classifier_params == total
    assert s.components[0][0] == "embeddings" and s.num_layers == 2
    assert s.architecture == type(fam_lm.model).__name__


def test_a_baseline_whose_path_starts_with_a_jump_is_named_and_avoided(fam_lm):
    """DeBERTa-v3's depth 0 is LayerNorm(word vector) alone and its [PAD] row stays zero: the path
    from [PAD] (or zero vectors) jumps at its first point. Every other family adds position vectors."""
    deberta = fam_lm.model.config.model_type == "deberta-v2"
    assert bv.baseline_jumps(fam_lm, "pad") is deberta and bv.baseline_jumps(fam_lm, "zero") is deberta
    assert not bv.baseline_jumps(fam_lm, "mask")
    assert bv.recommended_baseline(fam_lm) == ("mask" if deberta else "pad")
    if deberta:  # the jump costs steps: the smooth path reaches the tolerance with far fewer
        jumpy = bv.attribute(fam_lm, SENTENCE, baseline="pad", tolerance=0.05)
        smooth = bv.attribute(fam_lm, SENTENCE, baseline="mask", tolerance=0.05)
        assert smooth.n_steps * 2 < jumpy.n_steps
        from bertviz_app.ui import analysis, attribution_tab

        rec = analysis.analyze_all(fam_lm, SENTENCE, None, None, "pad", 20, auto=True)
        assert rec.baseline_jumps
        from types import SimpleNamespace

        ui = SimpleNamespace(delta="delta", tokens="tokens", bar="bar", path="path", lens="lens")
        assert "Note on the baseline" in attribution_tab.render(ui, rec, merge=True)["delta"]


def test_unsupported_model_type_lists_the_supported_ones(tmp_path):
    from transformers import GPT2Config, GPT2ForSequenceClassification

    d = tmp_path / "gpt2"
    GPT2ForSequenceClassification(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=20)).save_pretrained(d)
    supported = "bert, distilbert, roberta, xlm-roberta, albert, electra, deberta-v2"
    with pytest.raises(ModelLoadError, match=f"'gpt2' model.*{supported}"):
        bv.load_model(str(d), device="cpu")


@pytest.mark.parametrize("mode", ["probe", "full"])
def test_fine_tuning_starts_from_every_family(fam_lm, mode, settings, tmp_path):
    """A run from a base of each family is saved, reopens as that family, and (probe) the saved
    head reproduces the logistic regression's validation accuracy exactly: the weights sit in the
    head's last linear layer on the features the model itself computes."""
    import json
    from dataclasses import replace

    if mode == "full" and fam_lm.model.config.model_type == "bert":
        pytest.skip("BERT's full fine-tuning is covered in depth by test_finetune.py")

    from test_finetune import FAST, write_csv

    from bertviz_app.train.data import build_dataset, read_table
    from bertviz_app.train.finetune import run_finetune

    dataset = build_dataset(read_table(write_csv(tmp_path / "reviews.csv", n=24)), "review", "sentiment")
    config = replace(FAST, epochs=1, batch_size=16, eval_every=100) if mode == "full" else None  # 2 steps
    result = run_finetune(dataset, base=str(fam_lm.path), mode=mode, name=f"{mode}-run", config=config,
                          models_dir=settings.models_dir)
    info = json.loads((result.path / "run.json").read_text())
    lm = bv.load_model(f"runs/{mode}-run", device="cpu", settings=settings)
    assert lm.model.config.model_type == fam_lm.model.config.model_type and lm.labels == tuple(LABELS)
    wrong = len({r["row"] for r in result.misclassified})
    assert result.metrics["accuracy"] == pytest.approx(1 - wrong / info["val_rows"])
    lens = bv.cls_lens(lm, SENTENCE)  # the model's own softmax: predict's raw one (a run saves a temperature)
    np.testing.assert_allclose(lens.probs[-1], bv.predict(lm, SENTENCE, calibrated=False)[0].probs, atol=1e-5)
    # issue 35: a temperature is fitted on half the validation rows and judged on the other half; these few
    # rows are too few for that, so none is saved and predict reports the raw softmax
    c = info["metrics"]["calibration"]
    assert c["helps"] is False and "too few" in c["judgement"]
    assert not (result.path / "calibration.json").exists() and lm.temperature == 1.0


def test_fine_tuning_refuses_an_unsupported_base(tmp_path):
    from transformers import GPT2Config, GPT2ForSequenceClassification

    d = tmp_path / "gpt2"
    GPT2ForSequenceClassification(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=20)).save_pretrained(d)
    with pytest.raises(bv.InputError, match="Fine-tuning starts from an encoder of the BERT family.*'gpt2'"):
        bv.base_model_path(str(d))


@pytest.mark.parametrize("family, config, total, head", [
    ("distilbert", dict(), 66_955_010, 592_130),  # distilbert-base-uncased
    # roberta-base
    ("roberta", dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1), 124_647_170, 592_130),
    ("xlm-roberta", dict(vocab_size=250002, max_position_embeddings=514, type_vocab_size=1), 278_045_186, 592_130),
])
def test_summary_reproduces_published_base_counts(family, config, total, head):
    """Counted on the meta device (nothing allocated): the published sizes of the base models with a
    2-class head."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    with torch.device("meta"):
        model = AutoModelForSequenceClassification.from_config(AutoConfig.for_model(family, **config))
    s = bv.summary(model, name=family)
    assert s.total_params == total == sum(n for _, n in s.components)
    assert s.classifier_params == head and s.encoder_params == total - head


@pytest.mark.parametrize("method", ["integrated_gradients", "alti"])
def test_a_long_document_is_explained_whole_on_every_family(fam_lm, method):
    """Past the 64 tokens these models read: predict's windows, each explained from its own ids, merged
    into one score per document token; each window's IG adds up to its own change."""
    text = " ".join(TEXTS * 8)  # ~190 tokens: several windows of 64
    d = bv.explain_windows(fam_lm, text, method, stride=16, n_steps=32)
    doc = bv.document_windows(fam_lm, text, stride=16)
    assert len(d.windows) == len(doc) >= 3 and len(d.attribution.tokens) == len(doc.info)
    assert np.isfinite(d.attribution.scores).all()
    assert text[slice(*d.attribution.info.offsets[-2])].strip() == "fun"  # the last word is covered, where it is
    if method == "integrated_gradients":
        for w in d.windows:
            a = w.attribution
            assert abs(a.scores.sum() - (a.f_x - a.f_baseline)) <= abs(a.delta) + 1e-5
    at = bv.attention_windows(fam_lm, text, window=len(doc) - 1, stride=16, measure="norm")
    assert at.cls_row.shape == (fam_lm.model.config.num_hidden_layers, len(doc.info))


@pytest.mark.parametrize("multiple", [1, 16])
@pytest.mark.parametrize("pair", [False, True])
@pytest.mark.parametrize("side", [None, "right", "left"])
def test_pad_rows_is_the_tokenizers_own_padding(fam_lm, pair, side, multiple):
    """``pad_rows`` (the predict path's padding) gives exactly ``tokenizer.pad``'s tensors for every family's
    tokenizer (its pad id, pad token type id and side), rows of different lengths, an empty pair or not, padded
    to the longest row or to a multiple of tokens (``pad_to_multiple_of``, as batches are on a GPU)."""
    from bertviz_app.models.encoding import pad_rows

    tok = fam_lm.tokenizer
    texts = ["a", "the film was joy and fun", "bad", "a slog " * 9, "good"]
    pairs = ["yes", "no it was not", "fun", "x", "the film was a slog"] if pair else None
    enc = tok(texts, pairs, truncation=True, max_length=48, return_special_tokens_mask=True)
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask", "special_tokens_mask") if k in enc]
    rows = [3, 0, 4, 1]
    ref = tok.pad({k: [enc[k][i] for i in rows] for k in keys}, padding=True, return_tensors="pt",
                  pad_to_multiple_of=multiple, **({} if side is None else {"padding_side": side}))
    got = pad_rows(tok, enc, rows, keys, side, multiple_of=multiple)
    assert set(got) == set(ref)
    lengths = {len(enc["input_ids"][i]) for i in rows}
    width = -(-max(lengths) // multiple) * multiple
    assert len(lengths) > 1 and ref["input_ids"].shape == (len(rows), width)  # padding did happen
    assert (width > max(lengths)) is (multiple == 16)  # rounded up: the longest row is not a multiple of 16
    for cap in (max(lengths) + 1, max(lengths) - 1):  # the model's positions: rounding stops there, never cuts
        capped = pad_rows(tok, enc, rows, keys, side, multiple_of=64, max_width=cap)
        want = tok.pad({k: [enc[k][i] for i in rows] for k in keys}, padding="max_length", return_tensors="pt",
                       max_length=max(cap, max(lengths)), **({} if side is None else {"padding_side": side}))
        assert all(torch.equal(capped[k], want[k]) for k in want), cap
    for k in ref:
        assert got[k].dtype == ref[k].dtype and torch.equal(got[k], ref[k]), k
