"""Fine-tuning an extractive question answering model (issue 33): windows with a stride labelled as run_qa.py labels
them, a held-out split by context, SQuAD EM/F1 against always "no answer" and a fixed position, the verdict, the
run folder that ``bv.load_model`` opens and ``bv.answer`` answers with, the CLI, cancel and the refusals.

The task is one a 2-layer tiny model learns in seconds and whose answer is known: "what was the film" asked of a
context of filler words holding one verdict word (good, great, fun, bad, awful, tedious, or the two words "gorgeous
moving") at a random place: the answer is that word; a fifth of the contexts hold none (no answer). The negative
control shuffles the labels: the "answer" is a random word of the context (at its offset), which no model can find,
so it must be judged not learned."""

from __future__ import annotations

import csv
import json
import random
import re
import threading

import pytest
import torch

import bertviz_app as bv
from bertviz_app.errors import DataError
from bertviz_app.models.heads import QUESTION_ANSWERING
from bertviz_app.train.answer_training import (
    NO_ANSWER_POSITION,
    reader_answers,
    reader_report,
    reader_tokenizer,
    split_by_context,
    train_features,
    train_reader,
)
from bertviz_app.train.data.squad import QAExample, read_squad
from bertviz_app.train.finetune.answer_run import run_reader
from bertviz_app.train.training import TrainConfig

from conftest import build_family_model

FILLER = ["the", "film", "movie", "is", "was", "it", "not"]
ANSWERS = ["good", "great", "fun", "bad", "awful", "tedious", "gorgeous moving"]
POOL = ["film", "movie", "good", "bad", "great", "awful", "is", "was", "not", "gorgeous", "moving", "tedious", "slog",
        "joy", "fun", "it"]  # the fixture vocabulary's words but the articles ("the" normalises to no answer)
QUESTION = "what was the film"
FAST = dict(learning_rate=1e-2, batch_size=16, warmup_ratio=0.0, early_stopping_patience=0, seed=0)


