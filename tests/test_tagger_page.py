"""A tagger (a token classifier) on the page's Attention and Attributions tabs: the text's attention in every layer
and head with the context-mixing measures its family has, the entities' rows marked; its entities and words as the
Attributions tab's targets, each explained by ``explain_entities`` and drawn with the classifier's views; the
classifier's parts not offered for it, and back for a classifier. The tagger is test_tagging's tiny BERT trained to
tag "joy" as a person and "slog" as a place."""

from __future__ import annotations

from types import SimpleNamespace

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


# --------------------------------------------------------------------------- the Attention tab
def test_the_attention_tab_marks_the_entities_rows_and_has_no_cls_row(tagger):
    from bertviz_app.ui import analysis, attention_tab, token_views

    rec = analysis.analyze_tagged(tagger, TEXT)
    np.testing.assert_allclose(rec.maps.weights.astype(np.float32), bv.attention(tagger, TEXT).weights, atol=1e-3)
    info = rec.maps.info
    assert info.tokens[4] == "joy" and info.tokens[9] == "slog"  # [CLS] is token 0
    view = token_views.token_view(info, False)
    assert attention_tab.entity_rows(rec, view, view.keep(False)) == [(4, 4, "joy · PER"), (9, 9, "slog · LOC")]
    assert attention_tab.entity_rows(rec, view, view.keep(True)) == [(3, 3, "joy · PER"), (8, 8, "slog · LOC")]
    note = attention_tab.tagger_note(rec)
    assert "“joy” · PER (token 4)" in note and "“slog” · LOC (token 9)" in note
    fig, cls_fig, roll = attention_tab.render_focus(rec, 2, "head 1", False, False)
    outlined = sorted((s.y0, s.y1) for s in fig.layout.shapes)
    assert outlined == [(3.5, 4.5), (8.5, 9.5)]
    np.testing.assert_allclose(np.asarray(fig.data[0].z), np.round(rec.maps.weights[1, 0].astype(np.float32), 4))
    assert not cls_fig.data and "No [CLS] row for a tagger" in cls_fig.layout.annotations[0].text
    assert roll.data  # rollout reads every row: drawn as for a classifier
    # a measure: computed for the tagger's text, drawn the same way
    alti = analysis.with_measure(tagger, rec, "alti")
    fig, cls_fig, _ = attention_tab.render_focus(alti, 1, attention_tab.LAYER, False, False)
    assert len(fig.layout.shapes) == 2 and not cls_fig.data
    # negative check: a classifier's record has no note and its [CLS] row drawn
    assert attention_tab.tagger_note(None) == "" and not attention_tab.is_long(rec)


def test_a_text_without_entities_says_so_on_the_attention_tab(tagger):
    from bertviz_app.ui import analysis, attention_tab

    rec = analysis.analyze_tagged(tagger, "the film was good")
    assert not rec.tagging.entities
    assert "no entities" in attention_tab.tagger_note(rec)
    fig, _, _ = attention_tab.render_focus(rec, 1, attention_tab.MEAN, False, False)
    assert not fig.layout.shapes


# --------------------------------------------------------------------------- the Attributions tab
def attr_ui():
    cmp = SimpleNamespace(methods="methods", panel="cmp_panel")
    doc = SimpleNamespace(panel="doc_panel")
    spans = SimpleNamespace(panel="span_panel")  # a reader's other methods
    return SimpleNamespace(target="target", baseline="baseline", cmp=cmp, doc=doc, spans=spans, delta="delta",
                           tokens="tokens",
                           bar="bar", path="path", lens="lens", tagger_note="tagger_note", explain="explain",
                           cls_row="cls_row", cls_note="cls_note")


def score_of(html: str, word: str) -> float:
    """The score a coloured word's hover gives (``title="word: +1.2345"``)."""
    import re

    return float(re.search(rf'title="{word}: ([-+][0-9.]+)"', html).group(1))


