"""The Fine-tune tab trains a tagger (token classification) from an uploaded tagged file: the plan (``plan_tagger``),
the job that runs it as it runs a classifier's (``FinetuneJob``: the same events, queue and owner), the tab's pure
helpers (which task a file is for, what was read, the results) and the tab called as the browser calls it
(gradio_client on the app served in-process: upload -> train -> results, public mode's ownership).

The task is one the tiny model learns in seconds and whose answer is known (test_tagger_training's sentences:
sentiment words are entities, every other word O)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from test_tagger_training import _conll, _sentences

import bertviz_app as bv
from bertviz_app.errors import DataError, InputError

from conftest import served_app

pytest.importorskip("gradio")
from gradio_client import Client, handle_file  # noqa: E402

from bertviz_app.ui import finetune_tagger as ft  # noqa: E402
from bertviz_app.ui.finetune_view import runs_frame, settings_line  # noqa: E402

FAST = dict(epochs=12, learning_rate=1e-2, batch_size=16, patience=0)  # what the tiny model learns the task in


def write_conll(path: Path, n: int = 120, seed: int = 3) -> Path:
    path.write_text("-DOCSTART- O\n\n" + _conll(_sentences(n, seed=seed)), encoding="utf-8")
    return path


def write_tokens_csv(path: Path, n: int = 30) -> Path:
    """A CSV both tasks read: tokens and tags columns, the items split by spaces."""
    rows = ["tokens,tags"] + [f"{' '.join(s.tokens)},{' '.join(s.tags)}" for s in _sentences(n, seed=5)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def conll(tmp_path_factory):
    return write_conll(tmp_path_factory.mktemp("tagger-data") / "train.conll")


# --------------------------------------------------------------------------- the plan and the job
def test_plan_tagger_checks_before_training_and_says_its_automatic_settings(conll, tiny_model_dir, settings):
    tf = bv.read_tagged(conll)
    plan = bv.plan_tagger(tf, base=str(tiny_model_dir), name="ner", settings=settings)
    assert plan.modes == ("tagger",) and plan.names == ("ner",) and plan.task == "token-classification"
    assert plan.source == "train.conll" and len(plan.data_hash) == 16
    assert any("training sentences" in a for a in plan.auto) and not any("rows" in a for a in plan.auto)
    assert any("entity F1" in a for a in plan.auto)  # early stopping watches what the tagger keeps the best by
    assert plan.config.epochs == 5 and plan.given == ()  # 96 training sentences: the classifier's table's cap
    given = bv.plan_tagger(tf, base=str(tiny_model_dir), settings=settings, **FAST)
    assert given.config.epochs == 12 and given.config.learning_rate == 1e-2 and set(given.given) == {
        "epochs", "learning_rate", "batch_size", "early_stopping_patience"}
    (settings.models_dir / "runs" / "ner").mkdir(parents=True)
    with pytest.raises(InputError, match="already exists"):
        bv.plan_tagger(tf, base=str(tiny_model_dir), name="ner", settings=settings)
    with pytest.raises(InputError, match="between 0.05 and 0.5"):
        bv.plan_tagger(tf, base=str(tiny_model_dir), val_fraction=0.9, settings=settings)
    io = bv.read_tagged(b"the\tO\nEU\tORG\nrejects\tO\n\nParis\tLOC\nsleeps\tO\n", "io.conll")
    assert io.scheme == "IO"
    with pytest.raises(InputError, match="IOB2 and the validation file's IO"):
        bv.plan_tagger(tf, io, base=str(tiny_model_dir), settings=settings)


def test_the_job_runs_a_tagger_plan_with_the_classifiers_events_and_saves_it_as_its_owners(conll, tiny_model_dir,
                                                                                            settings):
    from dataclasses import replace

    from bertviz_app.models import visitors

    owner = visitors.owner_hash(visitors.new_token())
    plan = bv.plan_tagger(bv.read_tagged(conll), base=str(tiny_model_dir), name="job-ner", settings=settings, **FAST)
    job = bv.FinetuneJob(replace(plan, owner=owner)).start()
    events = [e for e in job.events(timeout=0.2) if e is not None]
    [result] = job.wait()
    assert isinstance(result, bv.TaggerRunResult) and result.name == "runs/job-ner" and job.error is None
    assert events[0] == {"kind": "mode", "mode": "tagger", "index": 1, "of": 1} and events[-1]["kind"] == "result"
    f1s = [e["logs"]["eval_entity_f1"] for e in events if "eval_entity_f1" in e.get("logs", {})]
    assert len(f1s) >= 3 and max(f1s) > f1s[0]  # live curves: several evaluations, rising
    assert result.learned and result.metrics["entity_f1"] > 0.9
    info = json.loads((settings.models_dir / "runs" / "job-ner" / "run.json").read_text())
    assert info["owner"] == owner and info["task"] == "token-classification"
    runs = bv.list_runs(settings.models_dir)
    assert [r["name"] for r in visitors.visible(runs, owner, settings.models_dir / "runs")] == ["runs/job-ner"]
    other = visitors.owner_hash(visitors.new_token())
    assert visitors.visible(runs, other, settings.models_dir / "runs") == []  # another visitor does not see it


def test_a_cancelled_tagger_job_keeps_the_best_weights_so_far(conll, tiny_model_dir, settings):
    plan = bv.plan_tagger(bv.read_tagged(conll), base=str(tiny_model_dir), name="stopped", settings=settings, **FAST)
    cancel = threading.Event()
    job = bv.FinetuneJob(plan, cancel=cancel).start()
    for e in job.events(timeout=0.2):
        if e is not None and e.get("kind") == "progress" and e.get("step", 0) >= 2:
            cancel.set()  # within training: it stops within a step
    [result] = job.wait()
    assert result.cancelled and not result.learned and result.verdict.startswith("Cancelled at step")
    info = json.loads((settings.models_dir / "runs" / "stopped" / "run.json").read_text())
    assert info["cancelled"] and info["steps"] < info["hyperparameters"].get("max_steps", 72)


# --------------------------------------------------------------------------- the tab's pure helpers
def test_the_task_is_the_one_reader_that_took_the_file_and_the_users_choice_when_both_did():
    table, tagged = object(), object()
    as_tagged = "The training file x.conll was refused: x.conll holds tagged tokens ... the token-classification task"
    assert ft.choose_task(None, tagged, as_tagged, None) == ft.TOKEN  # a CoNLL file
    assert ft.choose_task(table, None, None, None) == ft.SEQUENCE  # a classifier's table
    assert ft.choose_task(table, None, None, ft.TOKEN) == ft.SEQUENCE  # ... whatever was picked before
    assert ft.choose_task(table, tagged, None, None) is None  # both read it: ask
    assert ft.choose_task(table, tagged, None, ft.TOKEN) == ft.TOKEN  # ... unless the user picked one
    assert ft.choose_task(None, None, as_tagged, None) == ft.TOKEN  # neither: a broken tagged file is a tagger's
    assert ft.choose_task(None, None, "The training file x.csv was refused: no data rows", None) == ft.SEQUENCE
    not_csv = "The training file x.conll was refused: 'x.conll' is not a .csv, .tsv or .txt file."
    assert ft.choose_task(None, None, not_csv, None, "/uploads/x.conll") == ft.TOKEN  # named as a tagged file
    assert ft.choose_task(None, None, not_csv, None, "/uploads/x.jsonl") == ft.TOKEN
    assert ft.choose_task(None, None, not_csv, ft.SEQUENCE, "/uploads/x.conll") == ft.SEQUENCE  # the user's pick


def test_what_was_read_from_a_tagged_file_counts_entities_per_type():
    tf = bv.read_tagged(b"gorgeous\tB-POS\nmoving\tI-POS\nawful\tB-NEG\nfilm\tO\n\nbad\tB-NEG\nit\tO\n", "t.conll")
    assert ft.entity_counts(tf) == {"NEG": 2, "POS": 1}
    report = ft.report_md(tf)
    assert "**2 sentences**, 3 entities of 2 types: NEG (2), POS (1)." in report and "IOB2" in report
    assert "Ready to train a tagger" in report
    io = bv.read_tagged(b"the\tO\ngorgeous\tPOS\nmoving\tPOS\nawful\tNEG\nfilm\tO\nbad\tNEG\n", "io.conll")
    assert ft.entity_counts(io) == {"NEG": 2, "POS": 1}  # IO: a run of one type (gorgeous moving) is one entity
    assert ft.entities_text(("gorgeous", "moving", "awful"), ("B-POS", "I-POS", "B-NEG")) == \
        "gorgeous moving (POS), awful (NEG)"
    assert ft.entities_text(("a", "film"), ("O", "O")) == "(none)"
    frame = ft.preview_frame(tf)
    assert list(frame.columns) == ["line", "words", "tags", "entities"] and frame.iloc[1]["line"] == 6
    none = bv.read_tagged(b"a\tO\nfilm\tO\n\nit\tO\n", "o.conll")
    assert "**Error:** the file tags no entity" in ft.report_md(none)
    with pytest.raises(DataError, match="tags no entity"):
        ft.plan_from_fields(none, None, "encoder", "", None, None, None, 42, None, 0.2)


def test_plan_from_fields_says_why_a_file_was_refused_and_what_to_type(tmp_path):
    with pytest.raises(DataError, match="Upload a tagged training file first"):
        ft.plan_from_fields(None, None, "encoder", "", None, None, None, 42, None, 0.2)
    with pytest.raises(DataError, match="line 2 holds"):
        ft.plan_from_fields(None, None, "encoder", "", None, None, None, 42, None, 0.2,
                            refused="The training file t.conll was refused: t.conll: line 2 holds a token but no tag.")
    tf = bv.read_tagged(write_conll(tmp_path / "t.conll", n=10))
    with pytest.raises(InputError, match="Epochs: 'three' is not a number"):
        ft.plan_from_fields(tf, None, "encoder", "", "three", None, None, 42, None, 0.2)


def test_the_frozen_layers_box_reaches_the_plan_blank_trains_every_layer(tmp_path):
    tf = bv.read_tagged(write_conll(tmp_path / "t.conll", n=10))
    fields = (tf, None, "encoder", "", None, None, None, 42, None, 0.2)
    plan = ft.plan_from_fields(*fields, freeze="2")
    assert plan.config.freeze_layers == 2 and "embeddings and layers 0-1 frozen" in settings_line(plan)
    assert "frozen" not in settings_line(ft.plan_from_fields(*fields))
    assert ft.plan_from_fields(*fields, freeze=" ").config.freeze_layers == 0
    with pytest.raises(InputError, match="Frozen layers: 'two' is not a number; type one such as 2, or leave the box "
                                         "blank to train every layer"):
        ft.plan_from_fields(tf, None, "encoder", "", None, None, None, 42, None, 0.2, freeze="two")
    with pytest.raises(InputError, match=r"from 0 to 5 \(the base has 6 layers; the top one has to train\), got 6"):
        ft.plan_from_fields(tf, None, "encoder", "", None, None, None, 42, None, 0.2, freeze="6")


def test_past_runs_list_a_tagger_run_with_its_entity_f1(tmp_path):
    run = tmp_path / "runs" / "ner"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "run.json").write_text(json.dumps({
        "name": "runs/ner", "task": "token-classification", "mode": "full", "source": "train.conll",
        "data_hash": "abcdef0123456789", "labels": ["O", "B-NEG", "I-NEG", "B-POS", "I-POS"], "train_sentences": 96,
        "val_sentences": 24, "metrics": {"entity_f1": 0.875}}))
    frame = runs_frame(tmp_path)
    assert frame.values.tolist() == [["train.conll · abcdef01", "NEG, POS", "96/24 sentences", "", "", "",
                                      "runs/ner (tagger, entity F1 0.875)", "", ""]]


# --------------------------------------------------------------------------- the tab, as the browser calls it
@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    return tmp_path_factory.mktemp("tagger-ft-registry")


@pytest.fixture(scope="module")
def app_url(registry, tiny_model_dir):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=registry) as url:
        yield url


def upload(client: Client, path: Path):
    """The upload's visible outputs: notices, preview, text, label, pair, multi, report."""
    return client.predict(handle_file(str(path)), api_name="/finetune_upload")


