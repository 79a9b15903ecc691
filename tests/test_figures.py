"""Figures for papers (issue 20): the coloured tokens as vector SVG and PNG (library and CLI), and
the file names the page's chart downloads get. The downloads themselves: tests/test_browser_figures.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import bertviz_app as core
from bertviz_app.errors import InputError
from bertviz_app.interpret.export import MAX_ALPHA
from bertviz_app.results import Attribution, TokenInfo

SVG = "{http://www.w3.org/2000/svg}"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HOSTILE = ("a", "<b>bold</b>", "fish & chips", 'say "hi"', "it's", "]]>", "naïve", "映画", "\x07bell")


def attr_of(tokens: tuple[str, ...], scores, method: str = "integrated_gradients") -> Attribution:
    """An attribution over ``tokens`` (each one word) between [CLS] and [SEP], f(x) - f(baseline) = 0.6."""
    text = " ".join(tokens)
    offsets, start = [], 0
    for t in tokens:
        start = text.index(t, start)
        offsets.append((start, start + len(t)))
        start += len(t)
    info = TokenInfo(tokens=("[CLS]", *tokens, "[SEP]"), offsets=((0, 0), *offsets, (0, 0)),
                     sequence_ids=(None, *[0] * len(tokens), None), text=text, pair=None, truncated=False)
    return Attribution(info=info, scores=np.asarray(scores, dtype=np.float32), target="pos <&> itive",
                       target_index=1, output="prob", f_x=0.9, f_baseline=0.3, delta=0.0, n_steps=50, baseline="pad",
                       method=method)


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg.encode("utf-8"))
    assert root.tag == f"{SVG}svg"
    return root


def token_groups(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == "bv-tok"]


def test_coloured_token_svg_parses_and_holds_every_token_as_given():
    scores = np.linspace(-0.3, 0.5, len(HOSTILE) + 2)
    a = attr_of(HOSTILE, scores)
    svg = core.attribution_tokens_svg(a, merge=False)
    root = parse(svg)
    groups = token_groups(root)
    shown = [g.find(f"{SVG}text").text for g in groups]
    expected = ["[CLS]", *HOSTILE, "[SEP]"]
    expected[-2] = "\ufffdbell"  # a control character XML cannot hold becomes U+FFFD; the rest comes back as given
    assert shown == expected
    # escaped, never raw markup: the only elements are the writer's own
    assert "<b>" not in svg and "&lt;b&gt;bold&lt;/b&gt;" in svg and "fish &amp; chips" in svg
    assert "say &quot;hi&quot;" in svg and "it&#39;s" in svg
    assert {e.tag.removeprefix(SVG) for e in root.iter()} <= {"svg", "title", "rect", "text", "g"}
    assert not list(root.iter(f"{SVG}image"))  # vector: no embedded bitmap
    # the target's name in the legend and the title is escaped too, and comes back as given
    texts = " ".join(e.text or "" for e in root.iter(f"{SVG}text"))
    assert "pushes towards pos <&> itive" in texts
    # each token's tooltip gives its value, as the HTML view's hover does
    assert groups[2].find(f"{SVG}title").text == f"<b>bold</b>: {scores[2]:+.4f}"


def test_svg_colours_are_the_html_views_colours():
    a = attr_of(("a", "bad", "film", "indeed"), [0.0, 0.05, 0.42, -0.12, 0.3, 0.0])
    for merge in (False, True):
        page = core.attribution_tokens_html(a, merge=merge)
        html_colours = re.findall(r'class="bv-tok" style="background: rgba\(([\d, ]+), ([\d.]+)\);', page)
        groups = token_groups(parse(core.attribution_tokens_svg(a, merge=merge)))
        svg_colours = []
        for g in groups:
            rect = g.find(f"{SVG}rect")
            rgb = re.fullmatch(r"rgb\(([\d, ]+)\)", rect.get("fill")).group(1)
            svg_colours.append((rgb, float(rect.get("fill-opacity", "1"))))
        assert len(svg_colours) == len(groups) == len(html_colours[: len(groups)])
        for (rgb, alpha), (h_rgb, h_alpha) in zip(svg_colours, html_colours):
            assert rgb == h_rgb and alpha == pytest.approx(float(h_alpha), abs=0.006)
    scale = core.colour_scale(a)
    strongest = max(token_groups(parse(core.attribution_tokens_svg(a, merge=False))),
                    key=lambda g: float(g.find(f"{SVG}rect").get("fill-opacity", "0")))
    assert strongest.find(f"{SVG}text").text == "bad"
    assert float(strongest.find(f"{SVG}rect").get("fill-opacity")) == pytest.approx(
        scale.alpha(0.42) * MAX_ALPHA, abs=0.006)


def test_unsigned_methods_are_blue_and_tokens_wrap_into_lines():
    words = tuple(f"word{i}" for i in range(60))
    a = attr_of(words, np.abs(np.sin(np.arange(62))) * 0.1, method="saliency")
    root = parse(core.attribution_tokens_svg(a, merge=False))
    rects = [g.find(f"{SVG}rect") for g in token_groups(root)]
    assert {r.get("fill") for r in rects} == {"rgb(31, 119, 180)"}
    lines = sorted({float(r.get("y")) for r in rects})
    assert len(lines) >= 3  # 62 tokens do not fit one line
    width = float(root.get("width"))
    assert all(float(r.get("x")) + float(r.get("width")) <= width for r in rects)


def test_png_and_files_from_the_library(tmp_path):
    a = attr_of(("a", "great", "film"), [0.0, 0.05, 0.5, 0.1, 0.0])
    png = core.attribution_tokens_png(a)
    assert png.startswith(PNG_SIGNATURE)
    w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert w > 2 * h > 0  # a wide figure, drawn at twice its SVG size
    assert core.write_svg(tmp_path / "f.svg", a).read_text(encoding="utf-8") == core.attribution_tokens_svg(a)
    assert core.write_png(tmp_path / "f.png", a).read_bytes().startswith(PNG_SIGNATURE)
    with pytest.raises(InputError, match="does not exist"):
        core.write_png(tmp_path / "missing" / "f.png", a)
    svg, png_path = core.figure_files(tmp_path / "exports", a)
    assert svg.name == "attributions_integrated_gradients.svg"
    assert png_path.name == "attributions_integrated_gradients.png"
    assert core.figure_files(tmp_path / "exports", a) == (svg, png_path)  # the same figure twice: one pair of files


def test_cli_explain_writes_svg_and_png(tiny_model_dir, tmp_path, capsys):
    from bertviz_app.cli import main

    svg, png = tmp_path / "why.svg", tmp_path / "why.png"
    code = main(["explain", "the film was great & fun", "--model", str(tiny_model_dir), "--n-steps", "8",
                 "--svg", str(svg), "--png", str(png)])
    assert code == 0
    root = parse(svg.read_text(encoding="utf-8"))
    assert [g.find(f"{SVG}text").text for g in token_groups(root)] == ["[CLS]", "the", "film", "was", "great",
                                                                       "&", "fun", "[SEP]"]
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    assert f"saved {svg}" in capsys.readouterr().err
    # a bad path fails before the attribution, with one clear line
    assert main(["explain", "x", "--model", str(tiny_model_dir), "--svg", str(tmp_path / "no" / "f.svg")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err


# --------------------------------------------------------------------------- the page's chart downloads
def test_every_chart_names_its_download():
    pytest.importorskip("plotly")
    from bertviz_app.ui import plots

    toks = ["[CLS]", "a", "film", "[SEP]"]
    m = np.full((4, 4), 0.25)
    name = lambda fig: fig.layout.meta["download"]  # noqa: E731
    assert name(plots.attention_heatmap(m, toks, title="Layer 3, head 2")) == "attention_layer3_head2"
    assert name(plots.attention_heatmap(m, toks, title="Layer 1, mean of heads")) == "attention_layer1_mean_of_heads"
    assert name(plots.rollout_heatmap(m, toks, layer=4)) == "attention_rollout_layer4"
    assert name(plots.attention_overview(np.full((2, 2, 4, 4), 0.25), toks)[0]) == "attention_overview"
    assert name(plots.prob_bar(["neg", "pos"], [0.2, 0.8])) == "probabilities"
    assert name(plots.attribution_bar(toks, [0, 0.1, -0.1, 0], title="Attribution to “pos” by token")) == (
        "attribution_to_pos_by_token")
    assert name(plots.cls_path_heatmap(np.zeros((3, 4)), ["emb", "L1", "L2"], toks)) == "cls_path_attribution_by_depth"
    assert plots.file_name("<script>/../../etc") == "script_etc"  # safe as a file name


def test_plot_helper_adds_svg_and_png_buttons():
    pytest.importorskip("gradio")
    import gradio as gr

    from bertviz_app.ui import figures

    with gr.Blocks() as demo:
        figures.plot(label="Attention", elem_id="bv-x")
    config = demo.get_config_file()
    ids = {c["id"]: c["props"].get("elem_id") for c in config["components"]}
    js = {ids[d["targets"][0][0]]: d["js"] for d in config["dependencies"]}
    assert js == {"bv-x-svg": "() => { window.bvFigure && window.bvFigure('bv-x', 'svg'); }",
                  "bv-x-png": "() => { window.bvFigure && window.bvFigure('bv-x', 'png'); }"}
    assert "window.bvFigure" in figures.HEAD and figures.HEAD.startswith("<script>")


def test_weight_heatmaps_start_their_colour_scale_at_zero():
    """Plotly ignores zmin without zmax and stretches the data's own range over the scale: weights
    of 0.062 and 0.063 would be drawn white and dark blue. The scale runs from 0 to the largest weight."""
    pytest.importorskip("plotly")
    from bertviz_app.ui import plots

    toks = ["[CLS]", "a", "film", "[SEP]"]
    m = np.array([[0.249, 0.25, 0.251, 0.25]] * 4)
    for fig in (plots.attention_heatmap(m, toks), plots.rollout_heatmap(m, toks, layer=1),
                plots.cls_rows_heatmap(m, toks)):
        trace = fig.data[0]
        assert trace.zmin == 0.0 and trace.zmax == pytest.approx(0.251, abs=1e-4)
    assert plots.attention_heatmap(np.zeros((4, 4)), toks).data[0].zmax == 1.0  # nothing to scale to
