"""The HTTP API of the web app, called the way a user would: launch the app in-process on a
free port (the trained tiny BERT of conftest.make_signal_model, whose answers span 0.02-0.99, and an
empty registry) and call every endpoint with gradio_client."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertviz_app.config import Settings

pytest.importorskip("gradio")
from gradio_client import Client  # noqa: E402

from conftest import check_json_against_reference, served_app  # noqa: E402

XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def app_url(signal_model_dir, tmp_path_factory):
    with served_app(str(signal_model_dir("bert")), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("registry")) as url:
        yield url


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


def all_at_once(call, n: int) -> dict:
    """{i: call(i)} for i < n, the n calls released together from n threads (a barrier)."""
    import threading

    barrier = threading.Barrier(n)
    results: dict = {}

    def run(i):
        barrier.wait(60)
        results[i] = call(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def error_message(excinfo) -> str:
    return str(excinfo.value)


def test_public_endpoints_are_the_stable_eight(client):
    named = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert set(named) == {"/predict", "/attention", "/explain", "/compare", "/summary", "/evaluate", "/tag", "/answer"}


def test_predict_with_text_alone(client):
    out = client.predict("the film was good", api_name="/predict")
    assert set(out["scores"]) == {"negative", "positive"}
    assert sum(out["scores"].values()) == pytest.approx(1.0, abs=1e-5)
    assert out["label"] == max(out["scores"], key=out["scores"].get)
    assert out["truncated"] is False


def test_predict_pair_and_truncation(client):
    out = client.predict("the film was good", "it is fun", api_name="/predict")
    assert out["pair"] == "it is fun"
    long = client.predict("the film was good . " * 40, api_name="/predict")  # > 64 tokens of the tiny model
    assert long["truncated"] is True


def test_concurrent_mixed_good_and_bad_predicts_each_get_their_own_answer(app_url):
    """Many users at once go through one micro-batch: each gets its own prediction, and a bad text
    fails only its own request with its own message."""

    good = ["the film was good", "a tedious slog !", "it is not fun", "the movie is great , moving ."]
    bad = ["   ", "a " * 15_000]  # the good texts get both labels (checked below), so a mix-up shows
    jobs = good * 3 + bad * 2
    np.random.default_rng(1).shuffle(jobs)
    reference = {t: Client(app_url, verbose=False).predict(t, api_name="/predict") for t in good}
    # a generous HTTP timeout: on a busy 2-core machine 16 requests at once can take a while
    clients = [Client(app_url, verbose=False, httpx_kwargs={"timeout": 300}) for _ in jobs]
    def call(i):
        try:
            return clients[i].predict(jobs[i], api_name="/predict")
        except Exception as exc:  # noqa: BLE001 - the error is the answer under test
            return exc

    results = all_at_once(call, len(jobs))
    for i, text in enumerate(jobs):
        got = results[i]
        if text in good:
            assert isinstance(got, dict), (text, got)
            assert got["text"] == text and got["label"] == reference[text]["label"]
            for label, p in reference[text]["scores"].items():
                assert got["scores"][label] == pytest.approx(p, rel=1e-4)
        elif text.strip():
            assert "the limit is 20,000" in str(got), got
        else:
            assert "empty" in str(got) and "Traceback" not in str(got), got


def test_long_inputs_say_truncated_everywhere_and_window_reads_them_whole(client):
    long = "the film was good . " * 40  # > 64 tokens of the tiny model
    assert client.predict(long, api_name="/attention")["truncated"] is True
    assert client.predict(long, "", "pad", 8, api_name="/explain")["truncated"] is True
    assert client.predict("the film was good", "", "pad", 8, api_name="/explain")["truncated"] is False
    win = client.predict(long, window=True, stride=16, api_name="/predict")
    assert win["truncated"] is False and win["windows"] > 1
    with pytest.raises(Exception) as excinfo:
        client.predict(long, window=True, pool="median", api_name="/predict")
    assert "pool must be one of mean, max" in error_message(excinfo)

def test_attention_and_explain_read_a_long_text_in_windows(client):
    """window, stride and window_index come last: positional calls made before them keep working."""
    long = "the film was good . " * 40  # > 64 tokens of the tiny model
    att = client.predict(long, "", 2, "", "raw", True, 16, 1, api_name="/attention")
    assert att["window"] == 1 and att["windows"] > 2 and att["truncated"] is False
    w = np.asarray(att["weights"])  # layer 2 only, window 1's own tokens
    assert w.shape == (1, 2, len(att["tokens"]), len(att["tokens"]))
    doc = att["document"]
    assert np.asarray(doc["cls_row"]).shape == (2, len(doc["tokens"])) and doc["tokens"][-2] == "."
    named = client.predict(long, window=True, stride=16, window_index=1, layer=2, api_name="/attention")
    assert named["weights"] == att["weights"]
    exp = client.predict(long, "", "pad", 8, "", "", None, True, 16, api_name="/explain")
    assert exp["windows"] == att["windows"] and len(exp["attributions"]) == len(doc["tokens"])
    assert len(exp["window_predictions"]) == exp["windows"] and exp["truncated"] is False
    with pytest.raises(Exception) as excinfo:
        client.predict(long, window=True, stride=16, window_index=99, api_name="/attention")
    assert "window must be a whole number from 0 to" in error_message(excinfo)
    with pytest.raises(Exception) as excinfo:
        client.predict("the film was good", window=True, window_index=1, api_name="/attention")
    assert "this text fits the model: it is read in 1 window" in error_message(excinfo)
    assert "Traceback" not in error_message(excinfo)


def test_attention_sizes_match_tokens(client):
    out = client.predict("the movie is great !", api_name="/attention")
    tokens = out["tokens"]
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    w = np.asarray(out["weights"])  # (L, H, T, T)
    assert w.shape == (2, 2, len(tokens), len(tokens))
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-4)
    one = np.asarray(client.predict("the movie is great !", "", 2, api_name="/attention")["weights"])
    np.testing.assert_allclose(one[0], w[1], atol=1e-6)


def test_explain_returns_delta_and_completes(client, signal):
    out = client.predict("the film was not good", "positive", "pad", 40, api_name="/explain")
    assert out["target"] == "positive"
    assert len(out["tokens"]) == len(out["attributions"])
    for key in ("delta", "relative_delta", "n_steps", "baseline"):
        assert key in out
    assert out["n_steps"] == 40 and out["baseline"] == "pad"
    # Integrated Gradients against the independent reference: delta = sum - (f(x) - f(baseline))
    check_json_against_reference(out, signal, "the film was not good", n_steps=40)


def test_summary(client):
    out = client.predict(api_name="/summary")
    assert out["architecture"] == "BertForSequenceClassification"
    assert out["labels"] == ["negative", "positive"]
    assert out["total_params"] == sum(c["params"] for c in out["components"])
    assert out["device"] == "cpu"


@pytest.mark.parametrize("endpoint", ["/predict", "/attention", "/explain"])
def test_empty_text_gives_a_clear_message(client, endpoint):
    with pytest.raises(Exception) as excinfo:
        client.predict("   ", api_name=endpoint)
    msg = error_message(excinfo)
    assert "empty" in msg and "enter a sentence" in msg
    assert "Traceback" not in msg


def test_too_long_text_and_bad_arguments(client):
    with pytest.raises(Exception) as excinfo:
        client.predict("a " * 15_000, api_name="/predict")
    assert "the limit is 20,000" in error_message(excinfo)
    with pytest.raises(Exception) as excinfo:
        client.predict("the film", "thrilled", api_name="/explain")
    assert "Unknown class 'thrilled'" in error_message(excinfo)
    with pytest.raises(Exception) as excinfo:
        client.predict("the film", "", "pad", 1, api_name="/explain")
    assert "n_steps must be" in error_message(excinfo)
    with pytest.raises(Exception) as excinfo:
        client.predict("the film", model="../../etc", api_name="/predict")
    assert "model" in error_message(excinfo).lower()


def test_xss_text_comes_back_as_text(client):
    out = client.predict(XSS, api_name="/predict")
    assert out["text"] == XSS
    tokens = client.predict(XSS, api_name="/explain")["tokens"]
    assert "<" in tokens and "img" in tokens


def _plot(value) -> dict:
    """gr.Plot output as returned by the client -> the plotly figure dict."""
    plot = value["plot"] if isinstance(value, dict) and "plot" in value else value
    return json.loads(plot) if isinstance(plot, str) else plot


def test_explain_with_a_tolerance_meets_it(client, signal):
    out = client.predict("the film was not good", "", "pad", 50, "", tolerance=0.01, api_name="/explain")
    assert out["relative_delta"] <= 0.01
    check_json_against_reference(out, signal, "the film was not good", tolerance=0.01)
    with pytest.raises(Exception) as excinfo:
        client.predict("the film", tolerance=3, api_name="/explain")
    assert "tolerance must be a relative delta" in error_message(excinfo)


def _analyze(client, model, text, skip_ig=False, window=False) -> list:
    """What the page's Analyze runs: /analyze, one streaming event that shows the prediction,
    attention and [CLS] lens at once, then adds Integrated Gradients and the [CLS] path. Returns
    [its first output with the prediction in it, its last output]."""
    from bertviz_app.ui.control_values import PREDICTED

    job = client.submit(model, text, "", PREDICTED, "pad", 20, True, 1, "mean of heads", False, False, True,
                        skip_ig, window, api_name="/analyze")
    last = job.result()
    outputs = job.outputs()
    first = next(o for o in outputs if any(isinstance(v, dict) and v.get("label") for v in o))
    return [first, last]


def test_analyze_shows_prediction_first_then_attributions_and_escapes(client, tiny_model_dir):
    first, last = _analyze(client, str(tiny_model_dir), XSS)
    assert isinstance(first, (list, tuple)) and len(first) >= 18
    first_text = [o for o in first if isinstance(o, str)]
    assert any("Integrated Gradients are being computed" in s for s in first_text)
    assert not any("bv-tokens" in s for s in first_text)  # no attribution yet
    assert any(isinstance(o, dict) and o.get("label") for o in first)  # the class probabilities are there
    html_out = [s for s in last if isinstance(s, str) and "bv-tokens" in s]
    assert html_out, "coloured-token HTML missing from the analyze outputs"
    for s in html_out:
        assert "<img" not in s and "&lt;" in s
    # the Predict tab was open, so no attention chart was drawn for the hidden Attention tab (it
    # is drawn when opened: tests/test_browser.py); the probability bar is the only chart sent
    figs = [_plot(o) for o in [*first, *last] if isinstance(o, dict) and "plot" in o]
    kinds = [f["data"][0].get("type") for f in figs if f and f.get("data")]
    assert kinds == ["bar"], kinds


def test_analyze_can_skip_integrated_gradients(client, tiny_model_dir):
    first, last = _analyze(client, str(tiny_model_dir), "the film was good", skip_ig=True)
    texts = [o for o in first if isinstance(o, str)]
    assert any("Integrated Gradients skipped" in s for s in texts)
    assert not any("bv-tokens" in s for s in texts)
    assert not any(isinstance(o, str) and "bv-tokens" in o for o in last)  # the IG step did nothing


def test_analyze_classifies_a_long_text_whole_when_asked(client, signal_model_dir):
    long = "the film was good . " * 40  # > 64 tokens of the tiny model
    model = str(signal_model_dir("bert"))  # the served model, which the /predict reference below reads
    cut, _ = _analyze(client, model, long, skip_ig=True)
    assert any(isinstance(o, str) and "the text was truncated" in o and "Classify a long text whole" in o for o in cut)
    whole, _ = _analyze(client, model, long, skip_ig=True, window=True)
    notice = [o for o in whole if isinstance(o, str) and "classified whole" in o]
    assert notice and "overlapping windows of 64 tokens" in notice[0] and "first 64 tokens" in notice[0], whole
    ref = client.predict(long, window=True, stride=16, api_name="/predict")  # a quarter of 64, as the page uses
    label = next(o for o in whole if isinstance(o, dict) and o.get("label"))
    assert label["label"] == ref["label"]
    assert f"**Long text, classified whole:** the prediction pools {ref['windows']} overlapping" in notice[0]


def test_folder_paths_refused_when_local_paths_are_off(tiny_model_dir, settings):
    import dataclasses

    other = str(tiny_model_dir.parent / ".." / tiny_model_dir.parent.name / "tiny-bert")
    with served_app(str(tiny_model_dir), settings=dataclasses.replace(settings, allow_local_paths=False)) as url:
        client = Client(url, verbose=False)
        with pytest.raises(Exception) as excinfo:
            client.predict("the film", model=other, api_name="/predict")
        assert "BERTVIZ_ALLOW_LOCAL_PATHS=0" in error_message(excinfo)
        status, out = post(url, "predict", {"text": "the film", "model": other})
        assert status == 404 and "BERTVIZ_ALLOW_LOCAL_PATHS=0" in out["error"], out
        # the operator's own model (the app's default) still works
        assert client.predict("the film", api_name="/predict")["label"] in ("negative", "positive")


def test_markdown_escaping_keeps_quotes_readable_and_html_inert():
    from bertviz_app.ui.markup import esc

    assert esc("it's \"fine\"") == "it's \"fine\""  # no &#x27; that would show up literally
    assert esc("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    assert esc("*bold* [link](x) `code`") == "\\*bold\\* \\[link\\](x) \\`code\\`"


# --------------------------------------------------------------------------- the plain JSON routes
def post(app_url: str, endpoint: str, body=None, raw: bytes | None = None) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(f"{app_url}v1/{endpoint}", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_json_routes_answer_like_the_gradio_endpoints(app_url, client, signal):
    status, out = post(app_url, "predict", {"text": "the film was good", "pair": "it is fun"})
    ref = client.predict("the film was good", "it is fun", api_name="/predict")
    assert status == 200 and out["label"] == ref["label"] and out["pair"] == "it is fun"
    for label, p in ref["scores"].items():
        assert out["scores"][label] == pytest.approx(p, rel=1e-5)
    status, exp = post(app_url, "explain", {"text": "the film was not good", "target": "positive", "n_steps": 40})
    assert status == 200 and exp["target"] == "positive" and exp["n_steps"] == 40
    check_json_against_reference(exp, signal, "the film was not good", n_steps=40)
    status, att = post(app_url, "attention", {"text": "the movie is great !", "layer": 2})
    w = np.asarray(att["weights"])
    assert status == 200 and w.shape == (1, 2, len(att["tokens"]), len(att["tokens"]))
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-4)
    status, summ = post(app_url, "summary", {})
    assert status == 200 and summ["labels"] == ["negative", "positive"]
    status, long = post(app_url, "predict", {"text": "the film was good . " * 40, "window": True, "stride": 16})
    assert status == 200 and long["truncated"] is False and long["windows"] > 1


@pytest.mark.parametrize("endpoint, body, raw, status, says", [
    ("predict", {"text": "   "}, None, 400, "empty"),
    ("predict", {"text": "a " * 15_000}, None, 400, "the limit is 20,000"),
    ("predict", {"txt": "good"}, None, 422, "text: missing (required); txt: unknown parameter. /v1/predict takes: "
                                            "text, pair"),
    ("predict", {"text": 5}, None, 422, "text: Input should be a valid string"),
    ("predict", {"text": "good", "model": "no-such-model"}, None, 404, "Unknown model 'no-such-model'"),
    ("predict", None, b"{not json", 400, "not valid JSON"),
    ("predict", None, b"[1, 2]", 400, "Send a JSON object"),
    ("predict", None, b'{"text": "' + b"a" * 1_100_000 + b'"}', 413, "send at most 1,000,000"),
    ("predict", {"text": "good", "window": True, "pool": "median"}, None, 400, "pool must be one of mean, max"),
    ("explain", {"text": "good", "target": "neutral"}, None, 400, "neutral"),
    ("explain", {"text": "good", "n_steps": 2.5}, None, 422, "n_steps: Input should be a valid integer"),
    ("attention", {"text": "good", "layer": 9}, None, 400, "layer must be 0 (all) or 1 to 2"),
    # "ig" is integrated_gradients (as in the CLI and explain-csv); an unknown name gets the valid ones
    ("compare", {"text": "good", "methods": "ig,flow"}, None, 400, "Unknown attribution method 'flow': choose one of "
                                                                  "integrated_gradients, gradient_x_input, saliency"),
    ("compare", {"text": "good", "methods": "magic"}, None, 400, "raw, norm, value_zeroing, alti, ig"),
    ("compare", {"text": "good", "methods": [1, 2]}, None, 422, "methods.0: Input should be a valid string"),
    ("compare", {"text": "good", "methods": "lime, lime"}, None, 400, "listed twice"),
    ("compare", {"text": "   "}, None, 400, "empty"),
])
def test_json_routes_refuse_bad_input_with_a_status_and_a_message(app_url, endpoint, body, raw, status, says):
    got_status, out = post(app_url, endpoint, body, raw)
    assert got_status == status, out
    assert set(out) == {"error"} and says in out["error"] and "Traceback" not in out["error"], out


def test_compare_route_scores_the_context_mixing_measures(app_url):
    status, out = post(app_url, "compare", {"text": "the film was not good", "methods": "ig, value_zeroing, alti"})
    assert status == 200, out
    assert list(out["methods"]) == ["integrated_gradients", "value_zeroing", "alti"]
    for name in ("value_zeroing", "alti"):
        m = out["methods"][name]
        assert "comprehensiveness" in m["faithfulness"] and m["delta"] is None and "does not apply" in m["completeness"]


def test_compare_sets_methods_side_by_side_on_one_class(app_url, client):
    body = {"text": "the film was not good", "methods": ["integrated_gradients", "occlusion", "saliency"],
            "target": "negative", "tolerance": 0.05}
    status, out = post(app_url, "compare", body)
    assert status == 200, out
    assert list(out["methods"]) == body["methods"] and out["most_faithful"] in body["methods"]
    n = len(out["tokens"])
    for m in out["methods"].values():
        assert m["target"] == "negative" and len(m["attributions"]) == n and m["seconds"] > 0
        f = m["faithfulness"]
        assert f["ks"] == [10, 20, 30, 40, 50] and -1 <= f["comprehensiveness"] <= 1 and -1 <= f["sufficiency"] <= 1
        assert f["comprehensiveness"] == pytest.approx(np.mean(f["comprehensiveness_k"]))
        assert -1 <= m["rollout_spearman"] <= 1
    ig = out["methods"]["integrated_gradients"]
    assert ig["relative_delta"] <= 0.05  # the tolerance reached Integrated Gradients
    rho = np.asarray(out["spearman"])
    assert rho.shape == (3, 3) and np.allclose(np.diag(rho), 1) and np.allclose(rho, rho.T)
    assert out["methods"]["occlusion"]["n_forward"] >= 4  # one pass per word, at least
    # the gradio endpoint answers the same (comma-separated names)
    ref = client.predict("the film was not good", "integrated_gradients, occlusion, saliency", "negative", "pad", 50,
                         "", "", 0.05, api_name="/compare")
    assert ref["most_faithful"] == out["most_faithful"]
    np.testing.assert_allclose(ref["spearman"], out["spearman"], atol=1e-6)


def test_json_routes_batch_concurrent_mixed_good_and_bad_texts(app_url):
    """32 callers at once through the JSON route: each good text gets exactly its own scores
    (as predicted alone), each bad one its own 400."""

    good = ["the film was good", "a tedious slog !", "it is not fun", "the movie is great , moving ."]
    jobs = good * 7 + ["   ", "a " * 15_000] * 2
    np.random.default_rng(2).shuffle(jobs)
    reference = {t: post(app_url, "predict", {"text": t})[1] for t in good}
    assert {r["label"] for r in reference.values()} == {"negative", "positive"}
    results = all_at_once(lambda i: post(app_url, "predict", {"text": jobs[i]}), len(jobs))
    for i, text in enumerate(jobs):
        status, got = results[i]
        if text in good:
            assert status == 200 and got["text"] == text, got
            for label, p in reference[text]["scores"].items():
                assert got["scores"][label] == pytest.approx(p, rel=1e-4)
        else:
            assert status == 400 and ("empty" in got["error"] or "20,000" in got["error"]), got


STEPS_TEXT = "the film was not good"


def _page_attribution(model: str):
    """The page's Analyze with its controls as they open (the step slider at 50, "Choose the steps
    automatically" ticked): the call every other default must match."""
    from bertviz_app.ui import analysis, control_values, model_loading

    lm = model_loading.load(model, model, Settings())
    rec = analysis.analyze_fast(lm, STEPS_TEXT, None)
    return analysis.analyze_ig(lm, rec, control_values.PREDICTED, "pad", 50, auto=True).attribution