def start_args(base: str, name: str = "", epochs=12, lr=1e-2, batch=16, patience=0, freeze=None):
    return (None, None, "", False, base, "full", name, epochs, lr, batch, None, 42, patience, 0.2, None, freeze)


def test_a_tagged_upload_is_read_as_sentences_and_a_table_still_shows_its_columns(app_url, conll, tmp_path):
    from test_finetune_ui import write_csv

    client = Client(app_url, verbose=False)
    notices, preview, text, label, pair, multi, report = upload(client, conll)
    assert "**train.conll**: 120 sentences" in notices and "token classification" in notices
    assert "**120 sentences**" in report and "NEG (" in report and "POS (" in report and "IOB2" in report
    assert preview["headers"] == ["line", "words", "tags", "entities"]
    # positive control: a classifier's table still gets its columns guessed and its report
    notices, preview, text, label, pair, multi, report = upload(client, write_csv(tmp_path / "reviews.csv"))
    assert text["value"] == "review" and label["value"] == "sentiment" and "Ready to train." in report
    assert "token classification" not in notices


def test_a_csv_both_tasks_read_waits_for_the_users_choice(app_url, tiny_model_dir, tmp_path):
    client = Client(app_url, verbose=False)
    notices, *_rest = upload(client, write_tokens_csv(tmp_path / "tokens.csv"))
    assert notices.startswith("**Choose the task**")
    with pytest.raises(Exception, match="Choose the task"):
        client.predict(*start_args(str(tiny_model_dir)), api_name="/finetune_start")


