"""Honest colours (one absolute scale, the too-small warning) and exported explanations
(standalone HTML, JSON round trip, the CLI's --html/--out)."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

import bertviz_app as core
from bertviz_app.results import Attribution, TokenInfo

XSS = "<img src=x>"


def fake_attr(change: float, shares=(0.0, 0.7, -0.2, 0.5, 0.0), f_baseline: float = 0.5) -> Attribution:
    """An attribution whose scores split ``change`` in the same proportions whatever its size."""
    tokens = ("[CLS]", "a", "bad", "film", "[SEP]")
    info = TokenInfo(tokens=tokens, offsets=((0, 0), (0, 1), (2, 5), (6, 10), (0, 0)),
                     sequence_ids=(None, 0, 0, 0, None), text="a bad film", pair=None, truncated=False)
    scores = np.asarray(shares, dtype=np.float32) * change
    return Attribution(info=info, scores=scores, target="positive", target_index=1, output="prob",
                       f_x=f_baseline + change, f_baseline=f_baseline, delta=0.0, n_steps=50, baseline="pad")


def alphas(page: str) -> list[float]:
    return [float(a) for a in re.findall(r'class="bv-tok" style="background: rgba\([\d, ]+, ([\d.]+)\);', page)]


# --------------------------------------------------------------------------- colour scale
@pytest.mark.parametrize("method", ["gradient_x_input", "occlusion", "lime"])
def test_per_text_scales_in_the_outputs_units_keep_a_near_constant_models_wiggles_pale(method):
    """A model that barely moves (scores of 1e-6) is not drawn at full strength by a per-text scale: full
    colour is never less than the smallest change worth reading, and the legend says so. The control: a
    text whose words move the output by 0.3 gets full colour at its largest word, and no floor note."""
    from dataclasses import replace

    flat, moving = replace(fake_attr(2e-6), method=method), replace(fake_attr(0.6), method=method)
    s_flat, s_moving = core.colour_scale(flat, min_change=0.05), core.colour_scale(moving, min_change=0.05)
    assert s_flat.below_floor and s_flat.full == pytest.approx(0.05)
    assert max(s_flat.alpha(v) for v in flat.scores) < 1e-3
    assert "stay pale" in s_flat.describe() and "0.05" in s_flat.describe()
    assert max(alphas(core.tokens_html(list(flat.tokens), flat.scores, np.zeros(5, bool), "positive", s_flat))) < 0.01
    assert not s_moving.below_floor and s_moving.full == pytest.approx(0.42, rel=1e-5)  # 0.7 x 0.6
    assert max(s_moving.alpha(v) for v in moving.scores) == pytest.approx(1.0)
    assert "stay pale" not in s_moving.describe()
    # saliency's gradient norms are not changes of the output: no floor, its own largest value is full colour
    sal = core.colour_scale(replace(fake_attr(2e-6), method="saliency"), min_change=0.05)
    assert not sal.below_floor and sal.full == pytest.approx(1.4e-6, rel=1e-3)


def test_tiny_change_is_pale_and_warned_large_change_is_strong():
    tiny, large = fake_attr(0.004), fake_attr(0.45)
    s_tiny, s_large = core.colour_scale(tiny, min_change=0.05), core.colour_scale(large, min_change=0.05)
    assert s_tiny.too_small and not s_large.too_small
    assert s_tiny.full == pytest.approx(0.05) and s_large.full == pytest.approx(0.45)
    # per-text scaling would draw both the same; the absolute scale does not
    assert max(s_tiny.alpha(v) for v in tiny.scores) < 0.1
    assert max(s_large.alpha(v) for v in large.scores) == pytest.approx(0.7, abs=1e-3)
    assert "only +0.0040" in core.change_warning(tiny, s_tiny)
    assert core.change_warning(large, s_large) is None

    pale = core.attribution_tokens_html(tiny, merge=False, min_change=0.05)
    strong = core.attribution_tokens_html(large, merge=False, min_change=0.05)
    assert "Warning" in pale and "Warning" not in strong
    assert max(alphas(pale)) < 0.1 < 0.5 < max(alphas(strong))


def test_scale_uses_the_setting_logit_units_and_a_printed_per_text_fallback():
    from bertviz_app.config import Settings

    assert core.colour_scale(fake_attr(0.1), min_change=0.2).too_small
    assert not core.colour_scale(fake_attr(0.1)).too_small  # the default, Settings.min_change = 0.05
    assert core.colour_scale(fake_attr(0.04)).too_small
    logit = fake_attr(0.5)
    logit = Attribution(**{**logit.__dict__, "output": "logit"})
    assert core.colour_scale(logit, min_change=0.05).threshold == pytest.approx(0.2)
    fallback = core.per_text_scale([0.01, -0.03])
    assert not fallback.absolute and fallback.full == pytest.approx(0.03) and "0.03" in fallback.describe()
    with pytest.raises(ValueError, match="BERTVIZ_MIN_CHANGE"):
        Settings(min_change=-1)
    with pytest.raises(ValueError, match="BERTVIZ_MIN_CHANGE"):
        Settings.from_env({"BERTVIZ_MIN_CHANGE": "-1"})


# --------------------------------------------------------------------------- HTML
@pytest.fixture(scope="module")
def explained(tiny):
    attr = core.attribute(tiny, f"the film {XSS} was great", n_steps=20)
    pred = core.predict(tiny, [f"the film {XSS} was great"])[0]
    return attr, pred


def test_html_is_standalone_escaped_and_lists_every_token(explained):
    attr, pred = explained
    page = core.explanation_html(attr, pred, model=f"tiny {XSS}", merge=False)
    assert "<img" not in page and "&lt;img" in page
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b", page, re.I)  # nothing loads or runs
    assert not re.search(r"https?:|//[\w.]|@import|url\(", page, re.I)  # no external reference of any kind
    for tok, v in zip(attr.tokens, attr.scores):
        assert f"<td>{__import__('html').escape(tok)}</td><td class='num'>{float(v):+.6f}</td>" in page
    for needed in ("Integrated Gradients", "f(x)", "f(baseline)", "Convergence delta", "Relative delta",
                   f"{attr.f_x:.6f}", f"{attr.f_baseline:.6f}", attr.target, "tiny &lt;img src=x&gt;"):
        assert needed in page
    assert len(alphas(page)) == len(attr.tokens)  # one coloured span per token
    assert "Warning" in page  # the random tiny model barely moves from the baseline


def test_json_round_trip(explained, tmp_path):
    attr, pred = explained
    path = core.write_json(tmp_path / "e.json", attr, pred, model="tiny")
    d = json.loads(path.read_text(encoding="utf-8"))
    assert d["attribution"]["tokens"] == list(attr.tokens) and d["prediction"]["label"] == pred.label
    for key, value in attr.to_dict().items():
        if isinstance(value, float):
            assert d["attribution"][key] == pytest.approx(value)
        else:
            assert d["attribution"][key] == value
    back = core.explanation_from_dict(d)
    assert back.model == "tiny" and back.attribution.tokens == attr.tokens
    np.testing.assert_allclose(back.attribution.scores, attr.scores, rtol=1e-6)
    assert back.attribution.info.offsets == attr.info.offsets and back.attribution.f_x == attr.f_x
    assert back.prediction.probs == pytest.approx(pred.probs) and back.prediction.label == pred.label
    assert core.explanation_html(back.attribution, back.prediction, "tiny") == core.explanation_html(attr, pred, "tiny")
    with pytest.raises(core.InputError, match="Not an explanation"):
        core.explanation_from_dict({"tokens": []})


def test_any_method_exports_with_its_name_and_faithfulness(tiny, tmp_path):
    text = "the film was great"
    a = core.explain(tiny, text, "occlusion")
    f = core.faithfulness(tiny, a)
    page = core.explanation_html(a, model="tiny", faith=f)
    assert "occlusion: the output" in page and "Integrated Gradients" not in page
    assert f"{f.comprehensiveness:+.4f}" in page and f"{f.sufficiency:+.4f}" in page
    assert "Sufficiency (ERASER AOPC)" in page
    d = json.loads(core.write_json(tmp_path / "o.json", a, model="tiny", faith=f).read_text(encoding="utf-8"))
    assert d["method"] == d["attribution"]["method"] == "occlusion"
    assert d["faithfulness"]["comprehensiveness_k"] == pytest.approx(list(f.comprehensiveness_k))
    back = core.explanation_from_dict(d)
    assert back.attribution.method == "occlusion" and back.attribution.n_forward == a.n_forward
    assert back.faithfulness.to_dict() == f.to_dict()
    assert core.explanation_html(back.attribution, model="tiny", faith=back.faithfulness) == page
    assert core.explanation_dict(core.attribute(tiny, text, n_steps=8))["faithfulness"] is None  # not asked for


def test_bad_paths_say_why(explained, tmp_path):
    attr, _ = explained
    with pytest.raises(core.InputError, match="does not exist"):
        core.write_html(tmp_path / "nowhere" / "e.html", attr)
    with pytest.raises(core.InputError, match="is a folder"):
        core.write_json(tmp_path, attr)
    a, b = core.export_files(tmp_path / "out", attr)
    assert a.suffix == ".html" and b.suffix == ".json" and core.export_files(tmp_path / "out", attr) == (a, b)


# --------------------------------------------------------------------------- where the UI colours tokens
def test_ui_colours_bars_and_path_on_the_absolute_scale(tiny):
    from types import SimpleNamespace

    from bertviz_app.ui import analysis, attribution_tab

    rec = analysis.analyze_all(tiny, "the film was great", None, None, "pad", 20)
    ui = SimpleNamespace(delta="delta", tokens="tokens", bar="bar", path="path", lens="lens")
    out = attribution_tab.render(ui, rec, merge=True)
    scale = core.colour_scale(rec.attribution)
    assert scale.too_small  # a random tiny model barely moves from the baseline
    assert "too small to read" in out["delta"] and "Warning" in out["tokens"]
    assert max(alphas(out["tokens"])) < 0.05
    bar_range = out["bar"].layout.yaxis.range
    assert bar_range[1] >= scale.full  # tiny bars are not stretched to fill the chart
    assert out["path"].data[0].zmax == pytest.approx(core.colour_scale(rec.path).full)


# --------------------------------------------------------------------------- CLI
def test_cli_explain_writes_the_same_html_and_json(capsys, tiny_model_dir, tmp_path):
    from bertviz_app.cli import main

    page, data = tmp_path / "why.html", tmp_path / "why.json"
    code = main(["explain", "the film was great", "--model", str(tiny_model_dir), "--n-steps", "20",
                 "--html", str(page), "--out", str(data)])
    out, err = capsys.readouterr()
    assert code == 0 and f"saved {page}" in err and f"saved {data}" in err
    assert "warning:" in out and "bars: 20 marks =" in out  # the tiny model's change is too small to read
    assert "faithfulness (ERASER AOPC, top 10, 20, 30, 40, 50%): comprehensiveness" in out
    d = json.loads(data.read_text(encoding="utf-8"))
    back = core.explanation_from_dict(d)
    assert d["model"] == str(tiny_model_dir) and d["prediction"]["text"] == "the film was great"
    assert back.faithfulness is not None and f"{back.faithfulness.comprehensiveness:+.4f}" in out
    assert page.read_text(encoding="utf-8") == core.explanation_html(back.attribution, back.prediction, d["model"],
                                                                     faith=back.faithfulness)


@pytest.mark.parametrize("flag", ["--html", "--out"])
def test_cli_bad_path_is_one_clear_line(capsys, tiny_model_dir, tmp_path, flag):
    from bertviz_app.cli import main

    code = main(["explain", "good film", "--model", str(tiny_model_dir), flag, str(tmp_path / "missing" / "x.html")])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: Cannot write") and "does not exist" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_ui_download_buttons_get_the_core_files(tiny, tmp_path, monkeypatch):
    from bertviz_app.ui import analysis, attribution_tab

    monkeypatch.setattr(attribution_tab, "export_folder", lambda: tmp_path / "exports")
    off = attribution_tab.export_files(None, True)
    assert [o["interactive"] for o in off] == [False, False, False, False]
    rec = analysis.analyze_all(tiny, "the film was great", None, None, "pad", 20)
    page, data, svg, png = attribution_tab.export_files(rec, True)
    assert page["interactive"] and data["interactive"] and svg["interactive"] and png["interactive"]
    assert os.path.basename(svg["value"]) == "attributions_integrated_gradients.svg"  # the download's name
    assert open(svg["value"], encoding="utf-8").read() == core.attribution_tokens_svg(
        rec.attribution, merge=True, min_change=rec.min_change)
    assert open(png["value"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert open(page["value"], encoding="utf-8").read() == core.explanation_html(
        rec.attribution, rec.prediction, rec.model, merge=True, faith=rec.faith)
    saved = json.load(open(data["value"], encoding="utf-8"))
    assert saved["prediction"]["label"] == rec.prediction.label
    assert saved["faithfulness"]["comprehensiveness"] == pytest.approx(rec.faith.comprehensiveness)
    import gradio as gr

    from bertviz_app.config import Settings
    from bertviz_app.ui import build_app

    assert isinstance(build_app(Settings(), str(tiny.name)), gr.Blocks)  # the buttons are wired into the app


def test_json_round_trip_keeps_how_the_steps_were_chosen(tiny, tmp_path):
    text = "the film was great"
    pred = core.predict(tiny, [text])[0]
    for attr, tolerance in ((core.attribute(tiny, text), core.DEFAULT_TOLERANCE),
                            (core.attribute(tiny, text, n_steps=8), None)):
        d = json.loads(core.write_json(tmp_path / "e.json", attr, pred, model="tiny").read_text(encoding="utf-8"))
        back = core.explanation_from_dict(d).attribution
        assert d["attribution"]["tolerance"] == back.tolerance == attr.tolerance == tolerance
        assert back.n_steps == attr.n_steps
        page = core.explanation_html(attr, pred, model="tiny")  # the HTML says it beside the steps
        said = (f"(n_steps {attr.n_steps}, chosen for a relative delta \u2264 {tolerance:g})" if tolerance
                else f"(n_steps {attr.n_steps}, fixed)")
        assert said in page