def _explains_like(got: dict, page) -> None:
    import bertviz_app as core

    assert got["tolerance"] == page.tolerance == core.DEFAULT_TOLERANCE  # says it chose its steps, and for what
    assert got["n_steps"] == page.n_steps and got["target"] == page.target and got["tokens"] == list(page.tokens)
    gap = abs(page.f_x - page.f_baseline)
    assert gap > 0.05  # the trained fixture: attributions of order 0.1, so the comparisons below can fail
    np.testing.assert_allclose(got["attributions"], page.scores, rtol=0, atol=1e-5 * gap)
    assert got["delta"] == pytest.approx(page.delta, abs=1e-5 * gap)
    assert got["relative_delta"] <= core.DEFAULT_TOLERANCE


def test_library_cli_and_api_explain_with_the_pages_default_steps(app_url, client, signal_model_dir, signal,
                                                                  capsys):
    """One default everywhere: attribute(), `explain`, /v1/explain and the gradio /explain, given only
    the text, compute what the page computes (adaptive steps for a relative delta <= 0.05)."""
    import bertviz_app as core
    from bertviz_app.cli import main

    model = str(signal_model_dir("bert"))
    page = _page_attribution(model)
    check_json_against_reference(page.to_dict(), signal, STEPS_TEXT, tolerance=core.DEFAULT_TOLERANCE)
    _explains_like(core.attribute(core.load_model(model, device="cpu"), STEPS_TEXT).to_dict(), page)
    capsys.readouterr()
    assert main(["explain", STEPS_TEXT, "--model", model, "--json"]) == 0
    _explains_like(json.loads(capsys.readouterr().out), page)
    status, rest = post(app_url, "explain", {"text": STEPS_TEXT})
    assert status == 200, rest
    _explains_like(rest, page)
    _explains_like(client.predict(STEPS_TEXT, api_name="/explain"), page)
    status, cmp = post(app_url, "compare", {"text": STEPS_TEXT, "methods": ["integrated_gradients", "saliency"]})
    assert status == 200, cmp
    _explains_like(cmp["methods"]["integrated_gradients"], page)


