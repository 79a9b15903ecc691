"""Evaluating a tagger on a tagged file (issue 32): the numbers against seqeval's strict IOB2 report computed on
predictions taken another way (``bv.tag``, the composed forward, words from the text), slices counted by hand,
the wrong sentences, the refusals (each with a positive control), the CLI's JSON, and two taggers compared with a
paired bootstrap checked draw by draw against seqeval.

A tiny tagger learns the toy task of tests/test_tagger_training.py (sentiment words are entities) in seconds; the
evaluation file adds sentences it cannot get right (an entity word it never saw tagged, a negation tagged as one
NEG entity), so there are errors, partial per-type scores and non-trivial intervals."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from seqeval.metrics import classification_report
from seqeval.scheme import IOB2
from test_tagger_training import TAGS, _sentences  # the toy task: sentiment words are entities

import bertviz_app as bv
from bertviz_app.errors import CancelledError, DataError, InputError
from bertviz_app.evaluate.tagger_evaluation import compare_taggers, evaluate_tagged
from bertviz_app.train.tagger_training import train_tagger
from bertviz_app.train.training import TrainConfig

from conftest import build_family_model

# sentences the tagger cannot get right: "joy" and "slog" are in the vocabulary but never tagged in training,
# and "not good" is one NEG entity here while the tagger learned "good" as POS
HARD = [(("it", "was", "joy"), ("O", "O", "B-POS")),
        (("joy", "is", "the", "film"), ("B-POS", "O", "O", "O")),
        (("the", "movie", "was", "a", "joy"), ("O", "O", "O", "O", "B-POS")),
        (("the", "film", "was", "not", "good"), ("O", "O", "O", "B-NEG", "I-NEG")),
        (("a", "slog", "it", "is"), ("O", "B-NEG", "O", "O"))]


def _write_conll(path, sentences: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> list[int]:
    """Write a CoNLL file (a -DOCSTART- line first); return the line each sentence starts on."""
    lines, starts = ["-DOCSTART- O", ""], []
    for tokens, tags in sentences:
        starts.append(len(lines) + 1)
        lines += [f"{w}\t{t}" for w, t in zip(tokens, tags)] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return starts


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(tagger, untrained tagger, the base classifier) folders: one trained for a few epochs, one whose fresh head
    took a single step at lr 1e-9 (the negative control), and the sequence classifier they started from."""
    root = tmp_path_factory.mktemp("tagger-eval")
    base = build_family_model("bert", root / "base")
    config = TrainConfig(epochs=3, learning_rate=1e-2, batch_size=16, warmup_ratio=0.0, early_stopping_patience=0,
                         seed=0)
    folders = {}
    for name, cfg, train in (("tagger", config, _sentences(96, 1)),
                             ("untrained", TrainConfig(epochs=0.01, learning_rate=1e-9, batch_size=16,
                                                       early_stopping_patience=0), _sentences(4, 1))):
        model, tok, _ = train_tagger(base, TAGS, train, None, cfg)
        model.save_pretrained(root / name, safe_serialization=True)
        tok.save_pretrained(root / name)
        folders[name] = root / name
    folders["base"] = base
    return folders


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The evaluation file: 60 toy sentences and the hard ones, and the line each starts on."""
    sentences = [(s.tokens, s.tags) for s in _sentences(60, seed=7)] + HARD
    path = tmp_path_factory.mktemp("tagger-eval-data") / "test.conll"
    return path, sentences, _write_conll(path, sentences)


def _tag_words(lm, sentences) -> list[list[str]]:
    """The reference predictions: ``bv.tag`` on each sentence's words joined by spaces, one label per word."""
    out = []
    for tokens, _ in sentences:
        [t] = bv.tag(lm, " ".join(tokens), aggregation="first")
        assert [w.text for w in t.words] == list(tokens)  # the tokenizer's words are the file's tokens
        out.append([w.label for w in t.words])
    return out


def _seqeval(true, pred) -> dict:
    return classification_report(true, pred, mode="strict", scheme=IOB2, output_dict=True, zero_division=0)


