"""LIME, KernelSHAP and ERASER faithfulness of a reader's answer span (``interpret.span_methods``, issue 33), on the
tiny mixing span models of test_span_attribution (every family where it is cheap): KernelSHAP against exact Shapley
values enumerated with the model's own forward (``model(inputs_embeds=...)``, answer's masking, summed by hand), LIME's
weights against its own weighted ridge fit redone by hand on the samples it drew, the parts of one span fitted on
shared samples (equal to one at a time), faithfulness against masking done by hand, the refusals, and the CLI's
``explain --question --context --method lime|kernel_shap`` with faithfulness in its JSON."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import sklearn.linear_model
import torch
from test_qa_page import qa_dirs  # noqa: F401
from test_span_attribution import _window, qa, reference_f  # noqa: F401

import bertviz_app as bv
from bertviz_app.cli import main
from bertviz_app.errors import InputError
from bertviz_app.interpret.span_attribution import explain_answer, occlude_answer
from bertviz_app.interpret.span_methods import sample_span, span_faithfulness

from conftest import FAMILIES

QUESTION = "what was the film"
SHORT = "the film was awful joy"  # five words: 32 subsets, every one enumerated by hand
PARTS = ["span", "start", "end"]


def context_words(lm, rec) -> list[list[int]]:
    """Each context word's window positions, from the tokenizer's own word ids (not from the record)."""
    enc = lm.tokenizer(rec.question, rec.context, truncation="only_second", max_length=lm.max_length,
                       stride=min(128, lm.max_length // 2), return_overflowing_tokens=True)
    words: dict[int, list[int]] = {}
    for i, (s, w) in enumerate(zip(enc.sequence_ids(rec.window), enc.word_ids(rec.window))):
        if s == 1 and w is not None:
            words.setdefault(w, []).append(i)
    return list(words.values())


def hand_f(lm, rec, keeps, part=None, objective=None) -> np.ndarray:
    """F (len(keeps),) of the record's target with the context words not in each ``keeps`` set given [PAD]'s word
    vectors (the question and the special tokens kept), by the model's own forward."""
    ids, rest, seq = _window(lm, rec.question, rec.context, rec.window)
    table = lm.model.get_input_embeddings()
    words = context_words(lm, rec)
    with torch.no_grad():
        pad = table(torch.tensor([lm.tokenizer.pad_token_id]))[0]
        x = table(ids).repeat(len(keeps), 1, 1)  # (B, T, D)
        for r, keep in enumerate(keeps):
            for i, positions in enumerate(words):
                if i not in keep:
                    x[r, positions] = pad
        t = rec.target
        return reference_f(lm, x, rest, seq, t.first, t.last, part or t.part, objective or rec.objective).numpy()


def exact_shapley(lm, rec) -> np.ndarray:
    """Each context word's Shapley value of F, every subset of the words enumerated (one batched forward)."""
    n = len(context_words(lm, rec))
    subsets = [s for r in range(n + 1) for s in itertools.combinations(range(n), r)]
    f = dict(zip(subsets, hand_f(lm, rec, [set(s) for s in subsets]).tolist()))
    phi = np.zeros(n)
    for i in range(n):
        for s, value in f.items():
            if i not in s:
                weight = math.factorial(len(s)) * math.factorial(n - len(s) - 1) / math.factorial(n)
                phi[i] += weight * (f[tuple(sorted((*s, i)))] - value)
    return phi


def context_scores(rec) -> np.ndarray:
    return np.array([w.score for w in rec.words if w.side == "context"])