def test_fifty_fixed_steps_stay_an_option_everywhere(app_url, client, signal_model_dir, signal, capsys):
    import bertviz_app as core
    from bertviz_app.cli import main

    model = str(signal_model_dir("bert"))
    ref = core.attribute(core.load_model(model, device="cpu"), STEPS_TEXT, n_steps=50)
    assert ref.n_steps == 50 and ref.tolerance is None
    check_json_against_reference(ref.to_dict(), signal, STEPS_TEXT, n_steps=50)
    answers = {}
    for argv in (["--steps", "50"], ["--n-steps", "50"], ["--tolerance", "0"]):  # 0: fixed, 50 unless --n-steps
        capsys.readouterr()
        assert main(["explain", STEPS_TEXT, "--model", model, "--json", *argv]) == 0
        answers[" ".join(argv)] = json.loads(capsys.readouterr().out)
    for body in ({"n_steps": 50}, {"tolerance": 0}, {"tolerance": 0, "n_steps": 50}):  # tolerance 0: as before
        status, answers[json.dumps(body)] = post(app_url, "explain", {"text": STEPS_TEXT, **body})
        assert status == 200
    answers["gradio"] = client.predict(STEPS_TEXT, "", "pad", 50, api_name="/explain")
    for name, got in answers.items():
        assert got["n_steps"] == 50 and got["tolerance"] is None, name
        np.testing.assert_allclose(got["attributions"], ref.scores, rtol=0, atol=1e-5 * abs(ref.f_x - ref.f_baseline),
                                   err_msg=name)


