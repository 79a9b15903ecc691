"""Attributions for a tagger (issue 32): Integrated Gradients of an entity's summed log-probability (and of one
token's label, "why is this word O"), occlusion per entity, on a tiny tagger of each of the 7 families.

The independent reference is written here with plain torch: the model's own forward from word vectors
(``model(inputs_embeds=...)``, every position), the entity's pieces found from the tokenizer's offsets, the target
summed over them, and the straight-path integral as a Gauss-Legendre sum (the same nodes the engine's fixed steps
use: equal to float rounding) or a 1024-point midpoint Riemann sum (the integral itself, for adaptive steps). The
taggers are each family's tiny model (``conftest.build_family_model``) with a seeded token head (weights normal x
0.5, bias normal x 0.5 and "O" raised, so entities and "O" pieces both occur)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers as tf

import bertviz_app as bv
from bertviz_app.cli import main
from bertviz_app.errors import InputError
from bertviz_app.interpret.attribution_options import recommended_baseline
from bertviz_app.interpret.entity_attribution import explain_entities, occlude_entities
from bertviz_app.interpret.entity_methods import sample_entities

from conftest import FAMILIES, build_family_model

BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
TEXT = "the film was awful the movie joyless"
REPEATED = "joy joy joy the the film"


def build_tagger(family: str, path, o_bias: float = 1.5, seed: int = 0):
    """``family``'s tiny model with a seeded token head saved in ``path`` (see the module's docstring)."""
    build_family_model(family, path)
    cfg = tf.AutoConfig.from_pretrained(path)
    cfg.num_labels, cfg.id2label, cfg.label2id = len(BIO), dict(enumerate(BIO)), {t: i for i, t in enumerate(BIO)}
    torch.manual_seed(seed)
    model = tf.AutoModelForTokenClassification.from_config(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.classifier.weight.copy_(0.5 * torch.randn(model.classifier.weight.shape, generator=gen))
        model.classifier.bias.copy_(0.5 * torch.randn(len(BIO), generator=gen))
        model.classifier.bias[0] += o_bias
    (path / "model.safetensors").unlink()
    model.save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    """``tagger(family, o_bias)``: the loaded tiny tagger, built on first use and kept for the module."""
    built, paths = {}, {}

    def get(family: str = "bert", o_bias: float = 1.5):
        if (family, o_bias) not in built:
            path = build_tagger(family, tmp_path_factory.mktemp(f"entity-{family}") / family, o_bias)
            built[family, o_bias], paths[family, o_bias] = bv.load_model(str(path), device="cpu"), path
        return built[family, o_bias]

    get.paths = paths
    return get


# ------------------------------------------------------------------------------------------- the reference
def _inputs(lm, text):
    """(word vectors (1, T, D), the rest of the model's inputs, each text piece's position, offsets, specials)."""
    tok, model = lm.tokenizer, lm.model
    enc = tok(text, return_tensors="pt", return_offsets_mapping=True)
    offsets = [tuple(o) for o in enc.pop("offset_mapping")[0].tolist()]
    ids = enc.pop("input_ids")
    positions = [i for i, s in enumerate(enc.sequence_ids(0)) if s == 0]
    rest = {k: v for k, v in enc.items() if k in ("attention_mask", "token_type_ids")}
    with torch.no_grad():
        x = model.get_input_embeddings()(ids)
    return ids, x, rest, positions, offsets


def reference_f(lm, emb, rest, at, label_ids):
    """F (B,) of word vectors (B, T, D): the model's own forward, log-softmax, summed at the target's pieces."""
    n = emb.shape[0]
    logits = lm.model(inputs_embeds=emb, **{k: v.expand(n, -1) for k, v in rest.items()}).logits  # (B, T, C)
    logp = torch.log_softmax(logits.double(), dim=-1)
    return sum(logp[:, p, c] for p, c in zip(at, label_ids))


def reference_ig(lm, text, at, label_ids, baseline="pad", gauss_legendre=None, steps=1024):
    """(per-piece scores (P,), F(x), F(baseline)) by plain torch along the straight path from the baseline's word
    vectors (each text piece replaced by the baseline token; specials kept) to the text's."""
    ids, x, rest, positions, _ = _inputs(lm, text)
    base_ids = ids.clone()
    base_ids[0, positions] = getattr(lm.tokenizer, f"{baseline}_token_id")
    with torch.no_grad():
        b = lm.model.get_input_embeddings()(base_ids)
        f_x, f_b = (float(v) for v in reference_f(lm, torch.cat([x, b]), rest, at, label_ids))
    if gauss_legendre is None:
        alphas, weights = (np.arange(steps) + 0.5) / steps, np.full(steps, 1.0 / steps)
    else:
        nodes, w = np.polynomial.legendre.leggauss(gauss_legendre)
        alphas, weights = (nodes + 1) / 2, w / 2
    total = torch.zeros(x.shape[1], dtype=torch.float64)
    for chunk, wts in zip(np.array_split(alphas, max(1, len(alphas) // 256)),
                          np.array_split(weights, max(1, len(alphas) // 256))):
        a = torch.tensor(chunk, dtype=torch.float32).view(-1, 1, 1)
        path = (b + a * (x - b)).requires_grad_()
        (grad,) = torch.autograd.grad(reference_f(lm, path, rest, at, label_ids).sum(), path)
        total += ((grad * (x - b)).sum(-1).double() * torch.tensor(wts).view(-1, 1)).sum(0)
    return total.numpy()[positions], f_x, f_b


def label_ids_of(lm, rec):
    """The label ids the record says it summed, checked by hand against the rule: each piece the label the tagger
    gave it where that names the entity (B-X, I-X), else B-X at the first piece and I-X at the later ones."""
    names = list(rec.target.piece_labels)
    if rec.target.kind == "entity":
        a, b = rec.target.pieces
        x = rec.target.label
        given = bv.tag(lm, rec.text)[0].labels[a:b]
        assert names == [g if g in (f"B-{x}", f"I-{x}") else (f"B-{x}" if j == 0 else f"I-{x}")
                         for j, g in enumerate(given)]
    return [BIO.index(n) for n in names]


def check_record(lm, rec, n_steps=None, tolerance=None):
    """``rec`` against the reference: its pieces are the ones overlapping its characters, F(x) and F(baseline)
    from separate forward passes, the completeness identity, and the scores: the same Gauss-Legendre rule to
    1e-4 of the gap (fixed steps) or the integral within ``tolerance`` (adaptive)."""
    ids, _, _, positions, offsets = _inputs(lm, rec.text)
    at = [p for p in positions if offsets[p][0] < rec.target.end and offsets[p][1] > rec.target.start]
    assert [positions.index(p) for p in at] == list(range(*rec.target.pieces))
    labels = label_ids_of(lm, rec)
    ref, f_x, f_b = reference_ig(lm, rec.text, at, labels, rec.baseline, gauss_legendre=n_steps)
    gap = f_x - f_b
    scale = max(abs(gap), float(np.abs(ref).sum()))  # what the scores share out (a small gap may hide big scores)
    assert rec.f_x == pytest.approx(f_x, rel=1e-5, abs=1e-6)
    assert rec.f_baseline == pytest.approx(f_b, rel=1e-5, abs=1e-6)
    assert rec.delta == pytest.approx(float(rec.scores.sum()) - gap, abs=1e-4 * scale)
    if n_steps is not None:
        np.testing.assert_allclose(rec.scores, ref, rtol=0, atol=1e-4 * scale)
    if tolerance is not None:
        assert abs(gap) > 0.05, f"F(x) - F(baseline) = {gap:.3g}: too small to test anything"
        assert abs(float(rec.scores.sum()) - gap) <= tolerance * abs(gap)
        np.testing.assert_allclose(rec.scores, ref, rtol=0, atol=tolerance * scale)
    return gap


# ------------------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("family", FAMILIES)
def test_every_entity_and_a_token_equal_the_reference_integral(family, tagger):
    """Fixed steps: every entity of the text and one token, in one call, equal the reference's same rule; adaptive
    steps on the entity of the largest change: complete within the tolerance and equal to the integral. An
    entity's F(x) is also the sum of ``tag``'s own log-probabilities of its labels (what the tagger reports)."""
    lm = tagger(family)
    baseline = recommended_baseline(lm)  # DeBERTa-v2: [PAD] path starts with a jump (baseline_jumps)
    t = bv.tag(lm, TEXT)[0]
    assert len(t.entities) >= 2
    recs = explain_entities(lm, TEXT, range(len(t.entities)), token=1, baseline=baseline, n_steps=16)
    assert [r.target.kind for r in recs] == ["entity"] * len(t.entities) + ["token"]
    gaps = []
    for k, rec in enumerate(recs[:-1]):
        assert (rec.target.text, rec.target.start, rec.target.end, rec.target.entity) == (
            t.entities[k].text, t.entities[k].start, t.entities[k].end, k)
        a, b = rec.target.pieces
        logp = sum(np.log(t.probs[p, BIO.index(n)]) for p, n in zip(range(a, b), rec.target.piece_labels))
        assert rec.f_x == pytest.approx(logp, abs=1e-4)
        gaps.append(check_record(lm, rec, n_steps=16))
    assert sum(abs(g) > 0.1 for g in gaps) >= 2, f"too little signal to test anything: gaps {gaps}"
    token = recs[-1]
    assert token.target.label == t.labels[1] and token.target.pieces == (1, 2)
    check_record(lm, token, n_steps=16)
    strongest = max(range(len(gaps)), key=lambda k: abs(gaps[k]))
    adaptive = explain_entities(lm, TEXT, strongest, baseline=baseline, tolerance=0.02)[0]
    assert adaptive.tolerance == 0.02 and adaptive.relative_delta <= 0.02
    check_record(lm, adaptive, tolerance=0.02)


def test_why_this_word_is_o(tagger):
    """A piece the model tags O: the explained label is O, F(x) = log p(O) there; another label may be asked for
    at the same piece, and the two differ (a positive control that ``label`` is read)."""
    lm = tagger("bert")
    t = bv.tag(lm, TEXT)[0]
    o = [i for i, lab in enumerate(t.labels) if lab == "O"]
    assert o, "the fixture tags no piece O: the test would test nothing"
    why_o, why_per = explain_entities(lm, TEXT, token=[o[0], o[0]], label=None, n_steps=16)[0], \
        explain_entities(lm, TEXT, token=o[0], label="B-PER", n_steps=16)[0]
    assert why_o.target.label == "O" and why_o.target.piece_labels == ("O",)
    assert why_o.f_x == pytest.approx(np.log(t.probs[o[0], 0]), abs=1e-5)
    assert why_per.target.label == "B-PER"
    assert why_per.f_x == pytest.approx(np.log(t.probs[o[0], 1]), abs=1e-5)
    check_record(lm, why_o, n_steps=16)
    check_record(lm, why_per, n_steps=16)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_many_entities_share_the_passes_and_equal_one_at_a_time(family, tagger):
    """All entities of a text in one call: the same records as one call per entity (fixed and adaptive steps), in
    3 forward passes through the model (the tagging, f at the ends, then every path point of every entity) against 3
    per entity one at a time."""
    lm = tagger(family)
    calls = []
    hook = lm.model.classifier.register_forward_hook(lambda *a: calls.append(1))
    try:
        n = len(bv.tag(lm, TEXT)[0].entities)
        assert n >= 3
        calls.clear()
        together = explain_entities(lm, TEXT, n_steps=8)
        assert len(calls) == 3  # the tagging, f at the ends, every path point of every entity
        calls.clear()
        alone = [explain_entities(lm, TEXT, k, n_steps=8)[0] for k in range(n)]
        assert len(calls) == 3 * n
    finally:
        hook.remove()
    adaptive_together = explain_entities(lm, TEXT, tolerance=0.01)
    adaptive_alone = [explain_entities(lm, TEXT, [k], tolerance=0.01)[0] for k in range(n)]
    for a, b in zip(together + adaptive_together, alone + adaptive_alone):
        assert a.target == b.target and a.n_steps == b.n_steps
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-5 * abs(b.f_x - b.f_baseline))
        assert a.f_x == pytest.approx(b.f_x, abs=1e-6) and a.delta == pytest.approx(b.delta, abs=1e-5)


def test_words_sum_their_pieces_and_a_repeated_word_keeps_each_position(tagger):
    """Each word of the tokenizer once per position, its score the sum of its pieces'; the repeated words of the
    text are words of their own with their own characters and scores (never merged by their string)."""
    lm = tagger("bert")
    t = bv.tag(lm, REPEATED)[0]
    recs = explain_entities(lm, REPEATED, token=list(range(len(t.tokens))), n_steps=8)
    for rec in recs:
        assert [w.word for w in rec.words] == REPEATED.split(" ")
        assert [REPEATED[w.start : w.end] for w in rec.words] == [w.word for w in rec.words]
        for w in rec.words:
            assert w.score == pytest.approx(float(rec.scores[w.pieces[0] : w.pieces[1]].sum()), abs=1e-7)
    joy = recs[0]  # the first "joy" explained: the three "joy" words score differently
    scores = [w.score for w in joy.words if w.word == "joy"]
    assert len(scores) == 3 and len({round(s, 6) for s in scores}) == 3
    assert max(range(len(joy.words)), key=lambda i: abs(joy.words[i].score)) == 0  # its own word explains most
    starts = [r.target.start for r in recs if r.target.text == "joy"]
    assert starts == [0, 4, 8]


def test_occlusion_per_entity_equals_the_reference(tagger):
    """Occlusion: a piece's score is F(x) - F(x with that piece's word vector replaced by [PAD]'s), a word's the
    drop when all its pieces are replaced, every entity read from the same batched variants; checked against the
    model's own forward, on a text with a word of several pieces."""
    lm = tagger("roberta")
    text = "the filmgoer was great the slogs is funny"
    recs = occlude_entities(lm, text)
    assert len(recs) == len(bv.tag(lm, text)[0].entities) >= 2
    ids, x, rest, positions, offsets = _inputs(lm, text)
    with torch.no_grad():
        pad = lm.model.get_input_embeddings()(torch.tensor([lm.tokenizer.pad_token_id]))[0]
        for rec in recs:
            at = [p for p in positions if offsets[p][0] < rec.target.end and offsets[p][1] > rec.target.start]
            labels = label_ids_of(lm, rec)

            def drop(pieces, at=at, labels=labels):
                y = x.clone()
                y[0, [positions[p] for p in pieces]] = pad
                return float(reference_f(lm, x, rest, at, labels)[0] - reference_f(lm, y, rest, at, labels)[0])

            assert rec.delta is None and rec.method == "occlusion"
            np.testing.assert_allclose(rec.scores, [drop([p]) for p in range(len(positions))], atol=1e-5)
            assert [w.score for w in rec.words] == pytest.approx([drop(range(*w.pieces)) for w in rec.words],
                                                                 abs=1e-5)
    assert any(w.pieces[1] - w.pieces[0] > 1 for w in recs[0].words)  # a word of several pieces was occluded


def test_a_long_text_is_explained_in_the_window_that_reads_the_entity(tagger):
    """A text longer than the model reads: an entity past the first window is explained on its most central
    window (the record says which); pieces outside it score 0; completeness holds on that window."""
    lm = tagger("bert")
    text = " ".join(["the film was awful the movie joyless"] * 20)
    t = bv.tag(lm, text, stride=16)[0]
    assert t.windows >= 3
    last = len(t.entities) - 1
    rec = explain_entities(lm, text, last, stride=16, n_steps=16)[0]
    assert rec.window == t.windows - 1 and rec.target.start == t.entities[last].start
    assert len(rec.scores) == len(t.tokens) and not rec.scores[:40].any()
    assert abs(rec.delta) <= 1e-3 * abs(rec.f_x - rec.f_baseline)
    assert rec.scores.sum() == pytest.approx(rec.f_x - rec.f_baseline, abs=1e-3 * abs(rec.f_x - rec.f_baseline))


def test_refusals_say_what_to_send(tagger, tmp_path):
    """A classifier, an entity or token past the text's, an unknown label or target, a text with nothing to
    explain: InputError naming what to do; each with a positive control that the same call otherwise works."""
    lm = tagger("bert")
    n = len(bv.tag(lm, TEXT)[0].entities)
    assert explain_entities(lm, TEXT, n - 1, n_steps=4)[0].target.entity == n - 1  # positive control
    with pytest.raises(InputError, match=f"entity {n} is past this text's entities: it has {n}"):
        explain_entities(lm, TEXT, n, n_steps=4)
    with pytest.raises(InputError, match="whole number from 0"):
        explain_entities(lm, TEXT, -1, n_steps=4)
    n_tokens = len(bv.tag(lm, TEXT)[0].tokens)
    assert explain_entities(lm, TEXT, token=n_tokens - 1, n_steps=4)[0].target.token == n_tokens - 1
    with pytest.raises(InputError, match=f"it has {n_tokens}"):
        explain_entities(lm, TEXT, token=n_tokens, n_steps=4)
    with pytest.raises(InputError, match="Unknown class 'B-ORG'"):
        explain_entities(lm, TEXT, token=0, label="B-ORG", n_steps=4)
    with pytest.raises(InputError, match="target must be one of logprob, prob"):
        explain_entities(lm, TEXT, 0, target="logit", n_steps=4)
    prob = explain_entities(lm, TEXT, 0, target="prob", n_steps=4)[0]
    logprob = explain_entities(lm, TEXT, 0, n_steps=4)[0]
    assert prob.f_x == pytest.approx(np.exp(logprob.f_x), rel=1e-5)
    quiet = tagger("bert", o_bias=20.0)  # tags every piece O: no entities
    assert not bv.tag(quiet, TEXT)[0].entities
    with pytest.raises(InputError, match="no entities; pass token=I"):
        explain_entities(quiet, TEXT, n_steps=4)
    assert explain_entities(quiet, TEXT, token=0, n_steps=4)[0].target.label == "O"
    classifier = bv.load_model(str(build_family_model("bert", tmp_path / "clf")), device="cpu")
    with pytest.raises(InputError, match="sequence classification model.*needs a token classification model"):
        explain_entities(classifier, TEXT)


def test_cli_explain_entity_and_token(tagger, tmp_path, capsys):
    """``explain TEXT --entity K --json``: the library's record as JSON (its shape, its numbers); ``--token I``;
    the human output's top words and delta; refusals: an entity past the text's (naming how many it has), a
    classifier given --entity (a classifier without it is explained as before: the positive control)."""
    lm = tagger("bert")
    path = str(tagger.paths["bert", 1.5])
    steps = ["--n-steps", "8", "--tolerance", "0"]
    assert main(["explain", TEXT, "--model", path, "--entity", "1", "--json", *steps]) == 0
    out = json.loads(capsys.readouterr().out)
    rec = explain_entities(lm, TEXT, 1, n_steps=8)[0]
    assert set(out) >= {"text", "target", "tokens", "scores", "words", "f_x", "f_baseline", "delta", "n_steps",
                        "tolerance"}
    assert out["target"] == rec.target.to_dict() | {"objective": "logprob"} and out["target"]["index"] == 1
    assert out["tokens"] == list(rec.tokens) and out["n_steps"] == 8 and out["tolerance"] is None
    np.testing.assert_allclose(out["scores"], rec.scores, atol=1e-6)
    assert [(w["word"], w["start"], w["end"]) for w in out["words"]] == [(w.word, w.start, w.end) for w in rec.words]
    assert out["delta"] == pytest.approx(sum(out["scores"]) - (out["f_x"] - out["f_baseline"]), abs=1e-5)
    assert main(["explain", TEXT, "--model", path, "--token", "2", "--label", "O", "--json", *steps]) == 0
    token = json.loads(capsys.readouterr().out)
    assert token["target"]["kind"] == "token" and token["target"]["label"] == "O" and token["target"]["index"] == 2
    assert main(["explain", TEXT, "--model", path, "--entity", "0", *steps]) == 0
    human = capsys.readouterr().out
    assert "top words" in human and "convergence delta" in human and "entity 0" in human
    n = len(bv.tag(lm, TEXT)[0].entities)
    assert main(["explain", TEXT, "--model", path, "--entity", str(n), *steps]) != 0
    assert f"it has {n}" in capsys.readouterr().err
    assert main(["explain", TEXT, "--model", path, "--entity", "1", "--method", "occlusion", "--json"]) == 0
    occluded = json.loads(capsys.readouterr().out)  # --method occlusion: the library's occlusion record
    want = occlude_entities(lm, TEXT, 1)[0]
    assert occluded["method"] == "occlusion" and occluded["delta"] is None
    np.testing.assert_allclose(occluded["scores"], want.scores, rtol=1e-5, atol=1e-6 * np.abs(want.scores).max())
    assert main(["explain", TEXT, "--model", path, "--entity", "1", "--method", "lime", "--n-samples", "80",
                 "--seed", "2", "--json"]) == 0
    sampled = json.loads(capsys.readouterr().out)  # --method lime: the library's LIME record, seeded
    want = sample_entities(lm, TEXT, 1, method="lime", n_samples=80, seed=2)[0]
    assert sampled["method"] == "lime" and sampled["delta"] is None
    np.testing.assert_allclose(sampled["scores"], want.scores, rtol=1e-5, atol=1e-6 * np.abs(want.scores).max())
    assert main(["explain", TEXT, "--model", path, "--entity", "1", "--method", "saliency"]) != 0
    assert ("a tagger is explained with --method integrated_gradients, occlusion, lime or kernel_shap, not saliency"
            in capsys.readouterr().err)
    classifier = str(build_family_model("bert", tmp_path / "clf"))
    assert main(["explain", TEXT, "--model", classifier, "--entity", "0", *steps]) != 0
    assert "drop them to explain its class" in capsys.readouterr().err
    assert main(["explain", TEXT, "--model", classifier, "--json", *steps]) == 0  # positive control
    assert "target" in json.loads(capsys.readouterr().out.splitlines()[0])


def test_an_entity_the_tagger_starts_with_i_is_explained_as_the_tagger_read_it(tagger, tmp_path):
    """An entity the tagger starts with I-PER (the words' aggregation still reads it as an entity) is explained as
    the tagger read it: F(x) is the sum of the log-probabilities of the labels the tagger gave its pieces, not of
    B-PER on the first piece. The tiny tagger and the same with its B-PER and I-PER rows swapped give PER
    entities starting with each: both kinds are checked (the test says so if either is missing)."""
    lm = tagger("bert")
    folder = tmp_path / "swapped"
    model = tf.AutoModelForTokenClassification.from_pretrained(tagger.paths["bert", 1.5])
    b, i = BIO.index("B-PER"), BIO.index("I-PER")
    with torch.no_grad():
        for p in (model.classifier.weight, model.classifier.bias):
            p[[b, i]] = p[[i, b]].clone()
    model.save_pretrained(folder, safe_serialization=True)
    lm.tokenizer.save_pretrained(folder)
    starts = set()
    for m in (lm, bv.load_model(str(folder), device="cpu")):
        t = bv.tag(m, TEXT)[0]
        per = [k for k, e in enumerate(t.entities) if e.label == "PER"]
        for k, rec in zip(per, explain_entities(m, TEXT, per, n_steps=8)):
            assert rec.target.entity == k
            a, z = rec.target.pieces
            starts.add(t.labels[a])
            assert rec.target.piece_labels == tuple(t.labels[a:z])
            own = [BIO.index(n) for n in t.labels[a:z]]
            assert rec.f_x == pytest.approx(sum(np.log(t.probs[p, c]) for p, c in zip(range(a, z), own)), abs=1e-4)
    assert starts == {"B-PER", "I-PER"}, f"PER entities starting with {starts} only"