@pytest.mark.parametrize("target, args", [("entity:1", {"entities": 1}), ("word:1", {"token": 1})])
def test_an_explained_target_shows_the_librarys_numbers(tagger, target, args):
    from bertviz_app.ui import analysis, attribution_tab

    rec = analysis.explain_target(tagger, analysis.analyze_tagged(tagger, TEXT), target, "pad", 50, auto=True)
    [ref] = bv.explain_entities(tagger, TEXT, **args, tolerance=attribution_tab.DELTA_WARN)
    a = rec.explained
    assert rec.target == target and a.target == ref.target
    np.testing.assert_allclose(a.scores, ref.scores, rtol=1e-5, atol=1e-7)
    out = attribution_tab.render(attr_ui(), rec, True)
    md = out["delta"]
    for number in (f"{ref.f_x:.6g}", f"{ref.f_baseline:.6g}", f"{ref.delta:+.3e}", f"**steps** {ref.n_steps}"):
        assert number in md
    # how far to trust it: the delta's share of the change and the verdict that goes with it
    verdict = "**Converged:**" if ref.relative_delta <= attribution_tab.DELTA_WARN else "take these scores with caution"
    assert f"({ref.relative_delta:.1%} of the change)" in md and verdict in md
    biggest = max(ref.words, key=lambda w: abs(w.score))
    assert score_of(out["tokens"], biggest.word) == pytest.approx(biggest.score, abs=5e-5)
    bar = out["bar"].data[0]
    assert len(bar.x) == len(ref.words) and bar.x[3].startswith("joy")  # one bar per word (repeats numbered)
    np.testing.assert_allclose(bar.y, [w.score for w in ref.words], rtol=1e-5, atol=1e-7)
    # the pieces' view: one bar per word-piece
    pieces = attribution_tab.render(attr_ui(), rec, False)["bar"].data[0]
    assert len(pieces.x) == len(ref.tokens)
    np.testing.assert_allclose(pieces.y, ref.scores, rtol=1e-5, atol=1e-7)
    if target.startswith("entity"):
        assert "Explaining the entity “slog” · LOC** (words 9-9)" in md and "log p(B-LOC)" in md
    else:
        assert "Explaining why “film” (word 2) is tagged O" in md


def test_the_tab_offers_a_tagger_its_targets_and_hides_the_classifiers_parts(tagger, tiny):
    from bertviz_app.ui import analysis, attribution_tab, control_values

    ui = attr_ui()
    rec = analysis.analyze_tagged(tagger, TEXT)
    out = attribution_tab.choices_for(ui, tagger, "positive", "pad", ["integrated_gradients"], rec)
    values = [v for _, v in out["target"]["choices"]]
    assert values[:2] == ["entity:0", "entity:1"] and out["target"]["value"] == "entity:0"
    assert control_values.PREDICTED not in values and "positive" not in values  # no class for a tagger
    mode = attribution_tab.mode_for(ui, tagger)
    assert mode["tagger_note"]["visible"] is True and mode["explain"]["value"] == attribution_tab.TAGGER_EXPLAIN_LABEL
    assert all(mode[k]["visible"] is False for k in ("cls_row", "cls_note", "cmp_panel", "doc_panel", "span_panel"))
    # before a text is analysed: nothing to choose
    before = attribution_tab.choices_for(ui, tagger, None, "pad", [], None)["target"]
    assert before["choices"] == [(attribution_tab.NO_TEXT, "")] and before["value"] == ""  # a value among its choices
    empty = attribution_tab.tag_target_update(analysis.analyze_tagged(tagger, "the film was good"), "entity:0")
    assert empty["value"] == "" and [v for _, v in empty["choices"]] == ["", "word:0", "word:1", "word:2", "word:3"]
    # positive control: a classifier gets its classes and every part back
    out = attribution_tab.choices_for(ui, tiny, "entity:0", "pad", ["integrated_gradients"], None)
    assert out["target"]["choices"] == [control_values.PREDICTED, *tiny.labels]
    assert out["target"]["value"] == control_values.PREDICTED and out["target"]["label"] == "Target class"
    mode = attribution_tab.mode_for(ui, tiny)
    assert mode["tagger_note"]["visible"] is False and mode["explain"]["value"] == attribution_tab.EXPLAIN_LABEL
    assert all(mode[k]["visible"] is True for k in ("cls_row", "cls_note", "cmp_panel", "doc_panel"))


