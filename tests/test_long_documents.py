"""Documents of any length (issue 20): attributions and attention over predict's overlapping
windows, merged over the whole document. The tiny model reads 64 tokens, so a few sentences span
several windows."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bertviz_app as bv
from bertviz_app.interpret.long_documents import document_windows, edge_weights, explain_windows, merge_windows

LONG = " ".join(["the film was good , it is not a tedious slog ! joyless fun"] * 12)
STRIDE = 16


@pytest.fixture(scope="module")
def doc(tiny):
    return explain_windows(tiny, LONG, stride=STRIDE)


def test_a_long_text_is_read_in_the_windows_predict_reads(tiny, doc):
    pred = bv.predict(tiny, LONG, window=True, stride=STRIDE)[0]
    assert len(doc.windows) == pred.windows > 2
    assert len(doc.tokens) == pred.n_tokens
    # the document's pooled prediction is predict's; the class explained is its label
    np.testing.assert_allclose(doc.prediction.probs, pred.probs, atol=1e-5)
    assert doc.attribution.target == pred.label


def test_the_merged_record_covers_every_token_of_the_whole_text_once(tiny, doc):
    a = doc.attribution
    text_tokens = [t for t, s in zip(a.tokens, a.info.sequence_ids) if s == 0]
    whole = tiny.tokenizer(LONG, add_special_tokens=False)
    assert text_tokens == whole.tokens()  # every token once, in order, none dropped
    assert a.tokens[0] == "[CLS]" and a.tokens[-1] == "[SEP]" and a.tokens.count("[CLS]") == 1
    assert len(a.scores) == len(a.tokens) and np.isfinite(a.scores).all()
    # offsets point into the whole text, so the coloured view and the export mark the right characters
    for tok, (s, e), seq in zip(a.tokens, a.info.offsets, a.info.sequence_ids):
        if seq == 0:
            assert LONG[s:e].lower() == tok.removeprefix("##")
    assert a.info.offsets[-2][1] == len(LONG)
    words = bv.attribution_units(a, merge=True)[0]
    assert words[1:-1] == LONG.split()


def test_windows_overlap_and_are_listed_with_their_predictions(doc):
    spans = [w.token_span for w in doc.windows]
    for (_a0, a1), (b0, _b1) in zip(spans, spans[1:]):
        assert a1 - b0 == STRIDE  # neighbours share ``stride`` tokens
    assert spans[0][0] == 1 and spans[-1][1] == len(doc.tokens) - 1
    d = doc.to_dict()
    assert d["windows"] == len(doc.windows) and len(d["window_predictions"]) == len(doc.windows)
    for w in d["window_predictions"]:
        assert w["label"] in ("negative", "positive") and abs(sum(w["scores"].values()) - 1) < 1e-5


def test_integrated_gradients_complete_in_every_window_and_the_merged_sum_is_reported(doc):
    for w in doc.windows:
        a = w.attribution
        assert len(a.tokens) <= 64
        assert float(a.scores.sum()) + a.delta == pytest.approx(a.f_x - a.f_baseline, abs=1e-6)
        assert a.relative_delta <= 0.05 + 1e-9  # each window met the default tolerance
    assert doc.scores_sum == pytest.approx(float(np.sum(doc.attribution.scores, dtype=np.float64)), abs=1e-6)
    assert len(doc.windows_change) == len(doc.windows)
    a = doc.attribution
    assert a.f_x == pytest.approx(np.mean([w.attribution.f_x for w in doc.windows]))
    worst = max(w.attribution.relative_delta for w in doc.windows)
    assert a.relative_delta == pytest.approx(worst, rel=1e-4, abs=1e-9)


def test_a_text_that_fits_is_one_window_with_the_plain_explanation(tiny):
    text = "the film was good , not a tedious slog"
    d = explain_windows(tiny, text)
    plain = bv.attribute(tiny, text)
    assert len(d.windows) == 1
    assert d.tokens == plain.tokens and d.attribution.info.offsets == plain.info.offsets
    np.testing.assert_allclose(d.attribution.scores, plain.scores, atol=1e-6)
    assert d.attribution.delta == pytest.approx(plain.delta, abs=1e-7)
    g = explain_windows(tiny, text, "gradient_x_input")
    np.testing.assert_allclose(g.attribution.scores, bv.explain(tiny, text, "gradient_x_input").scores, atol=1e-6)


@pytest.mark.parametrize("method", ["gradient_x_input", "saliency", "occlusion"])
def test_every_method_goes_through_the_windows(tiny, method):
    d = explain_windows(tiny, LONG, method, stride=STRIDE)
    assert d.attribution.method == method and len(d.attribution.scores) == len(d.tokens)
    assert all(w.attribution.method == method for w in d.windows)


def test_a_window_explained_alone_matches_its_merged_scores_where_only_it_reads(tiny, doc):
    w0 = doc.windows[0]
    only = slice(1, doc.windows[1].token_span[0])  # tokens no other window reads
    np.testing.assert_allclose(doc.attribution.scores[only], w0.attribution.scores[only], atol=1e-7)


def test_edge_weights_are_small_at_a_cut_and_grow_inside():
    w = edge_weights(10, left_cut=True, right_cut=True)
    assert w[0] == w[-1] == 1 and w[4] == w[5] == 5 and (np.diff(w[:5]) > 0).all()
    first = edge_weights(10, left_cut=False, right_cut=True)  # the document's own start is no cut
    assert first[0] > first[-1] == 1


def test_merge_weights_each_window_by_its_distance_from_its_edge(tiny):
    d = document_windows(tiny, LONG, stride=STRIDE)
    ones = [np.full(len(w), float(w.index)) for w in d.windows]  # window k scores every token k
    merged = merge_windows(d, ones)
    a0, a1 = d.windows[0].token_span
    b0 = d.windows[1].token_span[0]
    overlap = merged[b0:a1]  # read by windows 0 and 1
    assert overlap[0] < 0.1 and overlap[-1] > 0.9  # near window 0's cut: window 0; near window 1's: window 1
    assert (np.diff(overlap) > 0).all()
    assert merged[1] == 0 and merged[a1] == 1


def test_attention_of_a_picked_window_and_merged_cls_rows(tiny):
    at = bv.attention_windows(tiny, LONG, window=1, stride=STRIDE)
    d = document_windows(tiny, LONG, stride=STRIDE)
    assert at.windows == len(d) and at.maps.tokens == d.windows[1].info.tokens
    layers, heads, t, _ = at.maps.weights.shape
    np.testing.assert_allclose(at.maps.weights.sum(-1), 1, atol=1e-5)
    assert at.cls_row.shape == at.rollout_cls.shape == (layers, len(d.info))
    # a token read by one window keeps that window's share; the row sums to about one per window
    first = bv.attention_windows(tiny, LONG, window=0, stride=STRIDE)
    only = slice(1, d.windows[1].token_span[0])
    np.testing.assert_allclose(at.rollout_cls[:, only], bv.rollout(first.maps)[:, 0, only], atol=1e-6)
    assert (at.rollout_cls.sum(-1) < at.windows + 1).all() and (at.rollout_cls.sum(-1) > 1).all()
    short = "the film was good"
    one = bv.attention_windows(tiny, short)
    plain = bv.attention(tiny, short)
    np.testing.assert_allclose(one.maps.weights, plain.weights, atol=1e-6)
    np.testing.assert_allclose(one.rollout_cls, bv.rollout(plain)[:, 0], atol=1e-6)
    with pytest.raises(bv.InputError, match="window must be a whole number from 0 to"):
        bv.attention_windows(tiny, LONG, window=99, stride=STRIDE)


def test_export_covers_the_whole_document(tiny, doc):
    data = json.loads(bv.explanation_json(doc.attribution, doc.prediction, "tiny", windows=doc.window_dicts()))
    assert len(data["attribution"]["attributions"]) == len(doc.tokens) == len(data["input"]["offsets"])
    assert data["windows"]["count"] == len(doc.windows) and data["input"]["truncated"] is False
    back = bv.explanation_from_dict(data)
    np.testing.assert_allclose(back.attribution.scores, doc.attribution.scores, atol=1e-6)
    page = bv.explanation_html(doc.attribution, doc.prediction, "tiny", windows=doc.window_dicts())
    assert "<h2>Windows</h2>" in page and "the windows' means" in page
    assert page.count("joyless") >= 12


@pytest.mark.parametrize("text, says", [
    ("   \n\t ", "empty or whitespace"),
    ("a " * 100_000, "the limit is 20,000"),
    ("\x01\x02\x03", "no tokens the model reads"),
])
def test_bad_documents_get_a_clear_message(tiny, text, says):
    with pytest.raises(bv.InputError, match=says):
        explain_windows(tiny, text)
    with pytest.raises(bv.InputError, match=says):
        bv.attention_windows(tiny, text)


def test_bad_options_get_a_clear_message(tiny):
    with pytest.raises(bv.InputError, match="stride"):
        explain_windows(tiny, LONG, stride=999)
    with pytest.raises(bv.InputError, match="Unknown attribution method"):
        explain_windows(tiny, LONG, "nope", stride=STRIDE)
    with pytest.raises(bv.InputError, match="Unknown class"):
        explain_windows(tiny, LONG, target="neutral", stride=STRIDE)


def test_only_special_characters_still_explain_without_error(tiny):
    for text in ("!!! ??? ...", "\U0001f600\U0001f600"):
        d = explain_windows(tiny, text)
        assert len(d.windows) == 1 and len(d.attribution.scores) == len(d.tokens)


# --------------------------------------------------------------------------- CLI and JSON route
def _cli(capsys, *argv):
    from bertviz_app.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_explain_window_json_contract(capsys, tiny_model_dir, tmp_path):
    html, out = tmp_path / "doc.html", tmp_path / "doc.json"
    code, stdout, err = _cli(capsys, "explain", LONG, "--model", str(tiny_model_dir), "--window", "--stride",
                             str(STRIDE), "--json", "--html", str(html), "--out", str(out))
    assert code == 0, err
    d = json.loads(stdout)
    assert d["windows"] > 2 and len(d["window_predictions"]) == d["windows"]
    assert len(d["tokens"]) == len(d["attributions"]) == len(d["offsets"])
    assert d["truncated"] is False and {"label", "scores", "tokens", "chars"} <= set(d["window_predictions"][0])
    saved = json.loads(out.read_text())
    assert saved["windows"]["count"] == d["windows"] and "<h2>Windows</h2>" in html.read_text()
    code, stdout, _ = _cli(capsys, "explain", LONG, "--model", str(tiny_model_dir), "--window", "--stride",
                           str(STRIDE))
    assert code == 0 and f"{d['windows']} windows" in stdout and "window 0:" in stdout


def test_cli_attention_window(capsys, tiny_model_dir):
    code, stdout, err = _cli(capsys, "attention", LONG, "--model", str(tiny_model_dir), "--stride", str(STRIDE),
                             "--json", "--window", "1")
    assert code == 0, err
    d = json.loads(stdout)
    assert d["window"] == 1 and d["windows"] > 2 and len(d["weights"][0][0]) == len(d["tokens"])
    assert len(d["document"]["rollout_cls"][-1]) == len(d["document"]["tokens"])


@pytest.mark.parametrize("argv, says", [
    (["explain", "   ", "--window"], "empty or whitespace"),
    (["explain", "a " * 100_000, "--window"], "the limit is 20,000"),
    (["explain", "\x01\x02", "--window"], "no tokens the model reads"),
    (["attention", "\x01\x02", "--window"], "no tokens the model reads"),
    (["explain", LONG, "--window", "--stride", "999"], "stride"),
    (["attention", LONG, "--window", "50", "--stride", "16"], "window must be a whole number"),
])
def test_cli_bad_input_one_line_no_traceback(capsys, tiny_model_dir, argv, says):
    code, _, err = _cli(capsys, *argv, "--model", str(tiny_model_dir))
    assert code == 2 and says in err and "Traceback" not in err and err.count("\n") == 1


@pytest.fixture(scope="module")
def api(tiny_model_dir):
    from fastapi.testclient import TestClient

    from bertviz_app.config import Settings
    from bertviz_app.serve.server import create_app

    with TestClient(create_app(Settings(), str(tiny_model_dir), page=False)) as client:
        yield client


def test_route_explain_and_attention_with_window(api):
    r = api.post("/v1/explain", json={"text": LONG, "window": True, "stride": STRIDE})
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["windows"] > 2 and len(d["attributions"]) == len(d["tokens"]) and d["truncated"] is False
    plain = api.post("/v1/explain", json={"text": LONG}).json()
    assert plain["truncated"] is True and len(plain["tokens"]) == 64  # the default is unchanged
    r = api.post("/v1/attention", json={"text": LONG, "window": True, "stride": STRIDE, "window_index": 2,
                                        "layer": 1})
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["window"] == 2 and len(a["weights"]) == 1 and len(a["document"]["cls_row"][0]) == len(d["tokens"])


@pytest.mark.parametrize("route, body, says", [
    ("explain", {"text": "  ", "window": True}, "empty"),
    ("explain", {"text": "a " * 100_000, "window": True}, "the limit is 20,000"),
    ("explain", {"text": "\x01\x02", "window": True}, "no tokens the model reads"),
    ("attention", {"text": "\x01\x02", "window": True}, "no tokens the model reads"),
    ("attention", {"text": LONG, "window": True, "window_index": 99, "stride": 16}, "window must be"),
    ("compare", {"text": "good film", "window": True}, "window is for /v1/explain"),
])
def test_route_bad_input_clear_message(api, route, body, says):
    r = api.post(f"/v1/{route}", json=body)
    assert r.status_code == 400 and says in r.json()["error"] and "Traceback" not in r.text


def test_page_panel_explains_the_whole_document(tiny, tiny_model_dir, tmp_path):
    from types import SimpleNamespace

    from bertviz_app.config import Settings
    from bertviz_app.ui import analysis, attribution_tab, control_values

    rec = analysis.Record(model=str(tiny_model_dir), labels=tiny.labels, device_label="cpu",
                        prediction=bv.predict(tiny, LONG, window=True, stride=STRIDE)[0], maps=None, lens=None)
    d = attribution_tab.explain_document(rec, control_values.PREDICTED, "pad", 50, True, STRIDE, Settings())
    keys = SimpleNamespace(reading="reading", tokens="tokens", table="table", html_file="html", json_file="json",
                           status="status")
    out = attribution_tab.render_document(SimpleNamespace(doc=keys), d, rec, True)
    assert f"{len(d.windows)} windows" in out["reading"] and len(out["table"]) == len(d.windows)
    assert out["tokens"].count('class="bv-tok"') >= len(LONG.split())
    assert out["status"] == ""  # a refusal of an earlier try is cleared by the panel drawn
    with pytest.raises(bv.InputError, match="Analyze first"):
        attribution_tab.explain_document(None, control_values.PREDICTED, "pad", 50, True, STRIDE, Settings())


@pytest.mark.parametrize("measure", ["norm", "alti"])
def test_attention_windows_take_a_context_mixing_measure(tiny, measure):
    """Each window's measure over its own ids: a text that fits gives the measure's own [CLS] rows."""
    from bertviz_app.interpret.mixing_measures import context_mixing

    short = "the film was good"
    one = bv.attention_windows(tiny, short, measure=measure)
    whole = context_mixing(tiny, short, measure=measure)
    assert one.measure == measure and one.maps.measure == measure
    np.testing.assert_allclose(one.rollout_cls, whole.aggregated[:, 0], atol=1e-5)
    np.testing.assert_allclose(one.cls_row, whole.combined[:, 0], atol=1e-5)
    at = bv.attention_windows(tiny, LONG, window=1, stride=STRIDE, measure=measure)
    np.testing.assert_allclose(at.maps.aggregated.sum(-1), 1, atol=1e-5)
    with pytest.raises(bv.InputError, match="value_zeroing"):
        bv.attention_windows(tiny, short, measure="flow")
