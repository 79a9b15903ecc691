"""Core analyses on a tiny BERT: invariants (probabilities and attention rows sum to 1,
completeness of Integrated Gradients), golden values, and the messages bad input gets."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import bertviz_app as bv
from bertviz_app import InputError

SENTENCE = "a gorgeous, moving film!"


def test_predict_probabilities_sum_to_one_and_keep_order(tiny):
    texts = ["the film was awful", SENTENCE, "it is not good, it is bad", "fun"]
    preds = bv.predict(tiny, texts, batch_size=2)
    assert [p.text for p in preds] == texts
    for p in preds:
        assert p.labels == ("negative", "positive")
        assert sum(p.probs) == pytest.approx(1.0, abs=1e-6)
        assert p.label == p.labels[int(np.argmax(p.probs))]
        assert not p.truncated


def test_batched_and_single_predictions_agree(signal):
    """On the trained fixture (answers from 0.02 to 0.99): a padded batch of texts with different labels
    gives every text its own answer, to float rounding (rows swapped in the batch would be off by 0.9)."""
    texts = ["the film was awful", SENTENCE, "it is not good, it is bad, it is awful, awful, awful", "the film"]
    together = bv.predict(signal, texts, batch_size=4)
    alone = [bv.predict(signal, t)[0] for t in texts]
    assert [p.text for p in together] == texts
    assert {p.label for p in alone} == {"negative", "positive"}  # the labels compared are not all the same
    for a, b in zip(together, alone):
        assert a.label == b.label
        np.testing.assert_allclose(a.probs, b.probs, rtol=1e-4, atol=1e-7)


def test_batches_padded_to_a_multiple_as_on_a_gpu_predict_as_exact_ones(signal, gpu_padding):
    """On a CUDA device batches pad to a multiple of tokens (``inference.pad_multiple``): masked, so every text's
    probabilities are those of exact padding, to float rounding."""
    texts = ["the film was awful", SENTENCE, "it is not good, it is bad, it is awful, awful, awful", "the film"]
    exact_widths = gpu_padding(1)
    exact = bv.predict(signal, texts, batch_size=2)
    padded_widths = gpu_padding(16)
    padded = bv.predict(signal, texts, batch_size=2)
    assert all(w % 16 == 0 or w == signal.max_length for w in padded_widths)  # the positive control: it padded
    assert sum(padded_widths) > sum(exact_widths) and len(padded_widths) == len(exact_widths) == 2
    assert {p.label for p in exact} == {"negative", "positive"}
    for a, b in zip(exact, padded):
        assert a.label == b.label
        np.testing.assert_allclose(b.probs, a.probs, rtol=1e-4, atol=1e-7)


def test_golden_logits_of_the_trained_fixture(signal):
    """The trained fixture (seeded, single-threaded training) pins the whole build + save + load +
    predict path: its logits for several texts, relative tolerance 1e-3 (other CPUs round the 60 training
    steps differently by far less: perturbing the initial weights by 1e-6 moves these by 1e-4), and
    predict's log-odds. The tolerance tells texts apart: "bad" or "x" for SENTENCE, or SENTENCE with one
    word swapped for [UNK], are each outside it."""
    for text, golden in GOLDEN_LOGITS.items():
        enc = signal.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            logits = signal.model(**enc).logits[0].numpy()
        np.testing.assert_allclose(logits, golden, rtol=1e-3, atol=1e-3, err_msg=text)
        p = bv.predict(signal, text)[0].probs
        assert np.log(p[1] / p[0]) == pytest.approx(golden[1] - golden[0], rel=1e-3, abs=1e-3)
    for other in ("bad", "x", "a gorgeous, [UNK] film!", "a [UNK], moving film!"):  # the check can fail
        with torch.no_grad():
            logits = signal.model(**signal.tokenizer(other, return_tensors="pt")).logits[0].numpy()
        assert not np.allclose(logits, GOLDEN_LOGITS[SENTENCE], rtol=1e-3, atol=1e-3), other


# measured once on torch 2.13.0 CPU (conftest.make_signal_model("bert")); a change means the path changed
GOLDEN_LOGITS = {
    SENTENCE: [-1.942087, 2.247725],
    "the film was awful": [2.224141, -1.726517],
    "the film": [0.324130, 0.094321],
    "it is not good, it is bad": [-0.327831, 0.713336],
}


def test_truncation_is_reported(tiny):
    long_text = " ".join(["good film"] * 100)  # 200 word tokens > 64 max length of the tiny model
    p = bv.predict(tiny, long_text)[0]
    assert p.truncated and p.n_tokens == tiny.max_length


@pytest.mark.parametrize("bad", ["", "   \n\t", None])
def test_empty_text_is_refused_with_a_message(tiny, bad):
    with pytest.raises(InputError, match="empty"):
        bv.predict(tiny, [bad])


def test_huge_text_is_refused_with_the_limit(tiny):
    with pytest.raises(InputError, match="limit is 1,000"):
        bv.predict(tiny.with_settings(max_chars=1000), "a" * 1001)


def test_nul_bytes_are_dropped_not_fatal(tiny):
    assert bv.predict(tiny, "good\x00 film")[0].text == "good film"


def test_pairs(tiny):
    p = bv.predict(tiny, ["the film"], pairs=["was good"])[0]
    assert p.pair == "was good" and sum(p.probs) == pytest.approx(1.0)
    with pytest.raises(InputError, match="one pair per text"):
        bv.predict(tiny, ["a", "b"], pairs=["c"])


def test_multi_label_uses_sigmoid(tmp_path):
    from conftest import make_tiny_model

    lm = bv.load_model(str(make_tiny_model(tmp_path / "ml", num_labels=3, multi_label=True)), device="cpu")
    assert lm.multi_label
    p = bv.predict(lm, SENTENCE)[0]
    logits = lm.model(**lm.tokenizer(SENTENCE, return_tensors="pt")).logits[0]
    np.testing.assert_allclose(p.probs, torch.sigmoid(logits).detach().numpy(), atol=1e-5)
    assert all(0 <= x <= 1 for x in p.probs)
    assert set(p.active_labels) <= set(p.labels)


# --- attention ------------------------------------------------------------------------------------


def test_attention_shape_and_rows_sum_to_one(tiny):
    maps = bv.attention(tiny, SENTENCE)
    t = len(maps.tokens)
    assert maps.tokens[0] == "[CLS]" and maps.tokens[-1] == "[SEP]"
    assert maps.weights.shape == (2, 2, t, t)
    np.testing.assert_allclose(maps.weights.sum(-1), 1.0, atol=1e-5)


def test_attention_helpers(tiny):
    maps = bv.attention(tiny, SENTENCE, pair="it was fun")
    w = maps.weights
    np.testing.assert_allclose(bv.mean_heads(maps), w.mean(1), atol=1e-7)
    np.testing.assert_allclose(bv.cls_rows(maps), w[:, :, 0, :].mean(1), atol=1e-7)
    np.testing.assert_allclose(bv.cls_rows(maps, head=1), w[:, 1, 0, :], atol=1e-7)
    roll = bv.rollout(maps)
    assert roll.shape == (2, len(maps.tokens), len(maps.tokens))
    np.testing.assert_allclose(roll.sum(-1), 1.0, atol=1e-5)
    # Layer 1 of rollout is 0.5 A + 0.5 I (already row-stochastic); layer 2 is the product.
    a = 0.5 * w.mean(1) + 0.5 * np.eye(w.shape[-1])
    np.testing.assert_allclose(roll[0], a[0], atol=1e-5)
    np.testing.assert_allclose(roll[1], a[1] @ a[0], atol=1e-5)
    assert maps.info.sequence_ids.count(1) == 3  # "it was fun" in the second segment


# --- attribution ------------------------------------------------------------------------------------


@pytest.mark.parametrize("baseline", ["pad", "mask", "unk", "zero"])
@pytest.mark.parametrize("text", [SENTENCE, "the film was awful"])
def test_integrated_gradients_equal_an_independent_reference(signal, baseline, text):
    """On the trained fixture (f(x) - f(baseline) about 0.45): the engine's 50-step attributions equal
    the reference's (conftest.reference_ig: the same Gauss-Legendre rule through the model's own forward,
    plain autograd) to 1e-4 of f(x) - f(baseline), and the integral itself (a 1024-point Riemann sum)
    to 1e-2 of it; f(x), f(baseline) and the delta equal what separate forward passes give:
    delta = scores.sum() - (f(x) - f(baseline)) (Captum's sign)."""
    from conftest import assert_scores_match, reference_f, reference_ig

    a = bv.attribute(signal, text, baseline=baseline, n_steps=50)
    assert a.scores.shape == (len(a.tokens),)
    f_x, f_b = reference_f(signal, text), reference_f(signal, text, baseline=baseline)
    target = int(np.argmax(f_x))
    assert a.target == bv.predict(signal, text)[0].label == signal.labels[target]
    gap = f_x[target] - f_b[target]
    assert a.f_x == pytest.approx(f_x[target], rel=1e-5) and a.f_baseline == pytest.approx(f_b[target], rel=1e-5)
    assert a.delta == pytest.approx(float(a.scores.sum()) - gap, abs=1e-5 * abs(gap))
    assert a.relative_delta < 0.05
    same_rule, *_ = reference_ig(signal, text, baseline=baseline, target=target, gauss_legendre=50)
    assert_scores_match(a.scores, same_rule, abs(gap), rtol=1e-4)
    integral, *_ = reference_ig(signal, text, baseline=baseline, target=target)
    assert_scores_match(a.scores, integral, abs(gap), rtol=1e-2)
    if baseline != "zero":  # [CLS]/[SEP] are identical in input and baseline: no attribution
        assert a.scores[0] == pytest.approx(0.0, abs=1e-7) and a.scores[-1] == pytest.approx(0.0, abs=1e-7)


def test_pad_and_zero_baselines_give_different_attributions(signal):
    """The fixture's [PAD] word vector is not zero (as in a real checkpoint): the two baselines are two
    different questions, so the tests parametrized over both test two things."""
    pad = bv.attribute(signal, SENTENCE, baseline="pad", n_steps=50)
    zero = bv.attribute(signal, SENTENCE, baseline="zero", n_steps=50)
    assert abs(pad.f_baseline - zero.f_baseline) > 0.01
    assert np.abs(pad.scores - zero.scores).max() > 0.01


def test_attribution_target_by_name_and_logit_output(tiny):
    a = bv.attribute(tiny, SENTENCE, target="NEGATIVE", output="logit", n_steps=20)
    assert a.target == "negative" and a.target_index == 0 and a.output == "logit"
    logits = tiny.model(**tiny.tokenizer(SENTENCE, return_tensors="pt")).logits[0]
    assert a.f_x == pytest.approx(float(logits[0]), abs=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"target": "neutral"}, "Unknown class 'neutral'.*negative, positive"),
        ({"n_steps": 0}, "n_steps must be a whole number from 2"),
        ({"n_steps": 10**9}, "n_steps must be a whole number from 2"),
        ({"n_steps": "50"}, "n_steps must be a whole number"),
        ({"baseline": "noise"}, "Unknown baseline 'noise'"),
    ],
)
def test_attribution_bad_arguments(tiny, kwargs, message):
    with pytest.raises(InputError, match=message):
        bv.attribute(tiny, SENTENCE, **kwargs)