def test_a_bad_tagged_file_gives_the_libraries_refusal_and_no_traceback(app_url, tiny_model_dir, tmp_path):
    bad = tmp_path / "bad.conll"
    bad.write_text("EU\tB-ORG\nrejects\tO\nGerman\nlamb\tO\ncall\tO\nto\tO\nboycott\tO\n", encoding="utf-8")
    client = Client(app_url, verbose=False)
    notices, *_rest = upload(client, bad)
    assert notices.startswith("**Error:**") and "line 3 hold" in notices
    assert "Traceback" not in notices
    with pytest.raises(Exception) as excinfo:  # starting anyway: the same refusal, as a clear error
        client.predict(*start_args(str(tiny_model_dir)), api_name="/finetune_start")
    assert "line 3 hold" in str(excinfo.value) and "Traceback" not in str(excinfo.value)


def test_start_trains_a_tagger_and_the_result_shows_its_entity_f1_and_verdict(app_url, registry, conll,
                                                                             tiny_model_dir):
    client = Client(app_url, verbose=False)
    upload(client, conll)
    out = client.predict(*start_args(str(tiny_model_dir), name="tab-ner"), api_name="/finetune_start")
    status, _bar, verdict, _curves, metrics, per_class, _confusion, wrong, _csv, _sel, model, run, runs_table, _ = out
    info = json.loads((registry / "runs" / "tab-ner" / "run.json").read_text())
    assert info["task"] == "token-classification" and "owner" not in info  # local mode: nobody's
    assert "**Done.** runs/tab-ner saved." in status
    assert f"**Entity F1 {info['metrics']['entity_f1']:.3f}**" in metrics
    assert verdict.startswith("**Learned.** runs/tab-ner (tagger)") == info["verdict"]["learned"]
    assert {row[1] for row in per_class["data"]} == {"NEG", "POS"}  # per type
    assert wrong["headers"] == ["mode", "line", "true entities", "predicted entities", "text"]
    assert model["value"] == "runs/tab-ner" and "runs/tab-ner" in [c[1] for c in model["choices"]]  # at once
    assert run["value"] == "runs/tab-ner"
    assert any("runs/tab-ner (tagger, entity F1" in str(c) for row in runs_table["data"] for c in row)


