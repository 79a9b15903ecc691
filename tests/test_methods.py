"""Attribution methods besides Integrated Gradients (methods.py), their comparison, and ERASER
faithfulness (faithfulness.py), on the tiny BERT and a tiny RoBERTa."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import bertviz_app as bv
from bertviz_app import InputError
from bertviz_app.config import Settings
from bertviz_app.interpret.faithfulness_eval import faithfulness
from bertviz_app.interpret.methods import METHODS, MIXING_METHODS, compare_methods, explain, spearman, top_k_overlap
from bertviz_app.interpret.words import merge_scores, word_groups

SENTENCE = "a gorgeous, moving film!"
SIMPLE = "the film was not good"  # one token per word
FAST = dict(n_steps=8, n_samples=32)
ZERO_ON_SPECIALS = ("integrated_gradients", "occlusion", "kernel_shap", "lime")


def _special(a) -> np.ndarray:
    return np.array([s is None for s in a.info.sequence_ids])


@pytest.mark.parametrize("method", METHODS)
def test_each_method_scores_every_token(tiny, method):
    a = explain(tiny, SENTENCE, method, **FAST)
    assert a.method == method and a.scores.shape == (len(a.tokens),) and np.isfinite(a.scores).all()
    assert a.target in tiny.labels and 0 <= a.f_x <= 1
    assert a.n_forward >= 1 and a.seconds > 0
    if method in ZERO_ON_SPECIALS:
        assert np.all(a.scores[_special(a)] == 0)
    if method == "saliency":
        assert np.all(a.scores >= 0)
    d = a.to_dict()
    assert d["method"] == method and len(d["attributions"]) == len(a.tokens)
    json.dumps(d)


def test_integrated_gradients_through_methods_is_attribute(tiny):
    a = explain(tiny, SENTENCE, "integrated_gradients", n_steps=8)
    b = bv.attribute(tiny, SENTENCE, n_steps=8)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-7)
    assert a.method == b.method == "integrated_gradients" and a.n_backward == 8
    assert "seconds" in a.to_dict() and "seconds" not in b.to_dict()  # attribute() measures no cost
    assert b.to_dict()["method"] == "integrated_gradients"


def _hf_gradient(lm, text: str, target: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient of the target's probability w.r.t. the word vectors, through the model's own forward."""
    enc = lm.tokenizer(text, return_tensors="pt")
    model = lm.fp32_model()
    emb = model.bert.embeddings.word_embeddings(enc["input_ids"]).detach().requires_grad_(True)  # (1, T, D)
    logits = model(inputs_embeds=emb, attention_mask=enc["attention_mask"],
                   token_type_ids=enc["token_type_ids"]).logits  # (1, C)
    (grad,) = torch.autograd.grad(torch.softmax(logits, -1)[0, target], emb)
    return grad[0], emb[0].detach()  # (T, D) each


def test_a_tolerance_reaches_integrated_gradients_in_methods_and_compare(tiny):
    a = explain(tiny, SENTENCE, "integrated_gradients", tolerance=0.01)
    b = bv.attribute(tiny, SENTENCE, tolerance=0.01)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-7)
    # the adaptive rule's stop: relative delta <= tolerance, or |delta| <= 1e-6 on a change this small
    assert abs(a.delta) <= max(0.01 * abs(a.f_x - a.f_baseline), 1e-6) and a.n_backward == b.n_steps
    c = compare_methods(tiny, SENTENCE, methods=["integrated_gradients", "saliency"], tolerance=0.01)
    np.testing.assert_allclose(c.attributions[0].scores, b.scores, atol=1e-7)


