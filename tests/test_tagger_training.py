"""Fine-tuning a token classifier: labels on each word's first piece, entity F1 picking the best weights, a
verdict against tagging every word O, and the refusals.

The task is one a tiny model learns in seconds and whose answer is known: sentiment words are entities (good,
great, fun: POS; bad, awful, tedious: NEG; "gorgeous moving" one POS entity of two words), every other word O.
The untrained tagger is the negative control of the verdict."""

from __future__ import annotations

import random

import pytest

from bertviz_app.errors import DataError, InputError
from bertviz_app.train.data.tagged import TaggedSentence
from bertviz_app.train.tagger_training import (
    IGNORE,
    encode_sentences,
    predict_tags,
    tagger_report,
    tagger_tokenizer,
    train_tagger,
)
from bertviz_app.train.training import TrainConfig

from conftest import FAMILIES, build_family_model

TAGS = ["O", "B-NEG", "I-NEG", "B-POS", "I-POS"]
FILLER = ["the", "film", "movie", "was", "is", "a", "it"]
POS, NEG = ["good", "great", "fun"], ["bad", "awful", "tedious"]


def _sentences(n: int, seed: int) -> list[TaggedSentence]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        tokens, tags = [], []
        for _ in range(rng.randint(3, 7)):
            roll = rng.random()
            if roll < 0.15:
                tokens += ["gorgeous", "moving"]
                tags += ["B-POS", "I-POS"]
            elif roll < 0.35:
                kind = rng.choice(["POS", "NEG"])
                tokens.append(rng.choice(POS if kind == "POS" else NEG))
                tags.append("B-" + kind)
            else:
                tokens.append(rng.choice(FILLER))
                tags.append("O")
        out.append(TaggedSentence(tuple(tokens), tuple(tags), k + 1))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_labels_sit_on_each_words_first_piece(tmp_path, family):
    base = build_family_model(family, tmp_path / family)
    tok = tagger_tokenizer(base)
    s = TaggedSentence(("the", "joyless", "film"), ("O", "B-NEG", "O"), 1)
    row = encode_sentences(tok, [s], {t: i for i, t in enumerate(TAGS)}, 64)[0]
    first = row["first"]
    assert len(first) == 3 and first == sorted(first) and len(set(first)) == 3  # one first piece per word
    labelled = {pos: lab for pos, lab in enumerate(row["labels"]) if lab != IGNORE}
    assert labelled == {first[0]: 0, first[1]: 1, first[2]: 0}  # the word's tag, on its first piece only
    assert len(row["labels"]) == len(row["input_ids"]) > 3  # special tokens (and later pieces) are ignored


def test_a_sentence_past_the_models_length_is_refused_with_its_line(tmp_path):
    base = build_family_model("bert", tmp_path / "bert")
    tok = tagger_tokenizer(base)
    ok = TaggedSentence(("the", "film"), ("O", "O"), 3)
    long = TaggedSentence(tuple(["film"] * 80), tuple(["O"] * 80), 17)
    assert len(encode_sentences(tok, [ok], None, 64)) == 1  # positive control
    with pytest.raises(DataError, match=r"1 sentence \(line 17\) is longer than the 64 word-pieces"):
        encode_sentences(tok, [ok, long], None, 64)


@pytest.mark.parametrize("family", ["bert", "xlm-roberta"])  # the fixture BPE (roberta) starts "a" and "awful" alike
def test_a_tiny_tagger_learns_the_entities_and_the_verdict_says_so(tmp_path, family):
    base = build_family_model(family, tmp_path / family)  # a sequence classifier: its head must not be reused
    train, val = _sentences(96, seed=1), _sentences(40, seed=2)
    config = TrainConfig(epochs=12, learning_rate=1e-2, batch_size=16, warmup_ratio=0.0, eval_every=3,
                         early_stopping_patience=0, seed=0)
    events = []
    model, tok, info = train_tagger(base, TAGS, train, val, config, progress=events.append)
    assert model.config.id2label == dict(enumerate(TAGS)) and type(model).__name__.endswith("ForTokenClassification")
    pred = predict_tags(model, tok, val)
    assert [len(p) for p in pred] == [len(s.tokens) for s in val]
    report = tagger_report([list(s.tags) for s in val], pred)
    assert report["entity_f1"] > 0.9 and report["learned"], report["verdict"]
    assert report["verdict"].startswith("Learned") and report["baseline"]["entity_f1"] == 0.0
    assert 0.4 < report["baseline"]["token_accuracy"] < 0.9  # the O share: the task has both kinds of word
    assert info["best_metric"] == pytest.approx(report["entity_f1"], abs=0.05)  # the kept weights are the best
    assert info["config"]["metric"] == "entity_f1" and not info["cancelled"]
    evals = [e["logs"]["eval_entity_f1"] for e in events if "eval_entity_f1" in e.get("logs", {})]
    assert len(evals) >= 3 and max(evals) > evals[0]  # live curves: several evaluations, rising