def test_start_passes_the_frozen_layers_box_to_the_run_and_refuses_too_many_before_training(app_url, registry, conll,
                                                                                            tiny_model_dir):
    client = Client(app_url, verbose=False)
    upload(client, conll)
    with pytest.raises(Exception, match=r"Frozen layers must be a whole number from 0 to 1 \(the base has 2 layers"):
        client.predict(*start_args(str(tiny_model_dir), name="frozen-2", freeze="2"), api_name="/finetune_start")
    assert not (registry / "runs" / "frozen-2").exists()
    out = client.predict(*start_args(str(tiny_model_dir), name="frozen-1", epochs=2, freeze="1"),
                         api_name="/finetune_start")
    assert "**Done.** runs/frozen-1 saved." in out[0]  # control: a count the base allows trains, and it is kept
    info = json.loads((registry / "runs" / "frozen-1" / "run.json").read_text())
    assert info["hyperparameters"]["freeze_layers"] == 1
    assert any("layers 0-0 were frozen; their output was computed once per text" in n for n in info["notices"])


def test_public_mode_saves_a_tagger_run_as_the_visitors_own(tiny_model_dir, conll, tmp_path):
    from bertviz_app.models import visitors

    token, other = visitors.new_token(), visitors.new_token()
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path, BERTVIZ_PUBLIC=1) as url:
        client = Client(url, verbose=False, headers={"X-Bertviz-Owner": token})
        upload(client, conll)
        out = client.predict(*start_args(str(tiny_model_dir), epochs=1), api_name="/finetune_start")
        name = out[11]["value"]
        assert name.startswith(f"runs/{visitors.owner_tag(visitors.owner_hash(token))}-tagger-")
        info = json.loads((tmp_path / name / "run.json").read_text())
        assert info["owner"] == visitors.owner_hash(token)
        import httpx

        asked = {"text": "it was gorgeous moving", "model": name}
        mine = httpx.post(f"{url}v1/tag", json=asked, headers={"X-Bertviz-Owner": token}, timeout=60)
        assert mine.status_code == 200, mine.text  # the owner opens it
        theirs = httpx.post(f"{url}v1/tag", json=asked, headers={"X-Bertviz-Owner": other}, timeout=60)
        assert theirs.status_code == 404 and "among your runs" in theirs.json()["error"]  # to another: unknown