@pytest.mark.parametrize("family", FAMILIES)
def test_kernel_shap_approaches_the_exact_shapley_values(family, qa):  # noqa: F811
    lm = qa(family)
    # 32 distinct subsets, drawn with replacement from the Shapley kernel: the fit nears the exact values as the
    # draws grow (600: within 10% of the largest on deberta-v2, 2000: within 3%)
    recs = sample_span(lm, QUESTION, SHORT, method="kernel_shap", part=PARTS, n_samples=3000)
    assert [r.target.part for r in recs] == PARTS
    for rec in recs:
        assert [list(range(*w.tokens)) for w in rec.words if w.side == "context"] == context_words(lm, rec)
        assert len(context_words(lm, rec)) == 5
        phi = exact_shapley(lm, rec)
        scale = float(np.abs(phi).max())
        assert scale > 1e-2, phi  # the tiny reader's context words matter
        got = context_scores(rec)
        assert np.abs(got - phi).max() <= 0.03 * scale, (rec.target.part, got, phi)
        every, none = hand_f(lm, rec, [set(range(5)), set()])
        assert rec.f_x == pytest.approx(every, rel=1e-4, abs=1e-5)
        assert rec.f_baseline == pytest.approx(none, rel=1e-4, abs=1e-5)
        assert float(got.sum()) == pytest.approx(rec.f_x - rec.f_baseline, rel=0.03, abs=1e-3)  # efficiency
        assert all(w.score == 0.0 for w in rec.words if w.side == "question")  # the question is kept, not a feature
        assert rec.method == "kernel_shap" and rec.delta is None and rec.n_steps is None
        for w in rec.words:  # each token an equal share of its word's weight
            assert float(rec.scores[w.tokens[0]:w.tokens[1]].sum()) == pytest.approx(w.score, rel=1e-5, abs=1e-6)
    span, start, end = recs  # the span's F is its start's plus its end's: so are the exact values
    np.testing.assert_allclose(exact_shapley(lm, span), exact_shapley(lm, start) + exact_shapley(lm, end),
                               atol=1e-4)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_lime_weights_are_its_own_weighted_ridge_fit(family, qa, monkeypatch):  # noqa: F811
    """The samples LIME drew (caught at sklearn's Ridge.fit): each output is F of that subset by hand, each weight
    Captum's exponential kernel of the cosine distance to the input by hand, and the record's word scores the
    weighted ridge (alpha 1, intercept) solved in closed form on them."""
    fits = []
    fit = sklearn.linear_model.Ridge.fit

    def spy(self, x, y, sample_weight=None, **kw):
        fits.append((np.array(x, dtype=np.float64), np.array(y, dtype=np.float64).ravel(),
                     np.array(sample_weight, dtype=np.float64)))
        return fit(self, x, y, sample_weight=sample_weight, **kw)

    monkeypatch.setattr(sklearn.linear_model.Ridge, "fit", spy)
    lm = qa(family)
    recs = sample_span(lm, QUESTION, SHORT, method="lime", part=["span", "end"], n_samples=120, seed=2)
    assert len(fits) == 2
    for rec, (z, y, w) in zip(recs, fits):
        assert z.shape == (120, 5) and set(np.unique(z)) <= {0.0, 1.0}
        np.testing.assert_allclose(y, hand_f(lm, rec, [set(np.flatnonzero(row)) for row in z]), rtol=1e-4,
                                   atol=1e-4)
        cos = z.sum(1) / (np.sqrt(np.maximum(z.sum(1), 1e-12)) * np.sqrt(5))
        np.testing.assert_allclose(w, np.exp(-((1 - cos) ** 2) / 2), rtol=1e-5)
        zc = z - np.average(z, axis=0, weights=w)
        yc = y - np.average(y, weights=w)
        beta = np.linalg.solve(zc.T @ (w[:, None] * zc) + np.eye(5), zc.T @ (w * yc))
        np.testing.assert_allclose(context_scores(rec), beta, rtol=1e-3, atol=1e-4 * np.abs(beta).max())
        assert rec.method == "lime"


@pytest.mark.parametrize("method", ["lime", "kernel_shap"])
def test_parts_share_their_samples_and_equal_one_at_a_time(qa, method):  # noqa: F811
    lm = qa("bert")
    together = sample_span(lm, QUESTION, SHORT, method=method, part=PARTS, n_samples=100, seed=3)
    for rec in together:
        [alone] = sample_span(lm, QUESTION, SHORT, method=method, part=rec.target.part, n_samples=100, seed=3)
        np.testing.assert_allclose(rec.scores, alone.scores, rtol=1e-5, atol=1e-7)
        assert rec.target == alone.target
    again = sample_span(lm, QUESTION, SHORT, method=method, part=PARTS, n_samples=100, seed=3)
    other = sample_span(lm, QUESTION, SHORT, method=method, part=PARTS, n_samples=100, seed=4)
    assert all(np.array_equal(a.scores, b.scores) for a, b in zip(together, again))  # seeded
    assert not all(np.allclose(a.scores, b.scores) for a, b in zip(together, other))  # control: the seed matters
    both = sample_span(lm, QUESTION, SHORT, method=method, n_samples=100, side="both")[0]
    assert any(abs(w.score) > 0 for w in both.words if w.side == "question")  # side="both": the question sampled