def test_cls_lens_last_layer_matches_prediction(signal):
    for text in (SENTENCE, "the film was awful"):  # answers 0.98 and 0.02: a lens of the wrong text is far off
        lens = bv.cls_lens(signal, text)
        assert lens.probs.shape == (3, 2) and lens.layer_names[0] == "embeddings"
        np.testing.assert_allclose(lens.probs.sum(-1), 1.0, atol=1e-6)
        np.testing.assert_allclose(lens.probs[-1], bv.predict(signal, text)[0].probs, rtol=1e-4)


def test_pooler_is_tanh_of_linear_cls_state(tiny):
    model = tiny.model
    enc = tiny.tokenizer(SENTENCE, return_tensors="pt")
    with torch.no_grad():
        out = model.bert(**enc)
        h_cls = out.last_hidden_state[:, 0]  # (1, D)
        manual = torch.tanh(h_cls @ model.bert.pooler.dense.weight.T + model.bert.pooler.dense.bias)
    torch.testing.assert_close(out.pooler_output, manual, atol=1e-6, rtol=1e-6)


# --- summary and words ----------------------------------------------------------------------------


def test_summary_reproduces_bert_base_counts():
    from transformers import BertConfig, BertForSequenceClassification

    with torch.device("meta"):
        model = BertForSequenceClassification(BertConfig(num_labels=2))
    s = bv.summary(model, name="bert-base")
    assert s.encoder_params == 109_482_240
    assert s.classifier_params == 768 * 2 + 2 == 1_538
    assert s.total_params == 109_482_240 + 1_538
    assert sum(n for _, n in s.components) == s.total_params
    assert len([c for c, _ in s.components if c.endswith("attention")]) == 12


