"""The context-mixing measures (issue 20) where users reach them: the CLI's ``attention --measure``, the
JSON route ``/v1/attention``, the gradio ``/attention`` endpoint and the Attention tab's measure handler.
The measures themselves are tested in the core's own tests; here: the contract, the bad inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertviz_app.cli import MEASURE_NAMES, main

MEASURES = ["raw", "norm", "value_zeroing", "alti"]
BAD_TEXTS = [("   ", "empty"), ("a " * 100_000, "the limit is 20,000"), ("[CLS] [SEP]", "special")]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_clis_measure_names_are_the_cores():
    from bertviz_app.interpret.mixing_measures import MEASURES as core_measures

    assert MEASURE_NAMES == core_measures == tuple(MEASURES)


@pytest.mark.parametrize("measure", MEASURES)
def test_attention_json_contract_for_each_measure(capsys, tiny_model_dir, measure):
    code, out, err = run(capsys, "attention", "the film was not good", "--model", str(tiny_model_dir), "--json",
                         "--measure", measure)
    assert code == 0, err
    r = json.loads(out)
    assert list(r)[:3] == ["tokens", "measure", "weights"] and r["measure"] == measure
    t = len(r["tokens"])
    w, comb, agg = (np.asarray(r[k]) for k in ("weights", "combined", "aggregated"))
    heads = 1 if measure in ("value_zeroing", "alti") else 2
    assert w.shape == (2, heads, t, t) and comb.shape == agg.shape == (2, t, t)
    assert np.asarray(r["cls_scores"]).shape == (t,) and r["truncated"] is False
    np.testing.assert_allclose(r["cls_scores"], agg[-1, 0], atol=1e-6)
    np.testing.assert_allclose(comb.sum(-1), 1.0, atol=1e-4)
    np.testing.assert_allclose(agg.sum(-1), 1.0, atol=1e-4)
    if measure in ("value_zeroing", "alti", "raw"):  # norm's per-head numbers are sizes, not shares
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-4)
    assert np.all(w >= 0)


@pytest.mark.parametrize("measure", ["raw", "value_zeroing"])
def test_attention_text_output_names_the_measure(capsys, tiny_model_dir, measure):
    code, out, _ = run(capsys, "attention", "a good film", "--model", str(tiny_model_dir), "--measure", measure)
    assert code == 0 and out.startswith(f"measure: {measure}. ")
    assert "layer  2:" in out and "across all layers" in out


def test_attention_cli_refuses_bad_input_with_one_line_and_status_2(capsys, tiny_model_dir):
    with pytest.raises(SystemExit) as exc:  # argparse: the choices named
        main(["attention", "good", "--model", str(tiny_model_dir), "--measure", "rollout"])
    _, err = capsys.readouterr()
    assert exc.value.code == 2 and "choose from" in err and "value_zeroing" in err and "alti" in err
    for text, says in BAD_TEXTS:
        code, out, err = run(capsys, "attention", text, "--model", str(tiny_model_dir), "--measure", "alti")
        assert code == 2 and out == "" and says in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1


def test_service_attention_filters_a_layer_and_lists_the_measures_when_unknown(tiny):
    from bertviz_app import InputError, service

    out = service.attention(tiny, "the film was good", layer=2, measure="value_zeroing")
    t = len(out["tokens"])
    assert np.asarray(out["weights"]).shape == (1, 1, t, t) and np.asarray(out["aggregated"]).shape == (1, t, t)
    every = service.attention(tiny, "the film was good", measure="value_zeroing")
    np.testing.assert_allclose(out["combined"][0], every["combined"][1], atol=1e-5)
    np.testing.assert_allclose(out["cls_scores"], every["cls_scores"], atol=1e-5)  # always the whole model's
    raw = service.attention(tiny, "the film was good")  # the default stays raw attention
    ref = __import__("bertviz_app").attention(tiny, "the film was good").weights
    assert raw["measure"] == "raw"
    np.testing.assert_allclose(raw["weights"], ref, atol=1e-4)
    with pytest.raises(InputError, match="raw, norm, value_zeroing, alti"):
        service.attention(tiny, "good", measure="attention-flow")


# --------------------------------------------------------------------------- the page's handler
@pytest.fixture()
def page(tiny_model_dir, settings):
    import gradio as gr

    from bertviz_app.ui import Page

    with gr.Blocks():
        return Page(settings, str(tiny_model_dir))


def test_changing_the_measure_recomputes_only_the_attention_views(page, tiny_model_dir):
    from bertviz_app.ui import analysis, attention_tab

    model = str(tiny_model_dir)
    lm = page.load(model)
    rec = analysis.analyze_fast(lm, "the film was great", None)
    a = page.a
    shown = {"attention": id(rec), "attributions": id(rec)}
    out = page.change_measure(model, rec, "value_zeroing", shown, 2, "head 2", False, False)
    new = out[page.state]
    assert new.mixing.measure == "value_zeroing" and new.prediction is rec.prediction and new.maps is rec.maps
    assert out[page.drawn] == {"attention": id(new), "attributions": id(new)}  # both still drawn for this text
    assert out[a.head]["choices"] == [attention_tab.LAYER] and "per layer, not per head" in out[a.head]["info"]
    assert "Value zeroing" in out[a.measure_note] and "residual" in out[a.measure_note]
    assert out[a.heatmap].layout.title.text == "Value zeroing, layer 2, whole layer"
    assert "aggregated over layers 1 to 2" in out[a.rollout].layout.title.text
    z = np.asarray(out[a.heatmap].data[0].z)
    np.testing.assert_allclose(z, np.round(new.mixing.combined[1], 4), atol=1e-3)
    assert not {page.p.label, page.t.tokens, page.t.bar} & set(out)  # nothing but the attention views
    # attention-norm has heads: head 2 of the layer, and its own [CLS] row
    out = page.change_measure(model, new, "norm", {}, 1, "head 2", False, False)
    norm = out[page.state].mixing
    assert out[a.head]["value"] == "head 2" and out[a.head]["choices"][0] == attention_tab.LAYER
    np.testing.assert_allclose(np.asarray(out[a.heatmap].data[0].z), np.round(norm.weights[0, 1], 4), atol=1e-2)
    # back to raw: the record's own maps, drawn as before any measure
    out = page.change_measure(model, out[page.state], "raw", {}, 1, attention_tab.LAYER, False, False)
    assert out[page.state].mixing is None and out[a.head]["value"] == attention_tab.MEAN
    ref = attention_tab.render_focus(rec, 1, attention_tab.MEAN, False, False)[0]
    assert out[a.heatmap].layout.title.text == ref.layout.title.text == "Layer 1, mean of heads"
    np.testing.assert_allclose(np.asarray(out[a.heatmap].data[0].z), np.asarray(ref.data[0].z))


def test_a_refused_measure_says_why_and_goes_back_to_raw(page, tiny_model_dir, monkeypatch):
    import importlib

    from bertviz_app.ui import analysis, attention_tab, control_values

    cm = importlib.import_module("bertviz_app.interpret.mixing_measures")  # the module, not the facade function

    model = str(tiny_model_dir)
    out = page.change_measure(model, None, "alti", {}, 1, "mean of heads", False, False)  # before any Analyze
    assert set(out) == {page.a.measure_note, page.chosen_measure, page.a.status} and "ALTI" in out[page.a.measure_note]
    assert out[page.a.status] == ""  # the tab's status line emptied: a refusal before it is answered
    assert out[page.chosen_measure] == {"measure": "alti"}  # what the next Analyze computes
    out = page.change_measure(model, None, "attention flow", {}, 1, "mean of heads", False, False)
    assert "Not available" in out[page.a.measure_note] and "value\\_zeroing" in out[page.a.measure_note]
    assert out[page.a.measure]["value"] == "raw"
    for module in (cm, attention_tab, analysis):  # a family without value zeroing and ALTI
        monkeypatch.setattr(module, "supported_measures", lambda lm: ("raw", "norm"))
    rec = analysis.with_measure(page.load(model), analysis.analyze_fast(page.load(model), "a good film", None), "norm")
    out = page.change_measure(model, rec, "alti", {}, 1, "mean of heads", False, False)
    assert "Not available" in out[page.a.measure_note] and "raw, norm" in out[page.a.measure_note]
    assert out[page.a.measure]["value"] == "raw" and out[page.state].mixing is None
    assert out[page.chosen_measure] == {"measure": "raw"}
    loaded = page.load_model(model, control_values.PREDICTED)  # the model's family offers only what it supports
    assert [v for _, v in loaded[page.a.measure]["choices"]] == ["raw", "norm"]
    assert loaded[page.a.measure]["value"] == "raw" and loaded[page.chosen_measure] == {"measure": "raw"}


def test_analyze_computes_the_chosen_measure_and_refuses_special_tokens_only(page, tiny_model_dir):
    from bertviz_app import InputError
    from bertviz_app.ui import analysis

    lm = page.load(str(tiny_model_dir))
    rec = analysis.analyze_fast(lm, "a good film", None, measure="alti")
    assert rec.mixing.measure == "alti" and rec.mixing.tokens == rec.maps.tokens
    assert analysis.analyze_fast(lm, "a good film", None).mixing is None  # raw: nothing more computed
    for text, says in BAD_TEXTS:
        with pytest.raises(InputError, match=says):
            analysis.analyze_fast(lm, text, None)


# --------------------------------------------------------------------------- the route and the gradio endpoint
@pytest.fixture(scope="module")
def app_url(tiny_model_dir, tmp_path_factory):
    from conftest import served_app

    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("registry")) as url:
        yield url


def post(app_url: str, body: dict) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"{app_url}v1/attention", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_route_answers_each_measure_like_the_gradio_endpoint(app_url):
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    for measure in MEASURES:
        status, out = post(app_url, {"text": "the movie is great !", "measure": measure})
        assert status == 200, out
        assert {"tokens", "measure", "weights", "combined", "aggregated", "cls_scores", "truncated"} <= set(out)
        t = len(out["tokens"])
        assert out["measure"] == measure and np.asarray(out["combined"]).shape == (2, t, t)
        np.testing.assert_allclose(np.asarray(out["aggregated"]).sum(-1), 1.0, atol=1e-4)
        ref = client.predict("the movie is great !", "", 0, "", measure, api_name="/attention")
        assert ref["measure"] == measure
        np.testing.assert_allclose(ref["weights"], out["weights"], atol=1e-5)
    status, out = post(app_url, {"text": "the movie is great !", "measure": "alti", "layer": 1})
    assert status == 200 and np.asarray(out["weights"]).shape[:2] == (1, 1)
    with pytest.raises(Exception, match="value_zeroing"):
        client.predict("good", measure="flow", api_name="/attention")


@pytest.mark.parametrize("body, status, says", [
    ({"text": "good", "measure": "flow"}, 400, "choose one of raw, norm, value_zeroing, alti"),
    ({"text": "good", "measure": 3}, 422, "measure: Input should be a valid string"),
    ({"text": "good", "measures": "alti"}, 422, "measures: unknown parameter"),
    ({"text": "   ", "measure": "value_zeroing"}, 400, "empty"),
    ({"text": "a " * 100_000, "measure": "alti"}, 400, "the limit is 20,000"),
    ({"text": "[CLS] [SEP]", "measure": "norm"}, 400, "special"),
    ({"text": "[CLS] [SEP]"}, 400, "special"),
    ({"text": "good", "measure": "alti", "layer": 5}, 400, "layer must be 0 (all) or 1 to 2"),
])
def test_route_refuses_bad_input_with_a_status_and_a_message(app_url, body, status, says):
    got, out = post(app_url, body)
    assert got == status, out
    assert set(out) == {"error"} and says in out["error"] and "Traceback" not in out["error"], out