def _examples(n: int, seed: int, shuffled: bool = False) -> list[QAExample]:
    """``n`` questions, each on its own context. ``shuffled``: the negative control, answers at random positions."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        if shuffled:
            out.append(_shuffled(f"q{k}", rng))
            continue
        words = [rng.choice(FILLER) for _ in range(rng.randint(6, 16))]
        if rng.random() < 0.2:
            out.append(QAExample(f"q{k}", QUESTION, " ".join(words), (), True))
            continue
        words.insert(rng.randint(0, len(words)), rng.choice(ANSWERS))
        context = " ".join(words)
        text = next(a for a in ANSWERS if f" {a} " in f" {context} ")
        out.append(QAExample(f"q{k}", QUESTION, context, ((text, f" {context} ".index(f" {text} ")),), False))
    return out


def _shuffled(qid: str, rng: random.Random) -> QAExample:
    """A context of distinct words with a random one of them as the "answer": neither its place nor its word can be
    told from the context (with repeated words, the most frequent word would match by its text more often than
    chance)."""
    words = rng.sample(POOL, rng.randint(8, 14))
    spans = [(m.start(), m.group()) for m in re.finditer(r"\S+", " ".join(words))]
    start, text = rng.choice(spans)
    return QAExample(qid, QUESTION, " ".join(words), ((text, start),), False)


def _squad_json(examples: list[QAExample]) -> dict:
    paragraphs = [{"context": e.context, "qas": [{"id": e.id, "question": e.question, "is_impossible": e.is_impossible,
                                                  "answers": [{"text": t, "answer_start": s} for t, s in e.answers]}]}
                  for e in examples]
    return {"version": "v2.0", "data": [{"title": "films", "paragraphs": paragraphs}]}


def _write(tmp_path, examples: list[QAExample]):
    """The examples as SQuAD JSON and as a CSV with an id column: the same questions in both formats."""
    js = tmp_path / "train.json"
    js.write_text(json.dumps(_squad_json(examples)), encoding="utf-8")
    table = tmp_path / "train.csv"
    with table.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "question", "context", "answer_text", "answer_start"])
        for e in examples:
            text, start = e.answers[0] if e.answers else ("", "")
            w.writerow([e.id, e.question, e.context, text, start])
    return js, table


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_family_model("bert", tmp_path_factory.mktemp("base") / "bert")


# --------------------------------------------------------------------------- windows and the split
@pytest.mark.parametrize("family", ["bert", "roberta", "xlm-roberta"])
def test_an_answer_past_the_first_window_is_labelled_in_the_windows_that_hold_it(tmp_path, family):
    path = build_family_model(family, tmp_path / family)
    tok = reader_tokenizer(path)
    rng = random.Random(3)
    words = [rng.choice(FILLER) for _ in range(110)]
    words[85:87] = ["gorgeous", "moving"]  # far past the first window of 64 tokens
    context = " ".join(words)
    start = context.index("gorgeous moving")
    far = QAExample("far", QUESTION, context, (("gorgeous moving", start),), False)
    none = QAExample("none", QUESTION, context, (), True)
    rows = train_features(tok, [far, none], max_length=64, stride=24)
    mine = [r for r in rows if r["example"] == 0]
    assert len(mine) >= 3 and len(mine) == sum(r["example"] == 1 for r in rows)  # both split alike, in windows
    labelled = []
    for r in mine:
        assert len(r["input_ids"]) <= 64
        spans = [o for o in r["offsets"] if o is not None]
        holds = spans[0][0] <= start and spans[-1][1] >= start + len("gorgeous moving")
        s, e = r["start_positions"], r["end_positions"]
        if holds:
            labelled.append(r)
            assert 0 < s <= e and r["offsets"][s] is not None and r["offsets"][e] is not None
            got = context[r["offsets"][s][0]:r["offsets"][e][1]].strip()
            assert got == "gorgeous moving"  # the labelled tokens slice the context back to the answer
        else:
            assert (s, e) == (NO_ANSWER_POSITION, NO_ANSWER_POSITION)  # not wholly inside: "no answer" at [CLS]
    assert labelled and labelled[0] is not mine[0]  # found past the first window, which says "no answer"
    assert mine[0]["start_positions"] == 0 and mine[0]["end_positions"] == 0
    assert all((r["start_positions"], r["end_positions"]) == (0, 0) for r in rows if r["example"] == 1)


def test_the_held_out_questions_are_split_by_context(tmp_path):
    examples = _examples(30, seed=5)
    doubled = examples + [QAExample(f"{e.id}-b", "what is it", e.context, e.answers, e.is_impossible)
                          for e in examples[:15]]  # 15 contexts with two questions each
    train, val = split_by_context(doubled, 0.25, seed=1)
    assert {e.context for e in train}.isdisjoint({e.context for e in val})  # a context is never on both sides
    assert len(train) + len(val) == len(doubled) and 8 <= len(val) <= 16
    assert split_by_context(doubled, 0.25, seed=1) == (train, val)  # seeded
    assert split_by_context(doubled, 0.25, seed=2) != (train, val)


def test_a_question_that_leaves_the_context_no_room_is_refused_by_its_id(base):
    tok = reader_tokenizer(base)
    ok = QAExample("short", QUESTION, "the film was good", (("good", 13),), False)
    long = QAExample("long", " ".join(["film"] * 40), "the film was good", (("good", 13),), False)
    assert len(train_features(tok, [ok], max_length=64, stride=24)) == 1  # positive control
    with pytest.raises(DataError, match=r"1 question \(id 'long'\) leave the context no room.*fewer than 37"):
        train_features(tok, [ok, long], max_length=64, stride=24)


def test_a_question_answering_base_keeps_its_span_head_and_any_other_base_gets_a_fresh_one(tmp_path, base):
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from bertviz_app.train.training import atomic_save

    reader = AutoModelForQuestionAnswering.from_pretrained(base)
    with torch.no_grad():
        reader.qa_outputs.weight.fill_(0.5)  # a head no fresh initialisation draws
    folder = atomic_save(reader, AutoTokenizer.from_pretrained(base), tmp_path / "reader")
    still = TrainConfig(epochs=0.01, learning_rate=1e-9, batch_size=4, warmup_ratio=0.0, early_stopping_patience=0)
    train = _examples(8, seed=4)
    again, _, _ = train_reader(folder, train, None, still)
    assert torch.allclose(again.qa_outputs.weight, torch.full_like(again.qa_outputs.weight, 0.5), atol=1e-6)
    fresh, _, _ = train_reader(base, train, None, still)  # control: a classifier's base has no span head to keep
    assert not torch.allclose(fresh.qa_outputs.weight, torch.full_like(fresh.qa_outputs.weight, 0.5), atol=0.1)


# --------------------------------------------------------------------------- learning, and the verdict
def test_a_tiny_reader_learns_the_answers_and_the_verdict_says_so_while_shuffled_answers_are_not_learned(base):
    events = []
    config = TrainConfig(epochs=3, **FAST)
    train, val = split_by_context(_examples(160, seed=1), 0.25, seed=0)
    model, tok, info = train_reader(base, train, val, config, progress=events.append)
    assert type(model).__name__ == "BertForQuestionAnswering" and info["no_answer_threshold"] == 0.0
    report = reader_report(val, reader_answers(model, tok, val, stride=info["stride"], no_answer_threshold=0.0), train)
    assert report["learned"] and report["verdict"].startswith("Learned"), report["verdict"]
    assert report["exact"] > 0.85 and report["f1"] > 0.85
    assert report["baselines"]["no_answer"]["exact"] == pytest.approx(sum(e.is_impossible for e in val) / len(val))
    assert max(b["exact"] for b in report["baselines"].values()) < 0.35  # both guesses are far behind
    evals = [e["logs"]["eval_f1"] for e in events if "eval_f1" in e.get("logs", {})]
    assert len(evals) >= 3 and max(evals) > evals[0] and info["best_metric"] == pytest.approx(max(evals))

    train_s, val_s = split_by_context(_examples(160, seed=1, shuffled=True), 0.25, seed=0)
    model, tok, info = train_reader(base, train_s, val_s, config)  # the same training on answers at random words
    assert info["no_answer_threshold"] is None  # no unanswerable question: never "no answer" (SQuAD 1.1)
    control = reader_report(val_s, reader_answers(model, tok, val_s, stride=info["stride"],
                                                  no_answer_threshold=None), train_s)
    assert not control["learned"] and control["verdict"].startswith("Not learned"), control["verdict"]
    assert control["exact"] < 0.4


def test_a_reader_keeps_its_frozen_layers_as_the_base_has_them(base):
    """``freeze_layers`` (``finetune --freeze-layers``) holds for a reader too: the embeddings and layer 0 come out
    exactly as the base has them, the layer above moves (the control)."""
    from safetensors.torch import load_file

    train, val = split_by_context(_examples(48, seed=1), 0.25, seed=0)
    model, _, _ = train_reader(base, train, val, TrainConfig(epochs=1, freeze_layers=1, **FAST))
    start = load_file(base / "model.safetensors")
    tuned = model.state_dict()
    frozen = [k for k in tuned if k in start and (".embeddings." in k or ".layer.0." in k)]
    above = [k for k in tuned if k in start and ".layer.1." in k]
    assert frozen and above
    assert all(torch.equal(tuned[k], start[k]) for k in frozen)
    assert sum(not torch.allclose(tuned[k], start[k]) for k in above) >= len(above) // 2


# --------------------------------------------------------------------------- the run and the CLI
def test_finetune_command_saves_a_reader_that_load_model_opens_and_answer_uses(tmp_path, monkeypatch, capsys, base):
    from bertviz_app.cli import main

    monkeypatch.setenv("BERTVIZ_MODELS_DIR", str(tmp_path / "models"))
    js, _ = _write(tmp_path, _examples(160, seed=1))
    code = main(["finetune", str(js), "--task", "question-answering", "--model", str(base), "--name", "reader",
                 "--epochs", "3", "--lr", "1e-2", "--batch-size", "16", "--warmup", "0", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    res = json.loads(out)
    assert res["model"] == "runs/reader" and res["task"] == "question-answering" and not res["cancelled"]
    assert res["verdict"]["learned"] and res["metrics"]["exact"] > 0.85, res["verdict"]
    assert set(res["metrics"]["baselines"]) == {"no_answer", "fixed_position"}
    assert "Held out 32 of 160 questions" in err and "eval_f1" in err  # the split said, live curve lines
    folder = tmp_path / "models" / "runs" / "reader"
    run = json.loads((folder / "run.json").read_text())
    assert run["task"] == "question-answering" and run["val_questions"] == 32 and run["base"] == str(base)
    assert run["verdict"]["learned"] and run["metrics"]["exact"] == res["metrics"]["exact"]
    card = (folder / "README.md").read_text()
    assert "pipeline_tag: question-answering" in card and "always \"no answer\"" in card and "Learned:" in card
    assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin"))
    lm = bv.load_model(str(folder))
    assert lm.head is QUESTION_ANSWERING
    got = bv.answer(lm, QUESTION, ["it was not a fun film", "the movie is gorgeous moving it was"])
    assert [a.text for a in got] == ["fun", "gorgeous moving"]
    assert all(a.context[a.start:a.end] == a.text for a in got)


def test_csv_input_trains_the_same_run_as_the_same_questions_in_squad_json(tmp_path, base):
    examples = _examples(60, seed=7)
    js, table = _write(tmp_path, examples)
    from_json, from_csv = read_squad(js), read_squad(table)
    assert from_json.examples == from_csv.examples  # the CSV's id column names its questions as the JSON's ids do
    assert (from_json.format, from_csv.format, from_csv.unit) == ("squad", "csv", "id")  # a table, named by ids
    config = TrainConfig(epochs=1, **FAST)
    runs = [run_reader(f, base=str(base), name=name, config=config, models_dir=tmp_path / "models")
            for f, name in ((from_json, "from-json"), (from_csv, "from-csv"))]
    a, b = (json.loads((r.path / "run.json").read_text()) for r in runs)
    assert a["data_hash"] == b["data_hash"] and a["metrics"] == b["metrics"] and a["wrong"] == b["wrong"]
    assert (runs[0].path / "model.safetensors").read_bytes() == (runs[1].path / "model.safetensors").read_bytes()


def test_a_cancel_saves_a_whole_run_marked_cancelled_and_no_half_written_folder(tmp_path, base):
    cancel = threading.Event()
    steps = []

    def progress(event):
        steps.append(event["step"])
        if event["step"] >= 2:
            cancel.set()  # within training: it stops within a step

    train = read_squad(_write(tmp_path, _examples(160, seed=1))[0])
    config = TrainConfig(epochs=5, logging_steps=1, **FAST)
    result = run_reader(train, base=str(base), name="stopped", config=config, progress=progress, cancel=cancel,
                        models_dir=tmp_path / "models")
    assert result.cancelled and not result.learned and result.verdict.startswith("Cancelled at step")
    runs = tmp_path / "models" / "runs"
    assert sorted(p.name for p in runs.iterdir()) == ["stopped"]  # no .tmp-* folder left beside it
    info = json.loads((runs / "stopped" / "run.json").read_text())
    assert info["cancelled"] and not info["verdict"]["learned"] and info["steps"] < 50
    assert bv.answer(bv.load_model(str(runs / "stopped")), QUESTION, "the film was good")[0].windows == 1


def test_a_reader_plan_checks_before_training_and_runs_with_the_events_of_a_tagger_plan(tmp_path, base):
    from bertviz_app.config import Settings
    from bertviz_app.errors import InputError

    settings = Settings(models_dir=tmp_path / "models", allow_local_paths=True)
    train = read_squad(_write(tmp_path, _examples(40, seed=6))[0])
    plan = bv.plan_reader(train, base=str(base), name="planned", epochs=1, learning_rate=1e-2, batch_size=16,
                          settings=settings)
    assert plan.task == "question-answering" and plan.modes == ("reader",) and "epochs" in plan.given
    assert plan.auto[0] == "warm-up 10% of the steps" and "validation F1" in plan.auto[1]  # blank ones chosen
    events = []
    (result,) = bv.run_reader_plan(plan, progress=events.append)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "mode" and kinds[-1] == "result" and "progress" in kinds and events[-1]["result"] is result
    assert result.name == "runs/planned" and (result.path / "run.json").is_file()
    with pytest.raises(InputError, match="already exists"):  # the name is taken now: refused before training
        bv.plan_reader(train, base=str(base), name="planned", settings=settings)
    with pytest.raises(InputError, match="between 0.05 and 0.5"):
        bv.plan_reader(train, base=str(base), val_fraction=0.9, settings=settings)


# --------------------------------------------------------------------------- refusals
def _refused(capsys, argv, *says):
    from bertviz_app.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err and not out, err
    for s in says:
        assert s in err, err
    return err


def test_bad_inputs_are_refused_with_one_message_and_nothing_saved(tmp_path, monkeypatch, capsys, base):
    monkeypatch.setenv("BERTVIZ_MODELS_DIR", str(tmp_path / "models"))
    reviews = tmp_path / "reviews.csv"
    reviews.write_text("text,label\nthe film was good,positive\nthe film was bad,negative\n", encoding="utf-8")
    qa = ["--task", "question-answering", "--model", str(base)]
    _refused(capsys, ["finetune", str(reviews), *qa], "text-classification task", "finetune FILE (the default task)")
    examples = _examples(20, seed=2)
    doc = _squad_json(examples)
    answered = next(q for p in doc["data"][0]["paragraphs"] for q in p["qas"] if q["answers"])
    answered["answers"][0]["answer_start"] += 1  # the text is no longer at its offset
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(doc), encoding="utf-8")
    _refused(capsys, ["finetune", str(moved), *qa], "1 answer not at its answer_start", repr(answered["id"]))
    js, _ = _write(tmp_path, examples)
    _refused(capsys, ["finetune", str(js), *qa, "--mode", "probe"], "--mode is for the text-classification task")
    _refused(capsys, ["finetune", str(js), *qa, "--base", str(tmp_path)], "both name the base")
    for other in ([], ["--task", "token-classification"]):  # the reverse: a SQuAD file given to another task
        _refused(capsys, ["finetune", str(js), "--base", str(base), *other], "holds questions with their contexts",
                 "--task question-answering")
    assert not (tmp_path / "models").exists()  # nothing saved, not even a runs folder
    from bertviz_app.cli import main  # positive control: the same file, untouched, trains
    assert main(["finetune", str(js), *qa, "--epochs", "0.2", "--name", "ok"]) == 0
    capsys.readouterr()
    assert (tmp_path / "models" / "runs" / "ok" / "run.json").is_file()