def test_summary_of_loaded_model(tiny):
    s = bv.summary(tiny)
    assert s.labels == ("negative", "positive") and s.device == "cpu" and s.num_layers == 2
    assert s.to_dict()["total_params"] == sum(p.numel() for p in tiny.model.parameters())


def test_word_merge_maps_pieces_emoji_and_unk_back_to_words(tiny):
    text = "joyless film 😀 don't"
    maps = bv.attention(tiny, text)
    groups = bv.word_groups(maps.info)
    assert groups.words == ("[CLS]", "joyless", "film", "😀", "don't", "[SEP]")
    assert "[UNK]" in maps.tokens  # the emoji is out of the tiny vocabulary
    merged = bv.merge_attention(maps.weights, groups)
    assert merged.shape == (2, 2, 6, 6)
    np.testing.assert_allclose(merged.sum(-1), 1.0, atol=1e-5)  # rows still sum to one
    a = bv.attribute(tiny, text, n_steps=10)
    word_scores = bv.merge_scores(a.scores, groups)
    assert word_scores.shape == (6,)
    assert float(word_scores.sum()) == pytest.approx(float(a.scores.sum()), abs=1e-6)
    joy = [i for i, t in enumerate(a.tokens) if t in ("joy", "##less")]
    assert word_scores[1] == pytest.approx(float(a.scores[joy].sum()), abs=1e-6)