def test_the_classifiers_parts_refuse_a_taggers_text_in_words(tagger):
    from bertviz_app.ui import analysis, attention_tab, attribution_tab

    rec = analysis.analyze_tagged(tagger, TEXT)
    with pytest.raises(bv.InputError, match="Comparing methods reads a sequence classifier"):
        attribution_tab.compare(rec, ["integrated_gradients"], None, "pad", 20, True, 3, bv.Settings())
    with pytest.raises(bv.InputError, match="whole-document explanation reads a sequence classifier"):
        attribution_tab.explain_document(rec, None, "pad", 20, True, 128, bv.Settings())
    with pytest.raises(bv.InputError, match="whole-document part reads a classifier"):
        attention_tab.read_document(rec, 0, 128, bv.Settings())
    off = attribution_tab.export_files(rec, True)
    assert all(o["interactive"] is False for o in off)
    pending = attribution_tab.render(attr_ui(), rec, True)
    assert "being computed" in pending["delta"] and pending["tokens"] == ""
    assert "skipped" in attribution_tab.render(attr_ui(), rec, True, skipped=True)["delta"]
    empty = analysis.analyze_tagged(tagger, "the film was good")
    assert "no entities" in attribution_tab.render(attr_ui(), empty, True)["delta"]


# --------------------------------------------------------------------------- the page's handlers
def test_analyze_on_a_tagger_then_a_classifier(tagger_dir, tiny_model_dir, settings):
    """One page: Analyze on the tagger gives its record, its entities as targets and the first one explained; the
    classifier's Analyze after it gives its classes and parts back."""
    import gradio as gr

    from bertviz_app.ui import Page, analysis, attention_tab, attribution_tab, control_values

    with gr.Blocks():
        page = Page(settings, str(tagger_dir))
    t = page.t

    def analyze(model, text, target):
        out = {}
        for step in page.analyze(model, text, "", target, "pad", 50, True, 1, attention_tab.MEAN, False, False, True,
                                 False, False, {"tab": "attention"}, {"measure": "raw"}):
            out.update(step)
        return out

    out = analyze(str(tagger_dir), TEXT, control_values.PREDICTED)
    rec = out[page.state]
    assert isinstance(rec, analysis.TagRecord) and rec.target == "entity:0"
    assert rec.explained.target.text == "joy" and out[t.target]["value"] == "entity:0"
    assert out[page.a.heatmap].layout.shapes and "token 4" in out[page.a.note]  # the open Attention tab drawn
    follow = page.follow_choices(rec, str(tagger_dir), "entity:0", "pad", [])
    assert follow[t.tagger_note]["visible"] is True and follow[t.cmp.panel]["visible"] is False
    again = page.explain_again(rec, "entity:1", "pad", 50, True, {}, 1, attention_tab.MEAN, False, False, True,
                               progress=lambda *a, **k: None)
    assert again[page.state].explained.target.text == "slog" and "slog" in again[t.tokens]

    out = analyze(str(tiny_model_dir), "a gorgeous film", "entity:0")
    rec = out[page.state]
    assert isinstance(rec, analysis.Record) and out[t.target]["choices"] == [control_values.PREDICTED, *rec.labels]
    assert out[page.a.note] == "" and not out[page.a.heatmap].layout.shapes
    follow = page.follow_choices(rec, str(tiny_model_dir), control_values.PREDICTED, "pad", [])
    assert follow[t.tagger_note]["visible"] is False and follow[t.cmp.panel]["visible"] is True
    assert follow[t.explain]["value"] == attribution_tab.EXPLAIN_LABEL