def test_no_answer_and_a_chosen_span_are_sampled(qa):  # noqa: F811
    lm = qa("bert")
    [none] = sample_span(lm, QUESTION, SHORT, "no-answer", method="kernel_shap", n_samples=2000)
    assert none.target.kind == "no-answer" and (none.target.first, none.target.last) == (0, 0)
    phi = exact_shapley(lm, none)
    np.testing.assert_allclose(context_scores(none), phi, atol=0.03 * float(np.abs(phi).max()))
    at = SHORT.index("film")
    [chosen] = sample_span(lm, QUESTION, SHORT, (at, at + 4), method="lime", n_samples=64)
    assert chosen.target.kind == "chosen" and chosen.target.text == "film"
    assert chosen.f_x == pytest.approx(float(hand_f(lm, chosen, [set(range(5))])[0]), rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("family", ["bert", "deberta-v2"])
def test_faithfulness_equals_masking_by_hand_for_each_method(family, qa):  # noqa: F811
    lm = qa(family)
    at = SHORT.index("awful")
    records = [*explain_answer(lm, QUESTION, SHORT, part=["span", "start"], n_steps=32),
               *occlude_answer(lm, QUESTION, SHORT, (at, at + 5)),
               *sample_span(lm, QUESTION, SHORT, method="lime", part="end", n_samples=64),
               *sample_span(lm, QUESTION, SHORT, "no-answer", method="kernel_shap", n_samples=64)]
    ks = (20, 50, 100)
    results = span_faithfulness(lm, records, ks=ks)
    for rec, fa in zip(records, results):
        ranked = sorted(range(5), key=lambda i: (-context_scores(rec)[i], i))
        p_x = float(hand_f(lm, rec, [set(range(5))], objective="prob")[0])
        assert fa.p_x == pytest.approx(p_x, rel=1e-4)
        if rec.target.part == "span":  # the span's probability is its score p(start) x p(end)
            assert fa.p_x == pytest.approx(rec.target.p_start * rec.target.p_end, rel=1e-4)
        for k, n, comp, suff in zip(ks, fa.n_tokens, fa.comprehensiveness_k, fa.sufficiency_k):
            assert n == math.ceil(k * 5 / 100)
            without, only = hand_f(lm, rec, [set(ranked[n:]), set(ranked[:n])], objective="prob")
            assert comp == pytest.approx(p_x - without, rel=1e-3, abs=1e-6)
            assert suff == pytest.approx(p_x - only, rel=1e-3, abs=1e-6)
        assert fa.sufficiency_k[-1] == pytest.approx(0.0, abs=1e-6)  # every word kept: nothing changes
        assert fa.comprehensiveness == pytest.approx(np.mean(fa.comprehensiveness_k))
        assert fa.method == rec.method and fa.reading and "words" in fa.reading
    assert max(abs(f.comprehensiveness_k[-1]) for f in results) > 1e-3  # control: removing every word changes p
    assert "'awful'" in results[2].target and results[-1].target == "no answer"


def test_refusals_say_what_to_send(qa, signal_model_dir):  # noqa: F811
    lm = qa("bert")
    for kwargs, message in (({"method": "shap"}, "method must be one of lime, kernel_shap"),
                            ({"n_samples": 0}, "n_samples must be a whole number of at least 2"),
                            ({"n_samples": 1}, "n_samples must be a whole number of at least 2"),
                            ({"batch_size": 0}, "batch_size must be a whole number"),
                            ({"side": "question"}, "side must be one of context, both"),
                            ({"part": "middle"}, "part must be one of"),
                            ({"target": "odds"}, "target must be one of")):
        with pytest.raises(InputError, match=message):
            sample_span(lm, QUESTION, SHORT, **kwargs)
    with pytest.raises(InputError, match="is not within the context, which has 22 characters"):
        sample_span(lm, QUESTION, SHORT, (4, 99))
    slow = bv.load_model(str(qa.paths["bert", "random"]), device="cpu", settings=bv.Settings(max_method_seconds=1e-9))
    with pytest.raises(InputError, match="Use integrated_gradients or occlusion"):
        sample_span(slow, QUESTION, SHORT, method="kernel_shap")
    [ok] = sample_span(lm, QUESTION, SHORT, n_samples=64)  # control: the same call within the limit
    with pytest.raises(InputError, match="ks must be percentages"):
        span_faithfulness(lm, [ok], ks=(0,))
    with pytest.raises(InputError, match="side must be one of"):
        span_faithfulness(lm, [ok], side="question")
    other = qa("bert", "joy")  # another reader answers another span
    with pytest.raises(InputError, match="another model or other settings|not found again"):
        span_faithfulness(other, [ok])
    assert span_faithfulness(lm, [ok])[0].p_x > 0  # control: the model it was made with
    with pytest.raises(InputError, match="question answering"):
        sample_span(bv.load_model(str(signal_model_dir("bert")), device="cpu"), QUESTION, SHORT)


# ------------------------------------------------------------------------------------------------ the CLI
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_explain_question_with_lime_and_kernel_shap(capsys, qa):  # noqa: F811
    lm = qa("bert")
    path = str(qa.paths["bert", "random"])
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", SHORT, "--model", path,
                         "--method", "kernel_shap", "--samples", "80", "--seed", "1", "--start", "--end", "--json")
    assert code == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    want = sample_span(lm, QUESTION, SHORT, method="kernel_shap", part=["start", "end"], n_samples=80, seed=1)
    faith = span_faithfulness(lm, want)
    for g, w, f in zip(got, want, faith):
        assert g["method"] == "kernel_shap" and g["target"]["part"] == w.target.part
        np.testing.assert_allclose(g["scores"], w.scores, atol=1e-6)
        assert g["faithfulness"]["comprehensiveness"] == pytest.approx(f.comprehensiveness, abs=1e-6)
        assert g["faithfulness"]["sufficiency"] == pytest.approx(f.sufficiency, abs=1e-6)
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", SHORT, "--model", path,
                         "--method", "lime", "--n-samples", "64")
    assert code == 0, err
    assert "lime" in out and "comprehensiveness" in out and "sufficiency" in out and "context" in out
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", SHORT, "--model", path,
                         "--n-steps", "8", "--tolerance", "0", "--json")
    assert code == 0, err and "faithfulness" in json.loads(out)  # Integrated Gradients' too
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", SHORT, "--model", path,
                         "--method", "saliency")
    assert code != 0 and "lime or kernel_shap" in err
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", SHORT, "--model", path,
                         "--method", "lime", "--samples", "0")
    assert code != 0 and "n_samples must be a whole number of at least 2" in err