def test_core_never_imports_gradio_or_plotly():
    code = "import sys, bertviz_app; bertviz_app.predict; print('gradio' in sys.modules, 'plotly' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_cls_path_equals_captum_layer_integrated_gradients(signal):
    """The fast path (IG from each depth's hidden state) is the same integral Captum's
    LayerIntegratedGradients computes with hooks on the whole model: equal to 1e-4 of f(x) - f(baseline)
    (about 0.45 on the trained fixture; scores of 0.1-0.4, so halved or zeroed rows are far off)."""
    from captum.attr import LayerIntegratedGradients

    from bertviz_app.interpret.ig_engine import AttributionEngine

    from conftest import assert_scores_match

    path = bv.cls_path(signal, SENTENCE, n_steps=16, baseline="mask")
    s = AttributionEngine.for_text(signal, SENTENCE, baseline="mask")
    layers = [s.model.bert.embeddings, *s.model.bert.encoder.layer]
    assert len(path.scores) == len(layers)
    for row, layer in zip(path.scores, layers):
        ref = LayerIntegratedGradients(s.forward_ids, layer).attribute(
            s.ids, baselines=s.base_ids, target=s.targets[0], n_steps=16, additional_forward_args=(s.mask, s.types)
        )
        assert_scores_match(row, ref.sum(-1)[0].detach().numpy(), abs(path.f_x - path.f_baseline), rtol=1e-4)


def test_attribution_retries_smaller_batches_on_out_of_memory(tiny, monkeypatch):
    """An OOM in Integrated Gradients halves the internal batch and retries; only at a batch of
    one does the request fail, with a ResourceError that says what to do."""
    from bertviz_app.interpret.ig_engine import AttributionEngine

    real = AttributionEngine.gradient_pass
    seen = []

    def limited(self, points, batch):
        seen.append(batch)
        if batch > 3:
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")
        return real(self, points, batch)

    monkeypatch.setattr(AttributionEngine, "gradient_pass", limited)
    a = bv.attribute(tiny, SENTENCE, n_steps=24)
    assert seen[:3] == [24, 12, 6] and seen[3] == 3
    assert float(a.scores.sum()) - a.delta == pytest.approx(a.f_x - a.f_baseline, abs=1e-5)

    def always(self, *args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(AttributionEngine, "gradient_pass", always)
    with pytest.raises(bv.ResourceError, match="Out of memory.*shorten the text"):
        bv.attribute(tiny, SENTENCE, n_steps=8)
