"""A tagger (a token classifier) on the page's Attention and Attributions tabs: the text's attention in every layer
and head with the context-mixing measures its family has, the entities' rows marked; its entities and words as the
Attributions tab's targets, each explained by ``explain_entities`` and drawn with the classifier's views; the
classifier's parts not offered for it, and back for a classifier. The tagger is test_tagging's tiny BERT trained to
tag "joy" as a person and "slog" as a place."""

from __future__ import annotations

import numpy as np
import pytest
from test_tagging import BIO, build_tagger, train_tagger

import bertviz_app as bv
from bertviz_app.interpret import mixing_measures as cm
from bertviz_app.models.tagging import Entity, TaggedWord, Tagging

TEXT = "the film was joy and it was a slog"


@pytest.fixture(scope="module")
def tagger_dir(tmp_path_factory):
    return train_tagger(build_tagger("bert", tmp_path_factory.mktemp("tagger-page") / "bert", BIO))


@pytest.fixture(scope="module")
def tagger(tagger_dir):
    return bv.load_model(str(tagger_dir), device="cpu", settings=bv.Settings(memo_size=0))


# --------------------------------------------------------------------------- attention: the family's measures
def test_a_taggers_layers_have_every_mixing_measure_of_its_family(tagger):
    """BERT's own check asks for the pooler a sequence head reads; a tagger has none, yet its layers decompose the
    same: every measure is offered and computed, and raw attention is the model's own attention."""
    assert cm.supported_measures(tagger) == cm.MEASURES
    raw = cm.context_mixing(tagger, TEXT, measure="raw")
    np.testing.assert_allclose(raw.weights, bv.attention(tagger, TEXT).weights, atol=1e-6)
    for measure in ("norm", "value_zeroing", "alti"):
        mm = cm.context_mixing(tagger, TEXT, measure=measure)
        np.testing.assert_allclose(mm.combined.sum(axis=-1), 1.0, atol=1e-4)  # each row: shares of a token's mix
        assert not np.allclose(mm.combined, raw.combined, atol=1e-3)  # a measure, not attention again


# --------------------------------------------------------------------------- targets from a tagging (pure)
def hand_tagging() -> Tagging:
    """ "Ada Lovelace met him": a two-word entity whose second word is two pieces, then two O words."""
    text = "Ada Lovelace met him"
    tokens = ("ada", "love", "##lace", "met", "him")
    offsets = ((0, 3), (4, 8), (8, 12), (13, 16), (17, 20))
    labels = ("B-PER", "I-PER", "I-PER", "O", "O")
    words = (TaggedWord("Ada", "B-PER", 0.9, 0, 3, (0, 1)), TaggedWord("Lovelace", "I-PER", 0.8, 4, 12, (1, 3)),
             TaggedWord("met", "O", 0.99, 13, 16, (3, 4)), TaggedWord("him", "O", 0.97, 17, 20, (4, 5)))
    return Tagging(text=text, tokens=tokens, offsets=offsets, labels=labels, probs=np.zeros((5, 3), np.float32),
                   label_names=("O", "B-PER", "I-PER"), words=words,
                   entities=(Entity("Ada Lovelace", "PER", 0, 12, 0.85),), aggregation="simple", truncated=False,
                   windows=1)


def test_target_choices_are_the_entities_then_each_words_tag():
    from bertviz_app.ui import analysis

    t = hand_tagging()
    assert analysis.tag_choices(t) == [
        ("Ada Lovelace · PER (words 1-2)", "entity:0"),
        ("why “Ada” is B-PER (word 1)", "word:0"), ("why “Lovelace” is I-PER (word 2)", "word:1"),
        ("why “met” is O (word 3)", "word:2"), ("why “him” is O (word 4)", "word:3")]
    assert analysis.entity_words(t, 0) == (1, 2)
    # what Analyze explains: the choice kept where this text offers it, else its first entity
    assert analysis.tag_target(t, "word:3") == "word:3"
    assert analysis.tag_target(t, "word:9") == "entity:0" and analysis.tag_target(t, "positive") == "entity:0"
    # explain_entities' arguments: an entity by index, a word by its first piece (the one it is tagged by)
    assert analysis.tag_target_args(t, "entity:0") == {"entities": 0}
    assert analysis.tag_target_args(t, "word:1") == {"token": 1}
    assert analysis.tag_target_args(t, "word:3") == {"token": 4}
    for bad in (None, "", "entity:1", "word:4", "positive", "word:-1", "entity:x"):
        with pytest.raises(bv.InputError, match="Choose an entity or a word"):
            analysis.tag_target_args(t, bad)


def test_a_text_without_entities_offers_its_words_and_explains_nothing_by_itself():
    from dataclasses import replace

    from bertviz_app.ui import analysis

    t = replace(hand_tagging(), entities=())
    assert [v for _, v in analysis.tag_choices(t)] == ["word:0", "word:1", "word:2", "word:3"]
    assert analysis.tag_target(t, "entity:0") is None and analysis.tag_target(t, None) is None
    with pytest.raises(bv.InputError, match="this text has no entities"):
        analysis.tag_target_args(t, "entity:0")