# ------------------------------------------------------------------------------------------------ the page
def test_the_attributions_tab_explains_a_readers_target_by_each_method_with_its_faithfulness(
        settings, qa_dirs, tiny_model_dir):  # noqa: F811
    """The Attributions tab's "Other methods for this target" panel (shown for a reader alone): each method's record
    equals the library's for the target chosen, its line says F, the faithfulness numbers and what they mean; a bad
    sample count or target is refused in the panel's status line with what to send."""
    from test_qa_page import CONTEXT as PAGE_CONTEXT
    from test_qa_page import QUESTION as PAGE_QUESTION
    from test_qa_page import analyze, make_page

    from bertviz_app.ui import attribution_reader, guards

    folder = str(qa_dirs["joy"])
    lm = bv.load_model(folder, device="cpu")
    page = make_page(settings, folder)
    t = page.t
    rec = analyze(page, folder, PAGE_QUESTION, PAGE_CONTEXT, target="(predicted class)", tab="attributions")[page.state]
    assert page.follow_choices(rec, folder, "span", "pad", [])[t.spans.panel]["visible"] is True
    library = {"integrated_gradients": lambda: explain_answer(lm, PAGE_QUESTION, PAGE_CONTEXT, part="start",
                                                              n_steps=16),
               "occlusion": lambda: occlude_answer(lm, PAGE_QUESTION, PAGE_CONTEXT, part="start"),
               "lime": lambda: sample_span(lm, PAGE_QUESTION, PAGE_CONTEXT, method="lime", part="start",
                                           n_samples=64, seed=1),
               "kernel_shap": lambda: sample_span(lm, PAGE_QUESTION, PAGE_CONTEXT, method="kernel_shap",
                                                  part="start", n_samples=64, seed=1)}
    for method, reference in library.items():
        a, f = attribution_reader.explain_span_method(rec, "start", method, 64.0, 1.0, "context", "pad", 16, False,
                                                   settings)
        [want] = reference()
        [f_want] = span_faithfulness(lm, [want])
        assert a.method == method and a.target == want.target and a.target.text == "joy"
        np.testing.assert_allclose(a.scores, want.scores, atol=1e-5)
        assert f.comprehensiveness == pytest.approx(f_want.comprehensiveness, abs=1e-5)
        shown = attribution_reader.render_span_method(t, a, f, "context", True, rec.min_change)
        line = shown[t.spans.reading]
        assert f"comprehensiveness **{f.comprehensiveness:+.3f}**" in line and "higher is more faithful" in line
        assert f"sufficiency **{f.sufficiency:+.3f}**" in line and "the start of" in line
        assert "C: joy" in shown[t.spans.tokens] and "Q: film" in shown[t.spans.tokens]
    refuse = guards.to_status(lambda *a: attribution_reader.explain_span_method(*a, settings), t.spans.status)
    for args, message in (((rec, "span", "lime", 0, 0, "context", "pad", 16, False), "at least 2, got 0."),
                          ((rec, "span", "kernel_shap", -5, 0, "context", "pad", 16, False), "at least 2, got -5"),
                          ((rec, "positive", "lime", 64, 0, "context", "pad", 16, False), "Choose the answer span"),
                          ((None, "span", "lime", 64, 0, "context", "pad", 16, False), "Press Analyze first")):
        assert message in refuse(*args)[t.spans.status]
    clf = analyze(page, str(tiny_model_dir), "a gorgeous film", "", target="span", tab="attributions")[page.state]
    assert page.follow_choices(clf, str(tiny_model_dir), "span", "pad", [])[t.spans.panel]["visible"] is False
    with pytest.raises(InputError, match="not one"):
        attribution_reader.explain_span_method(clf, "span", "lime", 64, 0, "context", "pad", 16, False, settings)