def test_a_tagged_validation_file_is_kept_for_a_tagger_and_a_broken_one_refused_with_its_lines(conll, tmp_path,
                                                                                               settings):
    """The validation upload's handler, called with the tab's components as their names (its event is the page's
    only): a tagged file is read as sentences for the token task; a file neither task reads is cleared, with the
    tagged reader's refusal for a tagger and the table reader's for a classifier (the control)."""
    from types import SimpleNamespace

    from bertviz_app.ui import finetune_tab

    from conftest import as_uploaded

    names = ["val_table", "val_refused", "val_tagged", "val_tagged_refused", "notices", "val_upload", "status"]
    h = finetune_tab.Handlers(SimpleNamespace(**{k: k for k in names}), settings=settings, default="x",
                              model_dd="model", predict_text="text", predict_pair="pair", tabs="tabs")
    out = h.on_val_upload(as_uploaded(write_conll(tmp_path / "val.conll", n=20, seed=9)), ft.TOKEN)
    assert len(out["val_tagged"].sentences) == 20 and out["val_tagged_refused"] is None
    assert "20 tagged sentences" in out["notices"] and "val_upload" not in out  # kept
    out = h.on_val_upload(as_uploaded(write_tokens_csv(tmp_path / "val.csv", n=12)), ft.TOKEN)  # both read it
    assert len(out["val_tagged"].sentences) == 12 and "12 tagged sentences" in out["notices"]
    bad = tmp_path / "bad.conll"
    bad.write_text("EU\tB-ORG\nrejects\tO\nGerman\nlamb\tO\ncall\tO\nto\tO\n", encoding="utf-8")
    out = h.on_val_upload(as_uploaded(bad), ft.TOKEN)
    assert out["val_upload"] is None and out["val_tagged"] is None  # cleared
    assert "line 3 hold" in out["notices"] and "line 3 hold" in out["val_tagged_refused"]
    assert "validation file bad.conll was refused" in out["status"]
    out = h.on_val_upload(as_uploaded(bad), ft.SEQUENCE)  # a classifier: the table reader's refusal, as before
    assert out["val_upload"] is None and "is not a .csv, .tsv or .txt file" in out["notices"]
    plan_val = ft.plan_from_fields(bv.read_tagged(conll), None, "encoder", "", None, None, None, 42, None, 0.2,
                                   settings=settings)
    assert plan_val.val is None
    with pytest.raises(DataError, match="or remove it to hold out part of the training data"):
        ft.plan_from_fields(bv.read_tagged(conll), None, "encoder", "", None, None, None, 42, None, 0.2,
                            val_refused=out["val_tagged_refused"] or "The validation file bad.conll was refused: x. "
                            "Fix the file and upload it again.", settings=settings)