def test_an_untrained_tagger_is_not_learned_and_unknown_tags_are_refused(tmp_path):
    base = build_family_model("bert", tmp_path / "bert")
    val = _sentences(40, seed=2)
    config = TrainConfig(epochs=0.01, learning_rate=1e-9, batch_size=16, early_stopping_patience=0)
    model, tok, _ = train_tagger(base, TAGS, val[:4], None, config)  # a step at lr 1e-9: the fresh head as it was
    report = tagger_report([list(s.tags) for s in val], predict_tags(model, tok, val))
    assert not report["learned"] and report["verdict"].startswith("Not learned")
    assert report["entity_f1"] < 0.3
    with pytest.raises(InputError, match="B-MISC"):
        train_tagger(base, TAGS, [TaggedSentence(("EU",), ("B-MISC",), 1)], None, config)


def _conll(sentences: list[TaggedSentence]) -> str:
    return "\n\n".join("\n".join(f"{w}\t{t}" for w, t in zip(s.tokens, s.tags)) for s in sentences) + "\n"


def test_finetune_command_trains_a_tagger_that_tag_opens(tmp_path, monkeypatch, capsys):
    import json

    import bertviz_app as bv
    from bertviz_app.cli import main

    monkeypatch.setenv("BERTVIZ_MODELS_DIR", str(tmp_path / "models"))
    base = build_family_model("bert", tmp_path / "base")
    data = tmp_path / "train.conll"
    data.write_text("-DOCSTART- O\n\n" + _conll(_sentences(120, seed=3)), encoding="utf-8")
    code = main(["finetune", str(data), "--task", "token-classification", "--base", str(base), "--name", "ner",
                 "--epochs", "12", "--lr", "1e-2", "--batch-size", "16", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    res = json.loads(out)
    assert res["model"] == "runs/ner" and res["task"] == "token-classification"
    assert res["tags"] == ["O", "B-NEG", "I-NEG", "B-POS", "I-POS"]
    assert res["metrics"]["entity_f1"] > 0.9 and res["verdict"]["learned"], res["verdict"]
    assert "Held out 24 of 120 sentences" in err and "eval_entity_f1" in err  # the split said, live curve lines
    run = json.loads((tmp_path / "models" / "runs" / "ner" / "run.json").read_text())
    assert run["task"] == "token-classification" and run["val_sentences"] == 24
    assert "pipeline_tag: token-classification" in (tmp_path / "models" / "runs" / "ner" / "README.md").read_text()
    lm = bv.load_model(str(tmp_path / "models" / "runs" / "ner"))
    text = "it was gorgeous moving the film was awful"
    got = bv.tag(lm, text)[0]
    assert [(e.text, e.label) for e in got.entities] == [("gorgeous moving", "POS"), ("awful", "NEG")]
    assert all(text[e.start:e.end] == e.text for e in got.entities)


def test_finetune_command_chooses_blank_settings_as_the_page_does_and_says_so(tmp_path, monkeypatch, capsys):
    """Settings left out of ``finetune --task token-classification`` are auto_config's for the number of training
    sentences (the Fine-tune tab's chain), each said on an ``auto:`` line and recorded; a given one is kept."""
    import json
    import math

    from bertviz_app.cli import main
    from bertviz_app.train.finetune.auto import AUTO_EXAMPLES, AUTO_MAX_EPOCHS, AUTO_PATIENCE

    monkeypatch.setenv("BERTVIZ_MODELS_DIR", str(tmp_path / "models"))
    base = build_family_model("bert", tmp_path / "base")
    data = tmp_path / "train.conll"
    data.write_text(_conll(_sentences(60, seed=4)), encoding="utf-8")
    code = main(["finetune", str(data), "--task", "token-classification", "--base", str(base), "--name", "auto-ner",
                 "--batch-size", "8"])
    out, err = capsys.readouterr()
    assert code == 0, err
    config = json.loads((tmp_path / "models" / "runs" / "auto-ner" / "run.json").read_text())["hyperparameters"]
    n_train = 48  # 60 sentences, a seeded 20% held out
    assert config["epochs"] == min(AUTO_MAX_EPOCHS, math.ceil(AUTO_EXAMPLES / n_train))
    assert config["learning_rate"] == pytest.approx(1e-4)  # a tiny (hidden <= 384) encoder's
    assert config["early_stopping_patience"] == AUTO_PATIENCE and config["batch_size"] == 8  # given: kept
    said = [line for line in out.splitlines() if line.startswith("auto: ")]
    assert any("epoch" in line and "training sentences" in line for line in said), said
    assert any("learning rate 0.0001" in line for line in said) and not any("batch size" in line for line in said)


@pytest.mark.parametrize("argv, says", [
    (["--mode", "probe"], "--mode is for the text-classification task"),
    ([], "text-classification task"),  # a classifier's table given to the token task
])
def test_finetune_token_task_refusals(tmp_path, capsys, argv, says):
    from bertviz_app.cli import main

    table = tmp_path / "reviews.csv"
    table.write_text("text,label\nthe film was good,positive\nthe film was bad,negative\n", encoding="utf-8")
    code = main(["finetune", str(table), "--task", "token-classification", *argv])
    _, err = capsys.readouterr()
    assert code == 2 and says in err and "Traceback" not in err


def test_classifier_finetune_given_a_conll_file_names_the_token_task(tmp_path, capsys):
    from bertviz_app.cli import main

    data = tmp_path / "train.txt"
    data.write_text(_conll(_sentences(20, seed=4)), encoding="utf-8")
    code = main(["finetune", str(data)])
    _, err = capsys.readouterr()
    assert code == 2 and "token-classification" in err


def test_a_classifier_fine_tuned_from_a_tagger_starts_with_a_fresh_head(tmp_path):
    """A tagger's `classifier` has the name, and with as many tags as classes the shape, of a sequence classifier's:
    loaded as the classifier's head it would start training from the tagger's tag weights."""
    import torch

    from bertviz_app.train.training import atomic_save, train_classifier

    base = build_family_model("bert", tmp_path / "bert")
    sents = [TaggedSentence(("good", "film"), ("POS", "O"), 1), TaggedSentence(("bad", "film"), ("NEG", "O"), 2)]
    still = TrainConfig(epochs=0.01, learning_rate=1e-9, batch_size=2, early_stopping_patience=0, warmup_ratio=0.0)
    tagger, tok, _ = train_tagger(base, ["O", "NEG", "POS"], sents, None, still)
    with torch.no_grad():
        tagger.classifier.weight.fill_(0.5)  # a head no fresh initialisation gives
    folder = atomic_save(tagger, tok, tmp_path / "tagger")
    texts, labels = ["good film", "bad film", "fun", "awful"], [2, 0, 2, 1]
    model, _, _ = train_classifier(folder, ["a", "b", "c"], texts, labels, config=still)
    assert model.classifier.weight.shape == tagger.classifier.weight.shape  # the trap: the same name and shape
    assert not torch.allclose(model.classifier.weight, torch.full_like(model.classifier.weight, 0.5))
    again, _, _ = train_tagger(folder, ["O", "NEG", "POS"], sents, None, still)  # control: a tagger keeps its own
    assert torch.allclose(again.classifier.weight, torch.full_like(again.classifier.weight, 0.5), atol=1e-6)


def test_a_classifier_fine_tuned_for_other_classes_of_the_same_count_starts_with_a_fresh_head(tmp_path):
    """transformers 5's ``_init_weights`` leaves a loaded weight as it was: the reset must not rely on it."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from bertviz_app.train.training import atomic_save, train_classifier

    base = build_family_model("bert", tmp_path / "bert")  # classes negative, positive
    model = AutoModelForSequenceClassification.from_pretrained(base)
    with torch.no_grad():
        model.classifier.weight.fill_(0.5)
    folder = atomic_save(model, AutoTokenizer.from_pretrained(base), tmp_path / "marked")
    still = TrainConfig(epochs=0.01, learning_rate=1e-9, batch_size=2, early_stopping_patience=0, warmup_ratio=0.0)
    texts, labels = ["good film", "bad film", "fun", "awful"], [1, 0, 1, 0]
    other, _, _ = train_classifier(folder, ["spam", "ham"], texts, labels, config=still)
    assert not torch.allclose(other.classifier.weight, torch.full_like(other.classifier.weight, 0.5))
    same, _, _ = train_classifier(folder, ["negative", "positive"], texts, labels, config=still)  # control
    assert torch.allclose(same.classifier.weight, torch.full_like(same.classifier.weight, 0.5), atol=1e-6)