# --------------------------------------------------------------------------- the JSON API
def test_v1_explain_answer_takes_the_method_and_gives_the_faithfulness_of_the_library(qa, tmp_path):  # noqa: F811
    """POST /v1/explain_answer with method (lime, kernel_shap, occlusion) and faithfulness: the library's records
    (``explain_span_by``, same seed: the same scores) and ``span_faithfulness``'s numbers; without faithfulness no
    such key (the control); an unknown method and too few samples refused in one {"error"} line each."""
    import httpx

    from conftest import served_app

    lm = qa("bert", "joy")
    folder = str(qa.paths["bert", "joy"])
    ctx = "the film was awful the movie joy and it was fun"
    with served_app(folder, BERTVIZ_MODELS_DIR=tmp_path) as url:
        for method in ("kernel_shap", "lime", "occlusion"):
            body = {"question": QUESTION, "context": ctx, "parts": "span,start", "method": method, "n_samples": 64,
                    "seed": 3, "faithfulness": True}
            r = httpx.post(f"{url}v1/explain_answer", json=body, timeout=120)
            assert r.status_code == 200, r.text
            got = r.json()["explanations"]
            want = bv.explain_span_by(lm, QUESTION, ctx, method=method, part=["span", "start"], n_samples=64,
                                      seed=3)
            faith = span_faithfulness(lm, want)
            assert [g["method"] for g in got] == [method, method] and len(got) == 2
            for g, w, f in zip(got, want, faith):
                assert g["target"]["part"] == w.target.part and g["tokens"] == list(w.tokens)
                scale = float(np.abs(w.scores).max())
                assert scale > 1e-3  # the steered reader's scores carry signal
                np.testing.assert_allclose(g["scores"], w.scores, rtol=1e-4, atol=1e-5 * scale)
                for k in ("comprehensiveness_k", "sufficiency_k"):
                    np.testing.assert_allclose(g["faithfulness"][k], getattr(f, k), rtol=1e-4, atol=1e-6)
                assert g["faithfulness"]["p_x"] == pytest.approx(f.p_x, rel=1e-5)
        r = httpx.post(f"{url}v1/explain_answer", json={"question": QUESTION, "context": ctx, "n_steps": 16,
                                                         "tolerance": 0}, timeout=120)
        assert r.status_code == 200 and r.json()["explanations"][0].get("faithfulness") is None, r.text  # control
        for bad, message in (({"method": "shapley"}, "method must be one of integrated_gradients, occlusion"),
                             ({"method": "lime", "n_samples": 1}, "n_samples must be a whole number of at least 2")):
            r = httpx.post(f"{url}v1/explain_answer", json={"question": QUESTION, "context": ctx, **bad}, timeout=60)
            assert r.status_code == 400, (bad, r.text)
            assert set(r.json()) == {"error"} and message in r.json()["error"] and "Traceback" not in r.text
