"""Attributions for extractive question answering (issue 33): Integrated Gradients of an answer span's
log-probability log p(start) + log p(end) (its start and its end alone, "no answer", a chosen span), on a tiny span
model of each of the 7 families (``test_answering.build_qa``), and the CLI's ``explain --question --context``.

The independent reference is written here with plain torch: the tokenizer's window (question first, as ``answer``
reads it), the model's own forward from word vectors (``model(inputs_embeds=...)``: ``start_logits`` and
``end_logits``), the positions outside the context but the first set to -10000, a log-softmax over the positions,
the target summed by hand, and the straight-path integral as a Gauss-Legendre sum (the nodes the engine's fixed steps
use: equal to float rounding) or a 1024-point midpoint Riemann sum (the integral itself, for adaptive steps)."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
import torch
import transformers as tf
from test_answering import CONTEXT, build_steered, long_context

import bertviz_app as bv
from bertviz_app.cli import main
from bertviz_app.errors import InputError
from bertviz_app.interpret.attribution_options import recommended_baseline
from bertviz_app.interpret.span_attribution import explain_answer, occlude_answer

from conftest import FAMILIES, build_family_model

QUESTION = "what was the film"  # "what" is unknown to the tiny tokenizers: an [UNK] word still gets a score


def build_mixing_qa(family: str, path, seed: int = 0):
    """``family``'s tiny span model whose encoder mixes its tokens: every weight drawn at ``initializer_range`` 0.2
    (the tiny config's 0.02 leaves each position nearly alone, so the question's tokens would move the answer by
    ~1e-5 and their scores would test nothing), ``qa_outputs`` normal x 2 (its spans stand out), bias normal x
    0.5."""
    build_family_model(family, path)
    cfg = tf.AutoConfig.from_pretrained(path)
    cfg.initializer_range = 0.2
    torch.manual_seed(seed)
    model = tf.AutoModelForQuestionAnswering.from_config(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.qa_outputs.weight.copy_(2.0 * torch.randn(model.qa_outputs.weight.shape, generator=gen))
        model.qa_outputs.bias.copy_(0.5 * torch.randn(2, generator=gen))
    (path / "model.safetensors").unlink()
    model.save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture(scope="module")
def qa(tmp_path_factory):
    """``qa(family, kind)``: the loaded tiny span model ("random": ``build_mixing_qa``; "joy": steered to "joy",
    test_answering's)."""
    built, paths = {}, {}

    def get(family: str = "bert", kind: str = "random"):
        if (family, kind) not in built:
            path = tmp_path_factory.mktemp(f"span-{family}-{kind}") / family
            build_mixing_qa(family, path) if kind == "random" else build_steered(family, path, kind)
            built[family, kind], paths[family, kind] = bv.load_model(str(path), device="cpu"), path
        return built[family, kind]

    get.paths = paths
    return get


# ------------------------------------------------------------------------------------------- the reference
def _window(lm, question, context, w=0, stride=None):
    """Window ``w`` of the pair as the tokenizer cuts it: (ids (1, T), the other inputs, sequence ids)."""
    tok = lm.tokenizer
    stride = min(128, lm.max_length // 2) if stride is None else stride
    enc = tok(question, context, truncation="only_second", max_length=lm.max_length, stride=stride,
              return_overflowing_tokens=True)
    ids = torch.tensor([enc["input_ids"][w]])
    rest = {"attention_mask": torch.ones_like(ids)}
    if "token_type_ids" in enc and "token_type_ids" in inspect.signature(lm.model.forward).parameters:
        rest["token_type_ids"] = torch.tensor([enc["token_type_ids"][w]])
    return ids, rest, enc.sequence_ids(w)


def reference_f(lm, emb, rest, seq, first, last, part="span", objective="logprob"):
    """F (B,) of word vectors (B, T, D): the model's own forward, answer's masking, summed by hand."""
    n = emb.shape[0]
    out = lm.model(inputs_embeds=emb, **{k: v.expand(n, -1) for k, v in rest.items()})
    keep = torch.tensor([s == 1 for s in seq])
    keep[0] = True
    start = torch.log_softmax(out.start_logits.double().masked_fill(~keep, -10000.0), dim=-1)
    end = torch.log_softmax(out.end_logits.double().masked_fill(~keep, -10000.0), dim=-1)
    f = (start[:, first] if part != "end" else 0) + (end[:, last] if part != "start" else 0)
    return f if objective == "logprob" else f.exp()


def reference_ig(lm, rec, gauss_legendre=None, steps=1024, stride=None):
    """(scores (T,), F(x), F(baseline)) of ``rec``'s target by plain torch along the straight path from the
    baseline's word vectors (question and context tokens replaced by the baseline token; specials kept)."""
    ids, rest, seq = _window(lm, rec.question, rec.context, rec.window, stride)
    t = rec.target
    words = lm.model.get_input_embeddings()
    base_ids = ids.clone()
    moved = [i for i, s in enumerate(seq) if s is not None]
    base_ids[0, moved] = getattr(lm.tokenizer, f"{'pad' if rec.baseline == 'zero' else rec.baseline}_token_id")
    with torch.no_grad():
        x, b = words(ids), words(base_ids)
        f_x, f_b = (float(v) for v in reference_f(lm, torch.cat([x, b]), rest, seq, t.first, t.last, t.part,
                                                  rec.objective))
    if gauss_legendre is None:
        alphas, weights = (np.arange(steps) + 0.5) / steps, np.full(steps, 1.0 / steps)
    else:
        nodes, w = np.polynomial.legendre.leggauss(gauss_legendre)
        alphas, weights = (nodes + 1) / 2, w / 2
    total = torch.zeros(x.shape[1], dtype=torch.float64)
    for chunk, wts in zip(np.array_split(alphas, max(1, len(alphas) // 128)),
                          np.array_split(weights, max(1, len(alphas) // 128))):
        a = torch.tensor(chunk, dtype=torch.float32).view(-1, 1, 1)
        path = (b + a * (x - b)).requires_grad_()
        f = reference_f(lm, path, rest, seq, t.first, t.last, t.part, rec.objective)
        (grad,) = torch.autograd.grad(f.sum(), path)
        total += ((grad * (x - b)).sum(-1).double() * torch.tensor(wts).view(-1, 1)).sum(0)
    return total.numpy(), f_x, f_b


def check_record(lm, rec, n_steps=None, tolerance=None, stride=None, question_signal=True):
    """``rec`` against the reference: its tokens and sides are the window's, F(x) and F(baseline) from separate
    forward passes, the completeness identity, and the scores: the same Gauss-Legendre rule to 1e-4 of what they
    share out (fixed steps; the question's tokens also to 1e-2 of their own largest) or the integral within
    ``tolerance`` (adaptive). ``question_signal``: the question's largest score must be above 1e-4 of the scale.
    """
    ids, _, seq = _window(lm, rec.question, rec.context, rec.window, stride)
    assert rec.tokens == tuple(lm.tokenizer.convert_ids_to_tokens(ids[0]))
    assert rec.sides == tuple(None if s is None else ("question", "context")[s] for s in seq)
    ref, f_x, f_b = reference_ig(lm, rec, gauss_legendre=n_steps, stride=stride)
    gap = f_x - f_b
    scale = max(abs(gap), float(np.abs(ref).sum()))
    assert rec.f_x == pytest.approx(f_x, rel=1e-5, abs=1e-5)
    assert rec.f_baseline == pytest.approx(f_b, rel=1e-5, abs=1e-5)
    assert rec.delta == pytest.approx(float(rec.scores.sum()) - gap, abs=1e-4 * scale)
    if n_steps is not None:
        np.testing.assert_allclose(rec.scores, ref, rtol=0, atol=1e-4 * scale)
        q = [i for i, side in enumerate(rec.sides) if side == "question"]  # also on their own scale
        assert np.abs(ref[q]).max() > (1e-4 * scale if question_signal else 0), "the question carries no signal"
        np.testing.assert_allclose(rec.scores[q], ref[q], rtol=0, atol=1e-2 * np.abs(ref[q]).max())
    if tolerance is not None:
        assert abs(gap) > 0.05, f"F(x) - F(baseline) = {gap:.3g}: too small to test anything"
        assert abs(float(rec.scores.sum()) - gap) <= tolerance * abs(gap)
        np.testing.assert_allclose(rec.scores, ref, rtol=0, atol=tolerance * scale)
    return gap, ref


def by_hand(lm, question, context, first, last, w=0, stride=None):
    """(log p(start = first), log p(end = last)) from the model's own logits on window ``w``."""
    ids, rest, seq = _window(lm, question, context, w, stride)
    with torch.no_grad():
        emb = lm.model.get_input_embeddings()(ids)
        s = float(reference_f(lm, emb, rest, seq, first, last, "start")[0])
        e = float(reference_f(lm, emb, rest, seq, first, last, "end")[0])
    return s, e


# ------------------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("family", FAMILIES)
def test_the_predicted_span_its_start_and_end_equal_the_reference(family, qa):
    """The predicted span, its start and its end in one call (fixed steps) equal the reference's same rule, each
    F(x) the log-probabilities by hand from the model's logits; start + end = span (IG is linear in the target);
    the span is answer's; adaptive steps on the span: complete within the tolerance and equal to the integral."""
    lm = qa(family)
    baseline = recommended_baseline(lm)  # DeBERTa-v2: [PAD] path starts with a jump (baseline_jumps)
    [a] = bv.answer(lm, QUESTION, CONTEXT, no_answer_threshold=None)
    span, start, end = explain_answer(lm, QUESTION, CONTEXT, part=["span", "start", "end"], baseline=baseline,
                                      n_steps=16)
    t = span.target
    assert (t.kind, t.text, t.start, t.end) == ("predicted", a.text, a.start, a.end)
    n = span.sides.count("context")
    assert max(t.p_start, t.p_end) > 3 / n, f"p(start) {t.p_start:.3g}, p(end) {t.p_end:.3g}: too near uniform (1/{n})"
    ls, le = by_hand(lm, QUESTION, CONTEXT, t.first, t.last)
    assert span.f_x == pytest.approx(ls + le, abs=1e-4)
    assert (start.f_x, end.f_x) == (pytest.approx(ls, abs=1e-4), pytest.approx(le, abs=1e-4))
    assert span.f_x == pytest.approx(np.log(t.p_start) + np.log(t.p_end), abs=1e-4)
    gaps = []
    for rec in (span, start, end):
        gap, ref = check_record(lm, rec, n_steps=16)
        gaps.append(gap)
    assert abs(gaps[0]) > 0.5, f"F(x) - F(baseline) = {gaps[0]:.3g}: too little signal"
    assert np.abs(span.scores).max() > 0.05
    np.testing.assert_allclose(span.scores, start.scores + end.scores, rtol=0, atol=1e-5 * abs(gaps[0]))
    q = [i for i, side in enumerate(span.sides) if side == "question"]
    assert np.abs(span.scores[q]).max() > 0.01, "the question's tokens hardly move the span: nothing to test"
    assert {w.side for w in span.words} == {"question", "context"}
    adaptive = explain_answer(lm, QUESTION, CONTEXT, baseline=baseline, tolerance=0.02)[0]
    assert adaptive.tolerance == 0.02 and adaptive.relative_delta <= 0.02 and adaptive.n_steps > 5
    check_record(lm, adaptive, tolerance=0.02)


def test_a_tight_tolerance_refines_the_steps(qa):
    """Adaptive steps at a tolerance the first segments miss: more steps, the relative delta within it, the scores
    the integral's (a 1024-point midpoint sum)."""
    lm = qa("xlm-roberta")
    loose = explain_answer(lm, QUESTION, CONTEXT, tolerance=0.02)[0]
    tight = explain_answer(lm, QUESTION, CONTEXT, tolerance=1e-5)[0]
    assert loose.relative_delta > 1e-5, "the first segments already meet the tight tolerance: nothing is refined"
    assert tight.n_steps > loose.n_steps and tight.relative_delta <= 1e-5
    _, ref = check_record(lm, tight, tolerance=1e-3)


@pytest.mark.parametrize("family", ["bert", "roberta", "deberta-v2"])
def test_no_answer_and_a_chosen_span(family, qa):
    """"No answer" explains the first position's start and end; a span chosen by its characters explains the
    tokens overlapping them (its text and tokens, F by hand); both equal the reference."""
    lm = qa(family)
    baseline = recommended_baseline(lm)
    none = explain_answer(lm, QUESTION, CONTEXT, "no-answer", baseline=baseline, n_steps=16)[0]
    assert (none.target.kind, none.target.first, none.target.last, none.target.text) == ("no-answer", 0, 0, "")
    [a] = bv.answer(lm, QUESTION, CONTEXT)
    assert none.target.p_start * none.target.p_end == pytest.approx(a.no_answer_score, rel=1e-4)
    ls, le = by_hand(lm, QUESTION, CONTEXT, 0, 0)
    assert none.f_x == pytest.approx(ls + le, abs=1e-4)
    check_record(lm, none, n_steps=16)
    at = CONTEXT.index("movie joyless")
    chosen = explain_answer(lm, QUESTION, CONTEXT, (at - 1, at + len("movie joyless") + 1), baseline=baseline,
                            n_steps=16)[0]  # the spaces around are trimmed
    t = chosen.target
    assert (t.kind, t.text, t.start, t.end) == ("chosen", "movie joyless", at, at + len("movie joyless"))
    pieces = [tok for tok, s in zip(chosen.tokens[t.first : t.last + 1], chosen.sides[t.first : t.last + 1])]
    assert "".join(pieces).replace("#", "").replace("Ġ", "").replace("▁", "").lower() == "moviejoyless"
    ls, le = by_hand(lm, QUESTION, CONTEXT, t.first, t.last)
    assert chosen.f_x == pytest.approx(ls + le, abs=1e-4)
    check_record(lm, chosen, n_steps=16)


def test_prob_target_is_the_spans_score(qa):
    """``target="prob"``: F(x) is p(start) x p(end), the span's score as answer reports it, and equals the
    reference; the record's numbers differ from the log-probability's."""
    lm = qa("bert")
    [a] = bv.answer(lm, QUESTION, CONTEXT, no_answer_threshold=None)
    rec = explain_answer(lm, QUESTION, CONTEXT, target="prob", n_steps=16)[0]
    assert rec.objective == "prob" and rec.f_x == pytest.approx(a.score, rel=1e-4)
    check_record(lm, rec, n_steps=16)


def test_a_long_context_is_explained_on_the_window_of_the_answer(qa):
    """A model steered to "joy", "joy" once near the end of a context read in several windows: the record
    explains the window where the span's p is the highest (the reference picks it by hand), and equals the
    reference on that window's tokens; "no answer" explains the window of the lowest no-answer score (the one
    answer reports)."""
    lm = qa("bert", "joy")
    context = long_context(300, seed=7) + " and joy at last"
    [a] = bv.answer(lm, QUESTION, context, stride=16)
    rec = explain_answer(lm, QUESTION, context, stride=16, n_steps=16)[0]
    assert rec.windows > 3 and rec.target.text.strip() == "joy" and rec.target.start == a.start
    probs = []
    for w in range(rec.windows):
        ids, _, seq = _window(lm, QUESTION, context, w, 16)
        toks = lm.tokenizer.convert_ids_to_tokens(ids[0])
        at = [i for i, (tok, s) in enumerate(zip(toks, seq)) if s == 1 and tok == "joy"]
        if at:
            ls, le = by_hand(lm, QUESTION, context, at[0], at[0], w, 16)
            probs.append((ls + le, w))
    assert len(probs) >= 1 and rec.window == max(probs)[1] and rec.window > 0
    check_record(lm, rec, n_steps=16, stride=16, question_signal=False)  # steered to "joy" whatever is asked
    none = explain_answer(lm, QUESTION, context, "no-answer", stride=16, n_steps=16)[0]
    nulls = [sum(by_hand(lm, QUESTION, context, 0, 0, w, 16)) for w in range(rec.windows)]
    assert none.window == int(np.argmin(nulls)) and len(set(np.round(nulls, 3))) > 1
    assert none.target.p_start * none.target.p_end == pytest.approx(a.no_answer_score, rel=1e-4)
    check_record(lm, none, n_steps=16, stride=16, question_signal=False)


def test_occlusion_removes_each_word(qa):
    """Occlusion: a token's score is F(x) minus F with its word vector replaced; a word's the drop with all its
    tokens replaced (checked by hand on one word), no delta."""
    lm = qa("bert")
    ig = explain_answer(lm, QUESTION, CONTEXT, n_steps=16)[0]
    occ = occlude_answer(lm, QUESTION, CONTEXT)[0]
    assert occ.delta is None and occ.f_x == pytest.approx(ig.f_x, abs=1e-5)
    assert occ.f_baseline == pytest.approx(ig.f_baseline, abs=1e-4)
    ids, rest, seq = _window(lm, QUESTION, CONTEXT)
    words = lm.model.get_input_embeddings()
    w = next(x for x in occ.words if x.side == "context" and x.word == "awful")
    with torch.no_grad():
        x = words(ids)
        x[0, w.tokens[0] : w.tokens[1]] = words(torch.tensor([lm.tokenizer.pad_token_id]))[0]
        f = float(reference_f(lm, x, rest, seq, occ.target.first, occ.target.last)[0])
    assert w.score == pytest.approx(occ.f_x - f, abs=1e-4)
    assert np.abs(occ.scores).max() > 0.01


def test_refusals_say_what_to_send(qa):
    lm = qa("bert")
    cases = [
        (dict(span=(0, 10_000)), "not within the context"),
        (dict(span=(5, 3)), "not within the context"),
        (dict(span=(3, 4)), "only spaces"),
        (dict(span=(0, len(CONTEXT)), max_answer_len=3), "past the longest answer"),
        (dict(span="the film"), "span must be"),
        (dict(part="middle"), "part must be"),
        (dict(target="logit"), "target must be"),
    ]
    for kw, says in cases:
        with pytest.raises(InputError, match=says):
            explain_answer(lm, QUESTION, CONTEXT, n_steps=4, **kw)
    with pytest.raises(InputError, match="question"):
        explain_answer(lm, "  ", CONTEXT, n_steps=4)
    with pytest.raises(InputError, match="context"):
        explain_answer(lm, QUESTION, "", n_steps=4)


def test_a_classifier_is_refused(signal_model_dir):
    lm = bv.load_model(str(signal_model_dir("bert")), device="cpu")
    with pytest.raises(InputError, match="question answering"):
        explain_answer(lm, QUESTION, CONTEXT)


def test_model_line_says_answer_spans(qa):
    from bertviz_app.ui.model_loading import model_line

    line = model_line(qa("bert"))
    assert "answer spans from a context" in line and "classes" not in line


# ------------------------------------------------------------------------------------------------ the CLI
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_explain_question_json_and_lines(capsys, qa):
    """explain --question --context: the library's records as JSON lines (span, --start, --end, --no-answer,
    --span START:END), and lines naming the target and the top words; no text positional needed."""
    lm = qa("bert")
    path = str(qa.paths["bert", "random"])
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", CONTEXT, "--model", path,
                         "--n-steps", "16", "--tolerance", "0", "--json")
    assert code == 0, err
    [got] = [json.loads(line) for line in out.splitlines()]
    want = explain_answer(lm, QUESTION, CONTEXT, n_steps=16)[0].to_dict()
    assert got["target"] == want["target"] and got["tokens"] == want["tokens"]
    np.testing.assert_allclose(got["scores"], want["scores"], atol=1e-6)
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", CONTEXT, "--model", path,
                         "--start", "--end", "--n-steps", "16", "--tolerance", "0", "--json")
    assert code == 0, err
    assert [json.loads(line)["target"]["part"] for line in out.splitlines()] == ["start", "end"]
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", CONTEXT, "--model", path,
                         "--no-answer", "--n-steps", "16", "--tolerance", "0", "--json")
    assert code == 0, err and json.loads(out)["target"]["kind"] == "no-answer"
    at = CONTEXT.index("awful")
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", CONTEXT, "--model", path,
                         "--span", f"{at}:{at + 5}", "--n-steps", "16", "--tolerance", "0")
    assert code == 0, err
    assert "'awful'" in out and "F(x)=" in out and "question" in out
    code, out, err = run(capsys, "explain", "--question", QUESTION, "--context", CONTEXT, "--model", path,
                         "--span", "5")
    assert code != 0 and "START:END" in err


# --------------------------------------------------------------------------- the JSON API
def test_v1_explain_answer_answers_the_librarys_records_and_refuses_clearly(qa, signal_model_dir, tmp_path):
    """POST /v1/explain_answer: the same records as ``explain_answer`` (target, tokens, scores within a relative
    1e-5, completeness against f_x - f_baseline), several parts in one call, a span given by characters; each bad
    body one {"error"} line naming what to send."""
    import httpx

    from conftest import served_app

    lm = qa("bert", "joy")
    folder = str(qa.paths["bert", "joy"])
    want = explain_answer(lm, QUESTION, CONTEXT, part=["span", "start"], n_steps=64, tolerance=None)
    with served_app(folder, BERTVIZ_MODELS_DIR=tmp_path) as url:
        body = {"question": QUESTION, "context": CONTEXT, "parts": ["span", "start"], "n_steps": 64, "tolerance": 0}
        r = httpx.post(f"{url}v1/explain_answer", json=body, timeout=120)
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["question"] == QUESTION and got["context"] == CONTEXT and len(got["explanations"]) == 2
        for g, w in zip(got["explanations"], want):
            assert g["target"] == w.target.to_dict() | {"objective": "logprob"}
            assert g["tokens"] == list(w.tokens) and g["sides"] == list(w.sides) and g["n_steps"] == 64
            scale = float(np.abs(w.scores).max())
            assert scale > 1e-3  # the steered model's scores carry signal
            np.testing.assert_allclose(g["scores"], w.scores, rtol=1e-4, atol=1e-5 * scale)
            assert sum(g["scores"]) + g["delta"] == pytest.approx(g["f_x"] - g["f_baseline"], rel=1e-4, abs=1e-6)
        # the predicted answer's characters (whole words, as the pipeline answers): its tokens, all of them
        start, end = want[0].target.start, want[0].target.end
        [by_chars] = explain_answer(lm, QUESTION, CONTEXT, (start, end), n_steps=64, tolerance=None)
        r = httpx.post(f"{url}v1/explain_answer", json={"question": QUESTION, "context": CONTEXT,
                                                         "span": [start, end], "n_steps": 64, "tolerance": 0},
                       timeout=120)
        assert r.status_code == 200, r.text
        [chosen] = r.json()["explanations"]
        assert chosen["target"] == by_chars.target.to_dict() | {"objective": "logprob"}
        assert chosen["target"]["kind"] == "chosen" and chosen["target"]["text"] == CONTEXT[start:end]
        np.testing.assert_allclose(chosen["scores"], by_chars.scores, rtol=1e-4,
                                   atol=1e-5 * float(np.abs(by_chars.scores).max()))
        r = httpx.post(f"{url}v1/explain_answer", json={"question": QUESTION, "context": CONTEXT,
                                                         "span": "no-answer", "n_steps": 16, "tolerance": 0},
                       timeout=120)
        assert r.status_code == 200 and r.json()["explanations"][0]["target"]["kind"] == "no-answer", r.text
        for bad, status, message in (({"question": "", "context": CONTEXT}, 400, "The question is empty"),
                                     ({"question": QUESTION, "context": CONTEXT, "span": [1]}, 400,
                                      "span must be [start, end]"),
                                     ({"question": QUESTION, "context": CONTEXT, "parts": "middle"}, 400, "middle"),
                                     ({"question": QUESTION, "context": CONTEXT, "objective": "odds"}, 400, "odds"),
                                     ({"question": QUESTION, "context": CONTEXT, "model":
                                       str(signal_model_dir("bert"))}, 400, "is a sequence classification model"),
                                     ({"question": QUESTION, "context": CONTEXT, "part": "span"}, 422, "part")):
            r = httpx.post(f"{url}v1/explain_answer", json=bad, timeout=60)
            assert r.status_code == status, (bad, r.text)
            assert set(r.json()) == {"error"} and message in r.json()["error"] and "Traceback" not in r.text
        schema = httpx.get(f"{url}openapi.json", timeout=30).json()
        assert "/v1/explain_answer" in schema["paths"] and "ExplainAnswerResponse" in schema["components"]["schemas"]