def test_the_numbers_are_seqevals_on_the_models_predictions(models, data):
    path, sentences, starts = data
    lm = bv.load_model(str(models["tagger"]))
    ev = evaluate_tagged(lm, str(path), words=("JOY", "not good", "nowhere"))
    true = [list(tags) for _, tags in sentences]
    pred = _tag_words(lm, sentences)
    assert [list(p) for p in ev.predicted] == pred
    ref = _seqeval(true, pred)
    assert 0.5 < ev.entity_f1 < 1.0  # learned, and not perfect: the hard sentences
    for ours, theirs in ((ev.entity_f1, "f1-score"), (ev.precision, "precision"), (ev.recall, "recall")):
        assert ours == pytest.approx(ref["micro avg"][theirs], rel=1e-9)
    assert ev.report["support"] == ref["micro avg"]["support"]
    assert set(ev.per_type) == {"NEG", "POS"}
    for t, s in ev.per_type.items():
        assert (s["precision"], s["recall"], s["f1"]) == pytest.approx(
            (ref[t]["precision"], ref[t]["recall"], ref[t]["f1-score"]), rel=1e-9)
        assert s["support"] == ref[t]["support"]
        lo, hi = s["interval"]["f1"]
        assert lo <= s["f1"] <= hi
    lo, hi = ev.report["interval"]["f1"]
    assert lo < ev.entity_f1 < hi and hi - lo < 0.3
    words = [(a, b) for t, p in zip(true, pred) for a, b in zip(t, p)]
    assert ev.report["token_accuracy"] == pytest.approx(sum(a == b for a, b in words) / len(words), rel=1e-12)
    assert ev.report["baseline"]["token_accuracy"] == pytest.approx(sum(a == "O" for a, _ in words) / len(words))
    # the wrong sentences: exactly those whose reference tags differ, in file order, at their lines
    wrong = [i for i, (t, p) in enumerate(zip(true, pred)) if t != p]
    assert 5 <= len(wrong) < len(sentences)
    assert [(e["where"], e["tokens"], e["tags"], e["predicted"]) for e in ev.errors()] == [
        (starts[i], list(sentences[i][0]), true[i], pred[i]) for i in wrong]
    assert all(e["wrong"] == [k for k, (a, b) in enumerate(zip(e["tags"], e["predicted"])) if a != b]
               for e in ev.errors())
    assert evaluate_tagged(lm, str(path)).report["interval"] == ev.report["interval"]  # seeded: the same twice


def test_slices_by_type_length_and_word_counted_by_hand(models, data):
    path, sentences, _ = data
    lm = bv.load_model(str(models["tagger"]))
    ev = evaluate_tagged(lm, str(path), words=("JOY", "not good", "Not  Good", "nowhere"))
    true, pred = [list(tags) for _, tags in sentences], [list(p) for p in ev.predicted]
    by_kind = {k: [s for s in ev.slices if s.kind == k] for k in ("type", "length", "word")}
    assert [s.value for s in by_kind["type"]] == ["NEG", "POS"]
    for s in by_kind["type"]:
        assert s.support == ev.per_type[s.value]["support"] and s.f1 == ev.per_type[s.value]["f1"]
    # word slices: "joy" is in the 3 hard sentences only, "not good" in one (named twice: one slice), "nowhere" in none
    words = {s.value: s for s in by_kind["word"]}
    assert list(words) == ["JOY", "not good", "nowhere"]
    assert (words["JOY"].n_sentences, words["JOY"].support, words["JOY"].predicted) == (3, 3, 0)
    assert words["JOY"].f1 == 0.0 and words["JOY"].interval == (0.0, 0.0)
    assert words["not good"].n_sentences == 1 and words["not good"].support == 1
    assert words["nowhere"].n_sentences == 0 and words["nowhere"].f1 is None and words["nowhere"].interval is None
    # length slices: disjoint ranges of words per sentence covering every sentence, each scored as seqeval scores it
    lengths = [len(tokens) for tokens, _ in sentences]
    spans = [tuple(int(x) for x in s.value.split("-")) if "-" in s.value else (int(s.value),) * 2
             for s in by_kind["length"]]
    assert 2 <= len(spans) <= 4 and all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
    assert sum(s.n_sentences for s in by_kind["length"]) == len(sentences)
    for s, (lo, hi) in zip(by_kind["length"], spans):
        idx = [i for i, n in enumerate(lengths) if lo <= n <= hi]
        assert s.n_sentences == len(idx) and min(lengths[i] for i in idx) == lo and max(lengths[i] for i in idx) == hi
        ref = _seqeval([true[i] for i in idx], [pred[i] for i in idx])["micro avg"]
        assert (s.precision, s.recall, s.f1) == pytest.approx((ref["precision"], ref["recall"], ref["f1-score"]),
                                                               rel=1e-9, abs=1e-12)
        assert s.support == ref["support"]


def test_length_bins_are_the_quartiles_of_sentence_lengths(models, tmp_path):
    """Lengths 1,1,2,2,3,3,4,4: the quartiles (lower) are 1, 2 and 3, so four bins of two sentences, a bin holding
    the lengths above the edge before it up to its own edge."""
    words = ["it", "was", "fun", "film"]
    _write_conll(tmp_path / "lengths.conll", [(tuple(words[:n]), ("O",) * (n - 1) + ("B-POS",) * (n > 2) + ("O",) *
                                               (n <= 2)) for n in (1, 1, 2, 2, 3, 3, 4, 4)])
    ev = evaluate_tagged(bv.load_model(str(models["tagger"])), str(tmp_path / "lengths.conll"))
    assert [(s.name, s.n_sentences) for s in ev.slices if s.kind == "length"] == [
        ("length 1 word", 2), ("length 2 words", 2), ("length 3 words", 2), ("length 4 words", 2)]