def test_gradient_x_input_and_saliency_match_the_models_own_gradient(tiny):
    gxi = explain(tiny, SENTENCE, "gradient_x_input")
    sal = explain(tiny, SENTENCE, "saliency")
    grad, emb = _hf_gradient(tiny, SENTENCE, gxi.target_index)
    np.testing.assert_allclose(gxi.scores, (grad * emb).sum(-1).numpy(), rtol=1e-4, atol=1e-8)
    np.testing.assert_allclose(sal.scores, grad.norm(dim=-1).numpy(), rtol=1e-4, atol=1e-8)
    assert gxi.n_backward == sal.n_backward == 1


def test_occlusion_of_a_word_is_the_measured_probability_drop(tiny):
    a = explain(tiny, SENTENCE, "occlusion")
    groups = word_groups(a.info)
    per_word = merge_scores(a.scores, groups)
    enc = tiny.tokenizer(SENTENCE, return_tensors="pt")
    model = tiny.fp32_model()
    for w, grp in enumerate(groups.groups):
        if a.info.sequence_ids[grp[0]] is None:
            continue
        ids = enc["input_ids"].clone()
        ids[0, list(grp)] = tiny.tokenizer.pad_token_id
        with torch.no_grad():
            p = torch.softmax(model(input_ids=ids, attention_mask=enc["attention_mask"]).logits, -1)[0, a.target_index]
        assert per_word[w] == pytest.approx(a.f_x - float(p), abs=1e-6)
    assert a.n_steps == len([g for g in groups.groups if a.info.sequence_ids[g[0]] is not None])


@pytest.mark.parametrize("method", ["kernel_shap", "lime"])
def test_sampling_methods_are_reproducible_with_their_seed(tiny, method):
    a = explain(tiny, SENTENCE, method, n_samples=32, seed=3)
    b = explain(tiny, SENTENCE, method, n_samples=32, seed=3)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.n_steps == 32
    # each word's pieces share its score
    pieces = [g for g in word_groups(a.info).groups if len(g) > 1]
    for g in pieces:
        assert len(set(a.scores[list(g)].tolist())) == 1


def test_faithfulness_bounds_and_the_100_percent_cases(tiny):
    a = explain(tiny, SENTENCE, "occlusion")
    f = faithfulness(tiny, a)
    assert f.ks == (10, 20, 30, 40, 50) and len(f.comprehensiveness_k) == len(f.sufficiency_k) == 5
    assert -1 <= f.comprehensiveness <= 1 and -1 <= f.sufficiency <= 1
    assert f.comprehensiveness == pytest.approx(np.mean(f.comprehensiveness_k))
    assert "removing the 20% top-ranked tokens" in f.reading and a.target in f.reading
    whole = faithfulness(tiny, a, ks=(100,))
    assert whole.sufficiency_k[0] == pytest.approx(0.0, abs=1e-6)  # keeping every token changes nothing
    base = bv.attribute(tiny, SENTENCE, n_steps=4, target=a.target_index)
    assert whole.comprehensiveness_k[0] == pytest.approx(a.f_x - base.f_baseline, abs=1e-5)  # all -> baseline
    json.dumps(f.to_dict())