def test_the_result_shows_each_number_in_its_place():
    """A run whose F1, precision, recall and per-type scores all differ (a trained run of the tiny task scores 1.000
    on each, where a page showing precision as F1 would pass): each is read from its own field."""
    per_type = {"NEG": {"precision": 0.61, "recall": 0.52, "f1": 0.5616, "support": 25, "predicted": 21,
                        "interval": {"f1": (0.41, 0.69)}},
                "POS": {"precision": 0.93, "recall": 0.88, "f1": 0.9043, "support": 33, "predicted": 31,
                        "interval": {"f1": (0.8, 0.97)}}}
    metrics = {"entity_f1": 0.7544, "precision": 0.7812, "recall": 0.7293, "support": 58, "per_type": per_type,
               "interval": {"f1": (0.6611, 0.8322)}, "token_accuracy": 0.9123, "baseline": {"token_accuracy": 0.6234}}
    wrong = [{"where": 7, "tokens": ["it", "was", "awful"], "tags": ["O", "O", "B-NEG"], "predicted": ["O", "O", "O"]}]
    r = bv.TaggerRunResult(name="runs/ner", path=Path("runs/ner"), tags=("O", "B-NEG", "I-NEG", "B-POS", "I-POS"),
                           metrics=metrics, wrong=wrong, log_history=[], seconds=12.0, notices=(), learned=True,
                           verdict="Learned: entity F1 0.754 (95% interval 0.661 and up) against 0 ...",
                           cancelled=False)
    md = ft.metrics_md(r)
    assert "**Entity F1 0.754** (95% interval 0.661–0.832) · precision 0.781 · recall 0.729 on 58" in md
    assert "words tagged right 91.2% (tagging every word O: 62.3%) · 1 validation sentences" in md
    assert "| NEG | 0.610 | 0.520 | 0.562 | 0.410–0.690 | 25 |" in md and "| POS | 0.930 | 0.880 | 0.904 |" in md
    assert ft.verdict_md(r).startswith("**Learned.** runs/ner (tagger): entity F1 0.754")
    assert ft.per_type_frame(r).values.tolist() == [["tagger", "NEG", 0.61, 0.52, 0.562, 25],
                                                    ["tagger", "POS", 0.93, 0.88, 0.904, 33]]
    [row] = ft.wrong_rows(r)
    assert (row["row"], row["true"], row["predicted"], row["text"]) == (7, "awful (NEG)", "(none)", "it was awful")
    from dataclasses import replace

    cancelled = replace(r, cancelled=True, learned=False, verdict="Cancelled at step 3 of 72, so not judged: ...")
    assert ft.verdict_md(cancelled).startswith("**Cancelled: not judged.**")
    assert "holds the best weights found before the cancel" in ft.metrics_md(cancelled)
    assert ft.verdict_md(replace(r, learned=False, verdict="Not learned: entity F1 0.1 ...")).startswith(
        "**Not learned.** runs/ner (tagger): entity F1 0.1")


def test_compare_with_the_base_is_offered_for_a_classifier_run_only(settings, tiny_model_dir):
    """The past run chosen: Compare (class probabilities beside the base's) is greyed for a tagger's run with the
    line saying why; a classifier's run gets it (the control); downloads and the rest stay offered for both."""
    import shutil
    from types import SimpleNamespace

    from test_tagging import BIO, build_tagger

    from bertviz_app.ui.finetune_tab import Handlers

    runs = settings.models_dir / "runs"
    build_tagger("bert", runs / "ner", BIO)
    shutil.copytree(tiny_model_dir, runs / "clf")
    keys = ["status", "bar", "verdict", "curves", "metrics", "per_class", "confusion", "wrong", "wrong_csv", "results",
            "selected", "selected_md", "run", "runs_table", "base", "sample"]
    h = Handlers(SimpleNamespace(**{k: k for k in keys}), settings=settings, default="default", model_dd="model",
                 predict_text="text", predict_pair="pair", tabs="tabs")
    zip_btn, cmp_btn, _, _, note = h.on_run("runs/ner")
    assert zip_btn["interactive"] is True and cmp_btn["interactive"] is False
    assert "runs/ner is a token classification run" in note
    zip_btn, cmp_btn, _, _, note = h.on_run("runs/clf")
    assert zip_btn["interactive"] is True and cmp_btn["interactive"] is True and note == ""
    assert [b["interactive"] for b in h.on_run(None)[:4]] == [False] * 4