def test_an_io_file_on_an_iob2_tagger_is_converted_with_a_notice(models, data, tmp_path):
    _, sentences, _ = data
    lm = bv.load_model(str(models["tagger"]))
    io = [(tokens, tuple(t.split("-", 1)[-1] for t in tags)) for tokens, tags in sentences]
    iob2 = []  # the IO tags written as IOB2 here: each run of one type one entity
    for tokens, tags in io:
        iob2.append((tokens, tuple("O" if t == "O" else ("I-" if k and tags[k - 1] == t else "B-") + t
                                   for k, t in enumerate(tags))))
    _write_conll(tmp_path / "io.conll", io)
    _write_conll(tmp_path / "iob2.conll", iob2)
    got, want = evaluate_tagged(lm, str(tmp_path / "io.conll")), evaluate_tagged(lm, str(tmp_path / "iob2.conll"))
    assert got.scheme == "IOB2" and any("converted to IOB2" in n for n in got.notices)
    assert not any("converted" in n for n in want.notices)  # positive control: the IOB2 file needs no conversion
    assert got.to_dict()["per_type"] == want.to_dict()["per_type"] and got.entity_f1 == want.entity_f1


def test_refusals_each_with_a_positive_control(models, data, tmp_path):
    path, sentences, _ = data
    lm = bv.load_model(str(models["tagger"]))
    # tags the model lacks: named with their lines, beside the model's tags
    misc = [(("the", "film", "is", "fun"), ("O", "B-MISC", "O", "B-POS"))] + sentences[:3]
    _write_conll(tmp_path / "misc.conll", misc)
    with pytest.raises(DataError, match=r"'B-MISC' \(line 4\) is not among the tags of .*'B-POS'"):
        evaluate_tagged(lm, str(tmp_path / "misc.conll"))
    _write_conll(tmp_path / "ok.conll", [(misc[0][0], ("O", "O", "O", "B-POS"))] + sentences[:3])
    assert evaluate_tagged(lm, str(tmp_path / "ok.conll")).n_sentences == 4
    # a classifier given the tagged file: the message names both heads
    with pytest.raises(InputError, match="sequence classification model.*needs a token classification model"):
        evaluate_tagged(bv.load_model(str(models["base"])), str(path))
    # a classifier's table given to the tagger names the other task; a tokens/tags CSV is read
    (tmp_path / "reviews.csv").write_text("text,label\nthe film was good,positive\nit was bad,negative\n")
    with pytest.raises(DataError, match="text-classification task"):
        evaluate_tagged(lm, str(tmp_path / "reviews.csv"))
    (tmp_path / "tagged.csv").write_text('tokens,tags\nthe film was good,O O O B-POS\n'
                                         '"[""it"", ""was"", ""bad""]","[""O"", ""O"", ""B-NEG""]"\n')
    assert evaluate_tagged(lm, str(tmp_path / "tagged.csv")).unit == "row"
    # an empty sentence; a sentence longer than the model reads (64 pieces here), with its line
    (tmp_path / "empty.jsonl").write_text('{"tokens": ["it", "is", "fun"], "tags": ["O", "O", "B-POS"]}\n'
                                          '{"tokens": [], "tags": []}\n')
    with pytest.raises(DataError, match="line 2 is an empty sentence"):
        evaluate_tagged(lm, str(tmp_path / "empty.jsonl"))
    (tmp_path / "one.jsonl").write_text('{"tokens": ["it", "is", "fun"], "tags": ["O", "O", "B-POS"]}\n')
    assert evaluate_tagged(lm, str(tmp_path / "one.jsonl")).entity_f1 == 1.0
    starts = _write_conll(tmp_path / "long.conll", sentences[:2] + [(("film",) * 80, ("O",) * 80)])
    with pytest.raises(DataError, match=rf"\(line {starts[2]}\) is longer than the 64 word-pieces"):
        evaluate_tagged(lm, str(tmp_path / "long.conll"))