# --------------------------------------------------------------------------- the typed routes: schema and bad input
V1 = {"predict": {"text": "good"}, "attention": {"text": "good"}, "explain": {"text": "good", "n_steps": 4},
      "compare": {"text": "good", "methods": "saliency"}, "summary": {}, "delete_my_data": {},
      "evaluate": {"csv": "text,label\nthe film was good,positive\nthe film was bad,negative\n"},
      "tag": {"text": "good"}, "answer": {"question": "good", "context": "the film"},
      "explain_answer": {"question": "good", "context": "the film", "n_steps": 4}}
REQUIRED = {"predict": "text", "attention": "text", "explain": "text", "compare": "text", "evaluate": "csv",
            "tag": "text", "answer": "question", "explain_answer": "context"}
TYPED = {"predict": ("window", [1]), "attention": ("layer", "two"), "explain": ("tolerance", "small"),
         "compare": ("top_k", [3]), "summary": ("model", 7), "tag": ("window", [1]), "answer": ("n_best", [1]),
         "explain_answer": ("span", {"start": 1})}


def test_openapi_lists_every_v1_route_and_docs_answer(app_url):
    import urllib.request

    from bertviz_app.serve.server import SPECS

    with urllib.request.urlopen(f"{app_url}openapi.json", timeout=30) as r:
        schema = json.loads(r.read())
    assert {f"/v1/{name}" for name in SPECS} <= set(schema["paths"])
    assert set(SPECS) == set(V1)
    for name in SPECS:
        op = schema["paths"][f"/v1/{name}"]["post"]
        assert {"200", "422"} <= set(op["responses"])
    with urllib.request.urlopen(f"{app_url}docs", timeout=30) as r:
        assert r.status == 200 and b"swagger" in r.read().lower()