def test_occlusion_ranking_is_at_least_as_comprehensive_as_any_other_at_one_token(tiny):
    """With one token per word, removing occlusion's top token removes the largest measured drop:
    no other ranking (reversed, random) can beat it at that k."""
    occ = explain(tiny, SIMPLE, "occlusion")
    n = int((~_special(occ)).sum())
    k = (100 // n,)  # one token
    best = faithfulness(tiny, occ, ks=k)
    assert best.n_tokens == (1,)
    assert best.comprehensiveness_k[0] == pytest.approx(float(occ.scores.max()), abs=1e-6)
    rng = np.random.default_rng(0)
    for scores in [-occ.scores, rng.normal(size=occ.scores.shape)]:
        other = faithfulness(tiny, bv.Attribution(**{**occ.__dict__, "scores": scores.astype(np.float32)}), ks=k)
        assert other.comprehensiveness_k[0] <= best.comprehensiveness_k[0] + 1e-6


@pytest.fixture(scope="module")
def sentiment(tmp_path_factory):
    """The tiny BERT trained to read one sentiment word per sentence (conftest.make_sentiment_model)."""
    from conftest import make_sentiment_model

    return bv.load_model(str(make_sentiment_model(tmp_path_factory.mktemp("meth") / "sentiment")), device="cpu")


@pytest.mark.parametrize("method", ["integrated_gradients", "occlusion", "kernel_shap", "lime"])
def test_a_faithful_ranking_beats_random_rankings(sentiment, method):
    """On a model that reads one sentiment word, removing the top-ranked tokens of a faithful method
    costs the prediction far more than removing random ones, and keeping them keeps it."""
    a = explain(sentiment, "the film was awful", method, n_steps=16, n_samples=64)
    assert a.target == "negative" and a.f_x > 0.9
    assert a.tokens[int(np.argmax(a.scores))] == "awful"
    f = faithfulness(sentiment, a)
    rng = np.random.default_rng(0)
    rand = [faithfulness(sentiment, bv.Attribution(**{**a.__dict__, "scores": rng.normal(size=len(a.tokens))}))
            for _ in range(5)]
    assert f.comprehensiveness > np.mean([r.comprehensiveness for r in rand]) + 0.3
    assert f.sufficiency < np.mean([r.sufficiency for r in rand]) - 0.3
    assert f.comprehensiveness > 0.5 and "the explanation points at what the model uses" in f.reading


def _with_comprehensiveness(c, values):
    """``c`` with its methods' AOPC comprehensiveness set to ``values`` (everything else as computed)."""
    faith = tuple(dataclasses.replace(f, comprehensiveness=v) for f, v in zip(c.faithfulness, values))
    return dataclasses.replace(c, faithfulness=faith)


def test_compare_names_the_most_faithful_method(sentiment):
    """Saliency and occlusion both rank "awful" first on this model: their AOPC agree up to float
    rounding (4e-6 apart, in either order depending on the CPU), which the comparison calls a tie."""
    c = compare_methods(sentiment, "the film was awful", methods=["saliency", "occlusion", "gradient_x_input"],
                        n_samples=32)
    sal, occ = c.faithfulness[0].comprehensiveness, c.faithfulness[1].comprehensiveness
    assert sal == pytest.approx(occ, abs=1e-4) and sal > 0.9
    assert c.most_faithful_methods[:2] == ("saliency", "occlusion") and c.most_faithful == "saliency"
    assert "are tied as the most faithful here" in c.reading and "negative" in c.reading
    assert c.reading.startswith("saliency (gradient norm) and occlusion (per word)")  # the page's names, not ids
    d = c.to_dict()
    assert d["most_faithful"] == "saliency" and d["most_faithful_methods"][:2] == ["saliency", "occlusion"]
    assert d["faithfulness_tie"] == bv.FAITHFULNESS_TIE


def test_a_tie_in_faithfulness_is_said_and_a_clear_lead_is_not(sentiment):
    from bertviz_app.ui import attribution_tab

    c = compare_methods(sentiment, "the film was awful", methods=["saliency", "occlusion", "gradient_x_input"],
                        n_samples=32)
    tol = bv.FAITHFULNESS_TIE
    exact = _with_comprehensiveness(c, [0.6, 0.6, 0.2])
    assert exact.most_faithful_methods == ("saliency", "occlusion") and exact.most_faithful == "saliency"
    near = _with_comprehensiveness(c, [0.6, 0.6 + 0.9 * tol, 0.2])  # occlusion ahead by less than the tolerance
    assert near.most_faithful_methods == ("saliency", "occlusion") and near.most_faithful == "saliency"
    assert near.reading.startswith("saliency (gradient norm) and occlusion (per word) are tied as the most faithful")
    assert "gradient × input +0.20" in near.reading
    starred = list(attribution_tab.compare_table(near)["method"])
    assert starred == ["saliency (gradient norm) ★ (tied)", "occlusion (per word) ★ (tied)", "gradient × input"]
    three = _with_comprehensiveness(c, [0.6, 0.6, 0.6 - 0.5 * tol])
    assert three.most_faithful_methods == ("saliency", "occlusion", "gradient_x_input")
    assert three.reading.startswith("saliency (gradient norm), occlusion (per word) and gradient × input are tied")
    clear = _with_comprehensiveness(c, [0.6, 0.6 + 2 * tol, 0.2])  # a lead larger than the tolerance
    assert clear.most_faithful_methods == ("occlusion",) and clear.most_faithful == "occlusion"
    assert clear.reading.startswith("occlusion (per word) is the most faithful here") and "tied" not in clear.reading
    starred = list(attribution_tab.compare_table(clear)["method"])
    assert starred == ["saliency (gradient norm)", "occlusion (per word) ★", "gradient × input"]
    low = _with_comprehensiveness(c, [0.01, 0.01, 0.0])
    assert low.reading.startswith("no method's top-ranked tokens matter much")
    assert "saliency (gradient norm) and" in low.reading


def test_compare_methods_side_by_side(tiny):
    c = compare_methods(tiny, SENTENCE, **FAST)
    m = len(METHODS)
    assert c.methods == METHODS and len(c.attributions) == len(c.faithfulness) == m
    assert c.spearman.shape == c.top_k_overlap.shape == (m, m)
    np.testing.assert_allclose(np.diag(c.spearman), 1.0)
    np.testing.assert_allclose(c.spearman, c.spearman.T)
    assert np.all((c.top_k_overlap >= 0) & (c.top_k_overlap <= 1))
    assert c.rollout.shape == (len(c.tokens),) and c.rollout_spearman.shape == (m,)
    assert len({a.target_index for a in c.attributions}) == 1
    assert c.most_faithful in METHODS
    json.dumps(c.to_dict())


def test_a_repeated_explanation_comes_from_the_models_cache(tiny, monkeypatch):
    monkeypatch.setattr(tiny, "memo_size", 8)
    a = explain(tiny, SENTENCE, "occlusion")
    assert explain(tiny, SENTENCE, "occlusion") is a
    assert explain(tiny, SENTENCE, "occlusion", baseline="mask") is not a
    assert explain(tiny, SENTENCE, "kernel_shap", n_samples=16, seed=1) is not explain(
        tiny, SENTENCE, "kernel_shap", n_samples=16, seed=2)


def test_rank_helpers():
    x = np.array([0.3, 0.1, 0.2, 0.5])
    assert spearman(x, x) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert np.isnan(spearman(x, np.ones(4)))
    assert top_k_overlap(x, x, 2) == 1.0 and top_k_overlap(x, -x, 2) == 0.0


def test_unknown_method_lists_the_methods(tiny):
    with pytest.raises(InputError) as err:
        explain(tiny, SENTENCE, "shapley_magic")
    assert all(m in str(err.value) for m in METHODS)
    with pytest.raises(InputError, match="kernel_shap"):
        compare_methods(tiny, SENTENCE, methods=["saliency", "lime!"])
    with pytest.raises(InputError, match="twice"):
        compare_methods(tiny, SENTENCE, methods=["saliency", "saliency"])
    with pytest.raises(InputError, match="n_samples"):
        explain(tiny, SENTENCE, "kernel_shap", n_samples=1)


@pytest.mark.parametrize("method", ["occlusion", "kernel_shap", "lime"])
def test_per_word_methods_refuse_a_text_that_would_take_too_long(tiny, monkeypatch, method):
    # a result cached by an earlier test would (rightly) come back at no cost: compute afresh here
    # (the shared `tiny` can miss conftest's cache switch-off when the model cache was cleared)
    tiny = tiny.with_settings(memo_size=0, max_method_seconds=1e-9)
    with pytest.raises(InputError) as err:
        explain(tiny, SENTENCE, method)
    msg = str(err.value)
    assert method in msg and "4 words" in msg and "BERTVIZ_MAX_METHOD_SECONDS" in msg and "gradient_x_input" in msg
    explain(tiny, SENTENCE, "gradient_x_input")  # the cheap one still runs
    with pytest.raises(InputError, match=method):  # refused before the cheap methods run
        compare_methods(tiny, SENTENCE, methods=["gradient_x_input", method])


def test_settings_refuse_a_nonpositive_method_limit():
    from bertviz_app.config import Settings

    with pytest.raises(ValueError, match="BERTVIZ_MAX_METHOD_SECONDS"):
        Settings(max_method_seconds=0)
    with pytest.raises(ValueError, match="BERTVIZ_MAX_METHOD_SECONDS"):
        Settings.from_env({"BERTVIZ_MAX_METHOD_SECONDS": "0"})


@pytest.fixture(scope="module")
def roberta(tmp_path_factory):
    from test_families import build_family_model

    return bv.load_model(str(build_family_model("roberta", tmp_path_factory.mktemp("meth") / "roberta")),
                         device="cpu")


def test_another_family(roberta):
    c = compare_methods(roberta, SENTENCE, **FAST)
    for a in c.attributions:
        assert a.scores.shape == (len(a.tokens),) and a.tokens[0] == "<s>"
        if a.method in ZERO_ON_SPECIALS:
            assert np.all(a.scores[_special(a)] == 0)
    assert all(-1 <= f.comprehensiveness <= 1 and -1 <= f.sufficiency <= 1 for f in c.faithfulness)
    assert faithfulness(roberta, c.attributions[0], ks=(100,)).sufficiency_k[0] == pytest.approx(0.0, abs=1e-6)


def _cli(capsys, *argv):
    from bertviz_app.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_method_and_compare(capsys, tiny_model_dir):
    model = ("--model", str(tiny_model_dir))
    code, out, _ = _cli(capsys, "explain", SENTENCE, *model, "--method", "occlusion", "--json")
    r = json.loads(out)
    assert code == 0 and r["method"] == "occlusion" and len(r["attributions"]) == len(r["tokens"])
    code, out, _ = _cli(capsys, "explain", SENTENCE, *model, "--method", "saliency")
    assert code == 0 and out.startswith("saliency, target") and "backward" in out
    code, out, _ = _cli(capsys, "explain", SENTENCE, *model, "--compare", "--n-steps", "8", "--n-samples", "32",
                        "--json")
    r = json.loads(out)
    assert code == 0 and set(r["methods"]) == set(METHODS) and r["most_faithful"] in METHODS
    assert all("comprehensiveness" in m["faithfulness"] for m in r["methods"].values())
    code, out, _ = _cli(capsys, "explain", SENTENCE, *model, "--compare", "--methods", "saliency,occlusion")
    assert code == 0 and "comprehensiveness" in out and ("most faithful here" in out or "no method" in out)
    code, _, err = _cli(capsys, "explain", SENTENCE, *model, "--method", "magic")
    assert code == 2 and "kernel_shap" in err and err.count("\n") == 1


def test_attributions_tab_shows_faithfulness_and_the_methods_side_by_side(sentiment, monkeypatch, request):
    from types import SimpleNamespace

    from bertviz_app.ui import analysis, attribution_tab, control_values

    # the UI loads the model by name (load_model's cached handle, this one): its cache as served, of 8
    monkeypatch.setattr(sentiment, "memo_size", 8)  # the IG shown is reused by the comparison
    sentiment.clear_memo()
    request.addfinalizer(sentiment.clear_memo)  # dropped after the test

    rec = analysis.analyze_all(sentiment, "the film was awful", None, None, "pad", 20, auto=True)
    assert rec.faith is not None and rec.faith.method == "integrated_gradients"
    cmp = SimpleNamespace(shown="shown", reading="reading", table="table", tokens="tokens", heat="heat", agree="agree")
    ui = SimpleNamespace(delta="delta", tokens="tokens", bar="bar", path="path", lens="lens", cmp=cmp)
    out = attribution_tab.render(ui, rec, merge=True)
    assert f"comprehensiveness **{rec.faith.comprehensiveness:+.3f}**" in out["delta"]
    assert f"sufficiency **{rec.faith.sufficiency:+.3f}**" in out["delta"]

    methods = ["integrated_gradients", "saliency", "occlusion"]
    c = attribution_tab.compare(rec, methods, control_values.PREDICTED, "pad", 20, True, 2, Settings())
    assert c.methods == tuple(methods) and c.attributions[0].target == rec.attribution.target
    np.testing.assert_allclose(c.attributions[0].scores, rec.attribution.scores, atol=1e-7)  # the IG shown above
    table = attribution_tab.compare_table(c)
    assert len(table) == 3 and table.iloc[0]["seconds"] == "cached"  # IG came from the model's cache
    starred = [m for m in table["method"] if "★" in m]
    star = " ★" if len(c.most_faithful_methods) == 1 else " ★ (tied)"
    assert starred == [attribution_tab.label(m) + star for m in c.most_faithful_methods]
    assert list(table["comprehensiveness ↑"]) == [round(f.comprehensiveness, 4) for f in c.faithfulness]
    assert list(table["Spearman vs rollout"]) == [round(float(r), 3) for r in c.rollout_spearman]

    shown = attribution_tab.render_compare(ui, c, merge=True)
    assert shown["shown"]["visible"] is True and "Reading:" in shown["reading"]
    assert shown["tokens"].count('class="bv-line"') == 3
    z = np.asarray(shown["heat"].data[0].z)  # each method's row scaled to its own largest |score|
    assert z.shape[0] == 3 and np.allclose(np.abs(z).max(axis=1), 1.0)
    agree = np.asarray(shown["agree"].data[0].z)
    assert agree.shape == (4, 4) and list(shown["agree"].data[0].x)[-1] == "attention rollout"
    np.testing.assert_allclose(agree[-1, :3], np.round(c.rollout_spearman, 3))
    assert attribution_tab.render_compare(ui, None, merge=True) == {"shown": {"visible": False,
                                                                              "__type__": "update"}}
    with pytest.raises(InputError, match="Press Analyze first"):
        attribution_tab.compare(None, methods, control_values.PREDICTED, "pad", 20, True, 2, Settings())
    with pytest.raises(InputError, match="Tick at least one method"):
        attribution_tab.compare(rec, [], control_values.PREDICTED, "pad", 20, True, 2, Settings())


def test_faithfulness_of_many_attributions_padded_together_equals_one_at_a_time(tiny):
    """faithfulness_many pads texts of other lengths (and other targets) into shared batches: the
    values are those of one call per attribution."""
    from bertviz_app.interpret.faithfulness_eval import faithfulness_many

    texts = ["the film was good", "a tedious slog !", "the movie is great , moving .", "it"]
    attrs = [explain(tiny, t, m, target=i % 2) for i, t in enumerate(texts) for m in ("saliency", "occlusion")]
    many = faithfulness_many(tiny, attrs)
    for a, f in zip(attrs, many):
        one = faithfulness(tiny, a)
        assert f.method == a.method and f.target == a.target and f.n_tokens == one.n_tokens
        assert f.comprehensiveness_k == pytest.approx(one.comprehensiveness_k, abs=1e-5)
        assert f.sufficiency_k == pytest.approx(one.sufficiency_k, abs=1e-5)
        assert f.p_x == pytest.approx(one.p_x, abs=1e-5)
    assert faithfulness_many(tiny, []) == []


def test_methods_are_classes_found_by_name_in_the_registry(tiny, monkeypatch):
    """METHODS lists the registry's names in order; each class's attribute() on the public engine
    gives what explain gives; a method registered from outside is found by explain and
    compare_methods; an unknown name or a taken one is refused."""
    import bertviz_app.interpret.methods as methods
    from bertviz_app.interpret.ig_engine import AttributionEngine
    from bertviz_app.interpret.methods import METHOD_CLASSES, Method, Saliency, method_class, register_method

    # the built-in attribution methods, then the context-mixing measures (compared only when named)
    assert METHODS + MIXING_METHODS == tuple(METHOD_CLASSES) and method_class("saliency") is Saliency
    engine = AttributionEngine.for_text(tiny, SENTENCE)
    direct = Saliency(engine).attribute()
    np.testing.assert_allclose(direct.scores, explain(tiny, SENTENCE, "saliency").scores, atol=1e-7)
    assert direct.method == "saliency" and direct.n_backward == 1

    class Uniform(Method):
        """Every real token gets an equal share of f(x) - f(baseline)."""

        name = "uniform"

        def attribute(self, **options):
            real = np.array([s is not None for s in self.engine.infos[0].sequence_ids])
            scores = real * (self.engine.f_x[0] - self.engine.f_b[0]) / real.sum()
            return self.record(scores, 0, 2, 0, 0.0)

    monkeypatch.setattr(methods, "METHOD_CLASSES", dict(METHOD_CLASSES))  # the registration is undone after the test
    register_method(Uniform)
    a = explain(tiny, SENTENCE, "uniform")
    assert a.method == "uniform" and abs(a.delta) < 1e-6  # complete by construction
    c = compare_methods(tiny, SENTENCE, methods=["uniform", "saliency"])
    assert c.methods == ("uniform", "saliency") and len(c.faithfulness) == 2
    with pytest.raises(ValueError, match="new name"):
        register_method(Uniform)
    assert "uniform" in methods.METHOD_CLASSES
    with pytest.raises(InputError, match="Unknown attribution method 'magic'"):
        explain(tiny, SENTENCE, "magic")


# --------------------------------------------------------------------------- context-mixing measures
def test_compare_scores_the_context_mixing_measures_like_the_attributions(tiny):
    """IG and the four measures through the one comparison: each gets its faithfulness and its rank
    agreement; a measure's scores are its aggregated [CLS] row (>= 0, summing to 1), and no
    completeness (delta) is read from them."""
    from bertviz_app.interpret.mixing_measures import MEASURES, context_mixing

    assert MIXING_METHODS == MEASURES and not set(METHODS) & set(MIXING_METHODS)  # the default is unchanged
    c = compare_methods(tiny, SENTENCE, methods=["ig", "value_zeroing", "alti", "norm", "raw"], n_steps=8)
    assert c.methods == ("integrated_gradients", "value_zeroing", "alti", "norm", "raw")
    assert [f.method for f in c.faithfulness] == list(c.methods)
    assert all(-1 <= f.comprehensiveness <= 1 and -1 <= f.sufficiency <= 1 for f in c.faithfulness)
    assert c.spearman.shape == (5, 5) and len({a.target_index for a in c.attributions}) == 1
    for a in c.attributions[1:]:
        ref = context_mixing(tiny, SENTENCE, measure=a.method).cls_scores
        np.testing.assert_allclose(a.scores, ref, atol=1e-6)
        assert np.all(a.scores >= 0) and float(a.scores.sum()) == pytest.approx(1.0, abs=1e-4)
        assert not a.has_completeness and a.seconds > 0 and a.n_forward >= 3 and a.n_backward == 0
        d = a.to_dict()
        assert d["delta"] is None and d["relative_delta"] is None and d["completeness"].startswith("does not apply")
    assert c.attributions[0].has_completeness and "completeness" not in c.attributions[0].to_dict()
    # the raw measure's [CLS] row is attention rollout's: it ranks the tokens as the rollout column does
    assert c.rollout_spearman[c.methods.index("raw")] == pytest.approx(1.0, abs=1e-6)
    d = c.to_dict()
    assert set(d["methods"]) == set(c.methods) and all("faithfulness" in m for m in d["methods"].values())
    json.dumps(d)


def test_method_names_are_read_loosely_and_unknown_ones_list_the_valid_ones(tiny):
    from bertviz_app.interpret.methods import canonical_method

    assert canonical_method(" IG ") == "integrated_gradients" and canonical_method("Value-Zeroing") == "value_zeroing"
    with pytest.raises(InputError) as err:
        explain(tiny, SENTENCE, "alti!")
    assert all(m in str(err.value) for m in (*METHODS, *MIXING_METHODS, "ig"))
    with pytest.raises(InputError, match="value_zeroing"):
        compare_methods(tiny, SENTENCE, methods=["ig", "attention_flow"])
    with pytest.raises(InputError, match="twice"):
        compare_methods(tiny, SENTENCE, methods=["ig", "integrated_gradients"])


def test_a_measures_export_says_completeness_does_not_apply(tiny):
    from bertviz_app.interpret.export import explanation_dict, explanation_from_dict, explanation_html

    a = explain(tiny, SENTENCE, "alti")
    page = explanation_html(a)
    assert "Completeness" in page and "does not apply" in page and "Convergence delta" not in page
    assert "[CLS] takes from the token" in page  # its legend: a share, not a reaction of the output
    back = explanation_from_dict(json.loads(json.dumps(explanation_dict(a)))).attribution
    assert back.method == "alti" and back.delta == pytest.approx(a.delta, abs=1e-5)
    np.testing.assert_allclose(back.scores, a.scores, atol=1e-6)


def test_the_pages_comparison_with_measures_ticked(sentiment, monkeypatch, request):
    """The Attributions tab: the measures can be ticked (not ticked at first), and a comparison with
    them gives their rows, coloured tokens and agreement like any method."""
    from types import SimpleNamespace

    import gradio as gr

    from bertviz_app.ui import analysis, attribution_tab, control_values

    with gr.Blocks():
        block = attribution_tab.build_compare()
    assert {k for _, k in block.methods.choices} >= set(MIXING_METHODS) and list(block.methods.value) == list(METHODS)

    monkeypatch.setattr(sentiment, "memo_size", 8)
    sentiment.clear_memo()
    request.addfinalizer(sentiment.clear_memo)
    rec = analysis.analyze_all(sentiment, "the film was awful", None, None, "pad", 20, auto=True)
    methods = ["integrated_gradients", "value_zeroing", "alti", "norm", "raw"]
    c = attribution_tab.compare(rec, methods, control_values.PREDICTED, "pad", 20, True, 2, Settings())
    assert c.methods == tuple(methods)
    table = attribution_tab.compare_table(c)
    assert [m.replace(" ★ (tied)", "").replace(" ★", "") for m in table["method"]] == [
        "Integrated Gradients", "value zeroing", "ALTI", "attention-norm", "raw attention (rollout)"]
    assert list(table["comprehensiveness ↑"]) == [round(f.comprehensiveness, 4) for f in c.faithfulness]
    cmp = SimpleNamespace(shown="shown", reading="reading", table="table", tokens="tokens", heat="heat", agree="agree")
    ui = SimpleNamespace(delta="delta", tokens="tokens", bar="bar", path="path", lens="lens", cmp=cmp)
    shown = attribution_tab.render_compare(ui, c, merge=True)
    assert shown["tokens"].count('class="bv-line"') == 5 and shown["tokens"].count("[CLS] takes from the token") == 4
    assert np.asarray(shown["agree"].data[0].z).shape == (6, 6)
    with pytest.raises(InputError, match="value_zeroing"):
        attribution_tab.compare(rec, ["integrated_gradients", "zeroing"], control_values.PREDICTED, "pad", 20, True, 2,
                                Settings())
