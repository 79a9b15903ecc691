"""The seam for heads (issue 31): a model is a family x a head, two small tables (``models/families.py``,
``models/heads.py``). Sequence classification runs through it on every family, and a head the tool does not
have yet plugs into the same forward pass with no branch for it (the token-level head below is a test's own)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

import bertviz_app as bv
from bertviz_app.models import forward, heads
from bertviz_app.models.families import FAMILIES, family_of
from bertviz_app.models.heads import HEADS, SEQUENCE_CLASSIFICATION, Head

from conftest import FAMILIES as FAMILY_TYPES

TEXT = "the film was awful, the acting fine"


@pytest.fixture(scope="module", params=FAMILY_TYPES)
def fam_lm(request, signal_model_dir):
    return bv.load_model(str(signal_model_dir(request.param)), device="cpu")


def test_every_family_x_head_names_a_class_transformers_has():
    """The table's product: each (family, head) names a class that exists, of the family's own module."""
    assert len(FAMILIES) == 7 and SEQUENCE_CLASSIFICATION in HEADS
    for fam in FAMILIES:
        for head in HEADS:
            cls = getattr(transformers, head.class_name(fam))
            assert cls.__name__.endswith(head.suffix) and cls.__name__.startswith(fam.class_prefix)


def test_a_loaded_model_carries_its_head_and_its_class(fam_lm):
    fam = family_of(fam_lm.model)
    assert fam_lm.head is SEQUENCE_CLASSIFICATION and heads.head_of(fam_lm.model) is SEQUENCE_CLASSIFICATION
    assert type(fam_lm.model).__name__ == SEQUENCE_CLASSIFICATION.class_name(fam)
    assert SEQUENCE_CLASSIFICATION.trained([type(fam_lm.model).__name__])
    assert not SEQUENCE_CLASSIFICATION.trained(["BertModel"]) and not SEQUENCE_CLASSIFICATION.trained(None)


def test_sequence_classification_through_the_seam_is_the_models_own_answer(fam_lm):
    """The head's logits through the composed forward equal ``model(...).logits``, and predict's probabilities
    are their softmax (the model's own forward and numpy: an independent reference)."""
    enc = fam_lm.tokenizer(TEXT, return_tensors="pt")
    fam = family_of(fam_lm.model)
    with torch.no_grad():
        own = fam_lm.model(**fam.inputs(**enc)).logits.float().numpy()  # (1, C)
        seam = forward.classifier_logits(fam_lm.model, **enc).float().numpy()  # (1, C)
    np.testing.assert_allclose(seam, own, rtol=1e-4, atol=1e-5 * np.abs(own).max())
    p = bv.predict(fam_lm, TEXT, calibrated=False)[0]
    expected = np.exp(own[0] - own[0].max()) / np.exp(own[0] - own[0].max()).sum()
    np.testing.assert_allclose(p.probs, expected, rtol=1e-4)
    assert 0.02 < expected.max() < 0.999  # the fixture answers away from the ends, so a wrong decode shows


def test_decode_is_softmax_with_temperature_or_a_sigmoid_per_class():
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 3.0, -2.0]])  # (B, C)
    x = logits.numpy()
    for t in (1.0, 2.5):
        e = np.exp(x / t - (x / t).max(axis=1, keepdims=True))
        np.testing.assert_allclose(SEQUENCE_CLASSIFICATION.decode(logits, temperature=t).numpy(),
                                   e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(SEQUENCE_CLASSIFICATION.decode(logits, multi_label=True, temperature=2.5).numpy(),
                               1 / (1 + np.exp(-x)), rtol=1e-6)  # a multi-label model's are not rescaled
    assert not np.allclose(SEQUENCE_CLASSIFICATION.decode(logits, temperature=2.5).numpy(),
                           SEQUENCE_CLASSIFICATION.decode(logits).numpy(), rtol=1e-3)  # the temperature acts


class _EveryToken(Head):
    """A test's token-level head over BERT's classifier layer: one row of logits per position."""

    def logits(self, family, model, hidden):
        return model.classifier(hidden)  # (B, T, C)


EVERY_TOKEN = _EveryToken(name="every token", suffix="ForTokenClassification", reads="every", target="",
                          metric="", training_file="")


def test_a_new_head_plugs_into_the_same_forward_pass_without_a_branch(signal_model_dir, monkeypatch):
    """A head that reads every position gets every position's logits from the composed forward, equal to the
    classifier applied to the model's own last hidden states: the last layer is run in full for it (the
    [CLS]-only shortcut belongs to heads that read the first position). Positive control: the sequence head on
    the same call reads position 0 alone and gives the model's own (B, C) logits."""
    lm = bv.load_model(str(signal_model_dir("bert")), device="cpu")
    enc = lm.tokenizer([TEXT, "fine"], return_tensors="pt", padding=True)
    with torch.no_grad():
        last = lm.model.bert(**enc).last_hidden_state  # (B, T, D)
        expected = lm.model.classifier(last).numpy()  # (B, T, C)
        own = lm.model(**enc).logits.numpy()  # (B, C)
        seq = forward.classifier_logits(lm.model, **enc, cls_only=True).numpy()
        monkeypatch.setattr(forward, "head_of", lambda model: EVERY_TOKEN)
        every = forward.classifier_logits(lm.model, **enc, cls_only=True).numpy()
    assert seq.shape == own.shape and every.shape == expected.shape == (2, enc["input_ids"].shape[1], len(lm.labels))
    np.testing.assert_allclose(seq, own, rtol=1e-4, atol=1e-5 * np.abs(own).max())
    mask = enc["attention_mask"].numpy().astype(bool)  # padded positions are no tokens of the text
    np.testing.assert_allclose(every[mask], expected[mask], rtol=1e-4, atol=1e-5 * np.abs(expected).max())
    assert np.abs(every[:, 1:] - every[:, :1]).max() > 1e-3  # positions differ: not position 0 copied


def test_a_checkpoint_opens_with_the_head_its_config_names():
    """``head_for`` reads a config's architectures: a token classifier's names the token head, a sequence
    classifier's the sequence head, a bare encoder's none (it opens as a sequence classifier with a fresh head)."""
    assert heads.head_for(["BertForTokenClassification"]) is heads.TOKEN_CLASSIFICATION
    assert heads.head_for(["DebertaV2ForSequenceClassification"]) is SEQUENCE_CLASSIFICATION
    assert heads.head_for(["BertModel"]) is None and heads.head_for(None) is None
    assert heads.TOKEN_CLASSIFICATION in HEADS and heads.TOKEN_CLASSIFICATION.reads == "every"


def test_the_token_head_decodes_a_softmax_at_every_position():
    logits = torch.tensor([[[2.0, -1.0, 0.5], [0.0, 3.0, -2.0]]])  # (B, T, C)
    x = logits.numpy()
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(heads.TOKEN_CLASSIFICATION.decode(logits).numpy(), e / e.sum(axis=-1, keepdims=True),
                               rtol=1e-6)
    # a tagger run's calibration.json: the logits divided by T first (tagging.tag applies it; labels unchanged)
    t = np.exp(x / 2.5 - (x / 2.5).max(axis=-1, keepdims=True))
    scaled = heads.TOKEN_CLASSIFICATION.decode(logits, temperature=2.5).numpy()
    np.testing.assert_allclose(scaled, t / t.sum(axis=-1, keepdims=True), rtol=1e-6)
    assert (scaled.argmax(-1) == x.argmax(-1)).all() and not np.allclose(scaled, e / e.sum(axis=-1, keepdims=True))