@pytest.mark.parametrize("endpoint", sorted(V1))
def test_each_v1_route_refuses_a_wrong_type_a_missing_and_an_unknown_field(app_url, endpoint):
    status, out = post(app_url, endpoint, {**V1[endpoint], "bogus": 1})
    assert status == 422 and "bogus: unknown parameter" in out["error"], out
    if endpoint in REQUIRED:
        status, out = post(app_url, endpoint, {k: v for k, v in V1[endpoint].items() if k != REQUIRED[endpoint]})
        assert status == 422 and f"{REQUIRED[endpoint]}: missing" in out["error"], out
    if endpoint in TYPED:
        field, value = TYPED[endpoint]
        status, out = post(app_url, endpoint, {**V1[endpoint], field: value})
        assert status == 422 and out["error"].startswith(f"{field}: "), out
    limit = 2_000_000 if endpoint == "evaluate" else 1_000_000  # evaluate: BERTVIZ_MAX_EVALUATE_MB
    status, out = post(app_url, endpoint, None, b'{"text": "' + b"a" * (limit + 100_000) + b'"}')
    assert status == 413 and f"send at most {limit:,}" in out["error"], out
    for got in (out,):
        assert set(got) == {"error"} and "Traceback" not in got["error"] and 'File "' not in got["error"]