def test_progress_runs_to_the_end_and_cancel_stops(models, data):
    path, sentences, _ = data
    lm = bv.load_model(str(models["tagger"]))
    seen = []
    evaluate_tagged(lm, str(path), batch_size=16, progress=lambda d, t: seen.append((d, t)))
    n = len(sentences)
    assert seen[-1] == (n, n) and len(seen) == -(-n // 16) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    stop = threading.Event()
    stop.set()
    with pytest.raises(CancelledError, match=f"after 0 of {n} sentences"):
        evaluate_tagged(lm, str(path), cancel=stop)


def test_two_taggers_compared_with_a_paired_bootstrap(models, data):
    path, sentences, _ = data
    trained, untrained = bv.load_model(str(models["tagger"])), bv.load_model(str(models["untrained"]))
    same = compare_taggers(trained, trained, str(path))
    assert same.difference == 0.0 and same.interval == (0.0, 0.0)
    assert all(d["difference"] == 0.0 and tuple(d["interval"]) == (0.0, 0.0) for d in same.per_type.values())
    assert same.sentences["only_a_right"] == same.sentences["only_b_right"] == same.sentences["disagree"] == 0
    c = compare_taggers(untrained, trained, str(path), samples=200, seed=3)
    assert c.difference == pytest.approx(c.b.entity_f1 - c.a.entity_f1) and c.difference > 0.4
    assert c.interval[0] > 0 and "excludes 0" in c.reading and c.b.model in c.reading
    # the paired draws, recomputed with seqeval: each draw repeats sentences as often as drawn, both models on it
    true = [list(tags) for _, tags in sentences]
    pa, pb = [list(p) for p in c.a.predicted], [list(p) for p in c.b.predicted]
    n = len(true)
    draws = []
    for w in np.random.default_rng(3).multinomial(n, np.full(n, 1 / n), size=200):
        rows = [i for i in range(n) for _ in range(w[i])]
        f1 = [_seqeval([true[i] for i in rows], [p[i] for i in rows])["micro avg"]["f1-score"] for p in (pa, pb)]
        draws.append(f1[1] - f1[0])
    assert c.interval == pytest.approx((np.percentile(draws, 2.5), np.percentile(draws, 97.5)), rel=1e-9, abs=1e-12)


def _cli(argv, capsys):
    from bertviz_app.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_shape_and_refusals(models, data, tmp_path, capsys):
    path, sentences, _ = data
    tagger = str(models["tagger"])
    code, out, err = _cli(["evaluate", str(path), "--model", tagger, "--word", "joy", "--json"], capsys)
    assert code == 0, err
    res = json.loads(out)
    assert set(res) == {"model", "source", "format", "scheme", "unit", "tags", "n_sentences", "n_tokens", "entity_f1",
                        "precision", "recall", "support", "predicted", "interval", "per_type", "token_accuracy",
                        "baseline", "learned", "verdict", "slices", "n_errors", "errors", "notices"}
    assert set(res["per_type"]) == {"NEG", "POS"}
    assert all(set(v) == {"precision", "recall", "f1", "support", "predicted", "interval"}
               for v in res["per_type"].values())
    assert all(set(s) == {"kind", "name", "value", "n_sentences", "support", "predicted", "precision", "recall", "f1",
                          "interval"} for s in res["slices"])
    assert [s["kind"] for s in res["slices"]][:2] == ["type", "type"] and res["slices"][-1]["kind"] == "word"
    assert all(set(e) == {"where", "tokens", "tags", "predicted", "wrong"} for e in res["errors"])
    ev = evaluate_tagged(bv.load_model(tagger), str(path), words=("joy",))
    assert res["entity_f1"] == pytest.approx(ev.entity_f1, rel=1e-12) and res["n_sentences"] == len(sentences)
    assert res["n_errors"] == len(ev.errors()) == len(res["errors"])
    code, out, err = _cli(["evaluate", str(path), "--model", tagger], capsys)  # the human output
    assert code == 0 and "entity F1" in out and "contains" not in out and "sentences with a wrong tag" in out
    code, out, err = _cli(["evaluate", str(path), "--model", str(models["untrained"]), "--compare-with", tagger,
                           "--json"], capsys)
    assert code == 0 and json.loads(out)["comparison"]["difference"] > 0.4
    for argv, says in ((["--model", str(models["base"])], "needs a token classification model"),
                       (["--model", tagger, "--engine", "ray"], "the Ray engine evaluates classifiers"),
                       (["--model", tagger, "--layers"], "--layers probes a classifier's")):
        code, out, err = _cli(["evaluate", str(path), *argv], capsys)
        assert code == 2 and says in err and "Traceback" not in err, err
    (tmp_path / "reviews.txt").write_text("text,label\nthe film was good,positive\nit was bad,negative\n")
    code, out, err = _cli(["evaluate", str(tmp_path / "reviews.txt"), "--model", tagger], capsys)
    assert code == 2 and "text-classification task" in err
    code, out, err = _cli(["evaluate", str(tmp_path / "reviews.txt"), "--model", str(models["base"]), "--json"],
                          capsys)  # positive control: the classifier's path takes the table as before
    assert code == 0 and json.loads(out)["rows"] == 2, err