def test_the_answer_to_an_unexpected_error_is_generic(app_url, monkeypatch):
    """An error the core did not foresee answers 500 with a generic message, no traceback."""
    from bertviz_app import service

    def broken(*args, **kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(service, "summary", broken)
    status, out = post(app_url, "summary", {})
    assert status == 500 and out == {"error": "Unexpected error while handling this request; the details are in "
                                              "the server log."}


def test_a_full_route_answers_busy_with_503():
    import anyio

    from bertviz_app.serve.server import Gate, ServerBusy

    gate = Gate("predict", limit=1, queue_size=1)
    gate.in_flight = 2

    async def call():
        await gate.run(lambda: 1)

    with pytest.raises(ServerBusy, match="The server is busy"):
        anyio.run(call)


def test_the_json_routes_import_neither_gradio_nor_plotly():
    import subprocess
    import sys

    code = ("import sys\nfrom bertviz_app.config import Settings\nfrom bertviz_app.serve.server import create_app\n"
            "app = create_app(Settings(), 'encoder', page=False)\n"
            "assert {r.path for r in app.routes} >= {'/v1/predict', '/docs', '/openapi.json'}\n"
            "print(sorted(m for m in ('gradio', 'plotly') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-2000:]


def test_one_analyze_click_is_one_queued_event(tiny_model_dir, settings):
    """Issue 19: Analyze (the button or Enter in the text) takes one place in the queue per click, not a
    chain of queued events (the quick part, then Integrated Gradients) that serialises the visitors."""
    from bertviz_app.ui import build_app

    demo = build_app(settings, str(tiny_model_dir))
    config = demo.get_config_file()
    deps = config["dependencies"]
    analyze = next(d for d in deps if d.get("api_name") == "analyze")
    first = analyze  # the event the click itself starts (an unqueued "click taken" touch may come first)
    while {e for _, e in first["targets"]} == {"then"}:
        first = next(d for d in deps if d["id"] == first["trigger_after"])
    triggers = {tuple(t) for t in first["targets"]}
    assert {e for _, e in triggers} == {"click", "submit"}, triggers
    # every event a click starts: the ones on the same triggers, and those chained after them
    chain = [d for d in deps if triggers & {tuple(t) for t in d["targets"]}]
    ids = {d["id"] for d in chain}
    while more := [d for d in deps if d.get("trigger_after") in ids and d["id"] not in ids]:
        chain += more
        ids |= {d["id"] for d in more}
    queued = [d for d in chain if d.get("queue") is not False]
    assert [d["id"] for d in queued] == [analyze["id"]], [(d["id"], d.get("api_name")) for d in chain]
    assert all(d.get("api_name") != "analyze_ig" for d in deps)
    assert demo.fns[analyze["id"]].concurrency_id == "heavy"


def test_an_async_handler_is_guarded_as_a_coroutine_with_the_same_messages():
    """gradio awaits a coroutine function on its loop: the guard of one must be one too, translating alike."""
    import asyncio
    import inspect

    import gradio as gr

    from bertviz_app.errors import InputError
    from bertviz_app.ui import guards

    async def refuses(text: str) -> dict:
        raise InputError("Text is empty or whitespace only: type a sentence.")

    async def answers(text: str) -> dict:
        return {"text": text}

    guarded = guards.guard(refuses)
    assert inspect.iscoroutinefunction(guarded) and inspect.signature(guarded) == inspect.signature(refuses)
    with pytest.raises(gr.Error, match="empty or whitespace only"):
        asyncio.run(guarded(" "))
    assert asyncio.run(guards.guard(answers)("good")) == {"text": "good"}  # positive control
    assert not inspect.iscoroutinefunction(guards.guard(lambda text: text))  # a plain handler stays plain
