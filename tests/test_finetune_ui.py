"""The Fine-tune tab, called the way the browser calls it: the app runs in-process on a free
port (tiny model, empty registry) and gradio_client drives upload -> train -> results in one
session, so the per-session state (the parsed table, the cancel flag) is the real one."""

from __future__ import annotations

import csv
import json
import random
import threading
import time
import zipfile
from pathlib import Path

import pytest

from bertviz_app.config import Settings

pytest.importorskip("gradio")
from gradio_client import Client, handle_file  # noqa: E402

from conftest import served_app  # noqa: E402

POS = ["good", "great", "fun", "gorgeous", "moving"]
NEG = ["bad", "awful", "tedious", "slog", "joyless"]


def write_csv(path: Path, n: int = 40, seed: int = 0, labels=("negative", "positive"),
              header=("review", "sentiment")) -> Path:
    rng = random.Random(seed)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(n):
            pos = i % 2 == 1
            a, b = rng.sample(POS if pos else NEG, 2)
            w.writerow([f"the film was {a} , {b} {'!' * (i % 4)} {'it ' * (i % 5)}", labels[i % len(labels)]])
    return path


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    return tmp_path_factory.mktemp("ft-registry")


@pytest.fixture(scope="module")
def app_url(registry, tiny_model_dir):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=registry) as url:
        yield url


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("ft-data")
    return {
        "good": write_csv(d / "reviews.csv"),
        "one_class": write_csv(d / "one.csv", labels=("positive",)),
        "header_only": _write(d / "empty.csv", "review,sentiment\n"),
        "long": write_csv(d / "long.csv", n=120, seed=1),
    }


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# upload outputs (states are not part of the API): notices, preview, text, label, pair, multi, report
# start outputs: status, bar, verdict, curves, metrics, per_class, confusion, wrong, wrong_csv, selected_md, model,
# run, runs_table, base
START = dict(zip(["status", "bar", "verdict", "curves", "metrics", "per_class", "confusion", "wrong", "wrong_csv",
                  "selected_md", "model", "run", "runs_table", "base"], range(14)))


def upload(client: Client, path: Path):
    return client.predict(handle_file(str(path)), api_name="/finetune_upload")


def start_args(base: str, mode: str = "probe", name: str = "", epochs: float | None = 2, lr: float | None = 5e-4,
               batch: int | None = 8, patience: int | None = 0, text: str = "review", label: str = "sentiment",
               warmup: float | None = None, freeze: str | None = None):
    # text, label, pair, multi, base, mode, name, epochs, lr, batch, max_len, seed, patience, val_fraction, warm-up,
    # frozen layers (None = automatic; frozen layers None = 0)
    return (text, label, "", False, base, mode, name, epochs, lr, batch, None, 42, patience, 0.2, warmup, freeze)


def field(out, key):
    return out[START[key]]


def test_upload_guesses_the_mapping_and_shows_a_preview(app_url, data):
    client = Client(app_url, verbose=False)
    notices, preview, text, label, pair, multi, report = upload(client, data["good"])
    assert "reviews.csv" in notices and "40 rows" in notices
    assert text["value"] == "review" and label["value"] == "sentiment" and pair["value"] == ""
    assert [c[1] for c in text["choices"]] == ["review", "sentiment"]
    assert preview["headers"] == ["row", "review", "sentiment"]
    assert preview["data"][0][0] == 2  # spreadsheet row numbers
    assert multi is False
    assert "of 40 rows usable" in report and "Ready to train" in report
    # changing the mapping re-validates: the label column as text and vice versa still reports
    swapped = client.predict("sentiment", "review", "", False, api_name="/finetune_report")
    assert "Error" in swapped and "Traceback" not in swapped


def test_bad_files_give_clear_messages_and_no_traceback(app_url, data, tiny_model_dir):
    client = Client(app_url, verbose=False)
    notices, *_rest, report = upload(client, data["header_only"])
    assert notices.startswith("**Error:**") and "no data rows" in notices
    assert "Traceback" not in notices
    notices, *_rest, report = upload(client, data["one_class"])
    assert "**Error:**" in report and "two classes" in report
    with pytest.raises(Exception) as excinfo:  # starting anyway: the same message as a gr.Error
        client.predict(*start_args(str(tiny_model_dir)), api_name="/finetune_start")
    msg = str(excinfo.value)
    assert "two classes" in msg and "Traceback" not in msg
    upload(client, data["good"])
    with pytest.raises(Exception) as excinfo:
        client.predict(*start_args(str(tiny_model_dir), name="../escape"), api_name="/finetune_start")
    assert "is not allowed" in str(excinfo.value)
    with pytest.raises(Exception) as excinfo:
        client.predict(*start_args(str(tiny_model_dir), epochs=0), api_name="/finetune_start")
    assert "epochs=0.0 must be more than 0, at most 100" in str(excinfo.value)  # the core's bounds, said plainly
    with pytest.raises(Exception) as excinfo:
        client.predict(*start_args(str(tiny_model_dir), epochs="three"), api_name="/finetune_start")
    assert "Epochs: 'three' is not a number; type one such as 3, or leave the box blank" in str(excinfo.value)


def test_folder_base_refused_when_local_paths_are_off(registry, data, tiny_model_dir):
    # the server's settings are read once, when it starts: a server started with local paths off
    with served_app(str(tiny_model_dir), BERTVIZ_ALLOW_LOCAL_PATHS="0") as url:
        client = Client(url, verbose=False)
        upload(client, data["good"])
        # same folder, not the default
        other = str(tiny_model_dir.parent / ".." / tiny_model_dir.parent.name / "tiny-bert")
        with pytest.raises(Exception) as excinfo:
            client.predict(*start_args(other), api_name="/finetune_start")
    assert "BERTVIZ_ALLOW_LOCAL_PATHS=0" in str(excinfo.value)


def test_probe_run_shows_metrics_saves_the_run_and_selects_it(app_url, data, tiny_model_dir, registry):
    import bertviz_app as bv

    client = Client(app_url, verbose=False)
    upload(client, data["good"])
    job = client.submit(*start_args(str(tiny_model_dir), mode="probe", name="ui-probe"), api_name="/finetune_start")
    out = job.result(timeout=120)
    assert "Done" in field(out, "status") and "runs/ui-probe saved" in field(out, "status")
    metrics = field(out, "metrics")
    assert "Accuracy" in metrics and "macro-F1" in metrics and "runs/ui-probe" in metrics
    # temperature scaling (issues 21, 35): 8 validation rows are too few to fit it on half and judge it on
    # the other half, so none is fitted, and the report says so
    assert "Temperature scaling: No temperature fitted: 8 rows are too few" in metrics
    assert "Predict reports the model's raw softmax" in metrics
    # the verdict (did it learn? against the majority class) and how the settings were chosen
    verdict = field(out, "verdict")
    assert "runs/ui-probe (probe)" in verdict and "always answering" in verdict and "Settings:" in verdict
    assert any(head in verdict for head in ("**Learned.**", "**Weak", "**Not learned.**"))
    per_class = field(out, "per_class")
    assert [r[1] for r in per_class["data"]] == ["negative", "positive"]
    cm = json.loads(field(out, "confusion")["plot"])
    assert cm["data"][0]["type"] == "heatmap"
    # the model dropdown (Model tab) lists the new run and has it selected; so does the run list
    model = field(out, "model")
    assert model["value"] == "runs/ui-probe" and ["runs/ui-probe", "runs/ui-probe"] in model["choices"]
    assert field(out, "run")["value"] == "runs/ui-probe"
    assert (registry / "runs" / "ui-probe" / "config.json").is_file()
    assert bv.load_model("runs/ui-probe", device="cpu",
                         settings=bv.Settings(models_dir=registry)).labels == ("negative", "positive")
    # misclassified rows: a CSV safe for spreadsheets
    wrong = field(out, "wrong")
    if wrong["data"]:
        assert Path(field(out, "wrong_csv")).read_text(encoding="utf-8").startswith("run,mode,row,text")
    # download: a zip of the run folder
    z = client.predict("runs/ui-probe", api_name="/finetune_zip")
    with zipfile.ZipFile(z) as zf:
        names = set(zf.namelist())
    assert {"config.json", "model.safetensors", "run.json"} <= names
    with pytest.raises(Exception) as excinfo:
        client.predict("runs/../../etc", api_name="/finetune_zip")
    assert "not in the list of choices" in str(excinfo.value)
    # compare with the base model: probabilities and attributions of both
    md, base_bar, tuned_bar, base_tok, tuned_tok = client.predict("runs/ui-probe", "the film was great !", "",
                                                                  api_name="/finetune_compare")
    assert "Base" in md and "fine-tuned" in md
    assert json.loads(base_bar["plot"])["data"][0]["type"] == "bar"
    assert "bv-tok" in base_tok and "bv-tok" in tuned_tok


def test_both_modes_side_by_side(app_url, data, tiny_model_dir):
    client = Client(app_url, verbose=False)
    upload(client, data["good"])
    out = client.submit(*start_args(str(tiny_model_dir), mode="both", name="ui-both", epochs=1),
                        api_name="/finetune_start").result(timeout=180)
    status = field(out, "status")
    assert "runs/ui-both-probe saved" in status and "runs/ui-both-full saved" in status
    assert "Probe vs full" in field(out, "metrics")
    assert "ui-both-full (full)" in field(out, "verdict")  # judged against the probe just trained
    cm = json.loads(field(out, "confusion")["plot"])
    assert sum(1 for t in cm["data"] if t["type"] == "heatmap") == 2
    runs = field(out, "runs_table")
    row = next(r for r in runs["data"] if "runs/ui-both-full" in r)
    assert "runs/ui-both-probe" in row  # same data hash -> one row, both modes
    assert field(out, "model")["value"] == "runs/ui-both-full"


def test_cancel_stops_a_long_run_and_keeps_the_best_weights(app_url, data, tiny_model_dir, registry):
    import bertviz_app as bv

    client = Client(app_url, verbose=False)
    upload(client, data["long"])
    job = client.submit(*start_args(str(tiny_model_dir), mode="full", name="ui-cancel", epochs=30, batch=2),
                        api_name="/finetune_start")
    deadline = time.time() + 60
    while time.time() < deadline and not any("loss" in str(o[0]) for o in job.outputs()):
        time.sleep(0.2)
    assert any("Training" in str(o[0]) and "loss" in str(o[0]) for o in job.outputs()), "no progress was streamed"
    assert client.predict(api_name="/finetune_cancel") == ()  # no output: the run itself says "Cancelling…"
    out = job.result(timeout=120)
    assert "Cancelled" in field(out, "status")
    info = json.loads((registry / "runs" / "ui-cancel" / "run.json").read_text())
    assert info["cancelled"] and 0 < info["steps"] < info["max_steps"], info  # stopped long before its end
    assert f"Cancelled at step {info['steps']} of {info['max_steps']}" in str(out)  # and the verdict says where
    assert "Cancelled:" in field(out, "metrics")
    lm = bv.load_model("runs/ui-cancel", device="cpu", settings=bv.Settings(models_dir=registry))
    assert lm.labels == ("negative", "positive")
    info = json.loads((Path(lm.path) / "run.json").read_text())
    assert info["cancelled"] is True and info["steps"] < info["max_steps"]
    curves = json.loads(field(out, "curves")["plot"])
    assert any(t.get("name") == "training loss" for t in curves["data"])


class StandInRun:
    """``run_plan`` for the Fine-tune tab's job that trains nothing: one progress event, then it waits for
    Cancel and stops a step later (``quiet_ticks`` quiet ticks, as a run saving its best weights does)
    with CancelledError. No other event comes after the Cancel, so only the run's own "Cancelling…" can
    say it was heard. Put in place with ``monkeypatch.setattr(bertviz_app.train.finetune.job, "run_plan", ...)``."""

    def __init__(self, quiet_ticks: int = 3, release: threading.Event | None = None, tick: float = 0.2):
        # quiet_ticks 0: stops at once (the run whose "Cancelled" raced the Cancel button's write); release:
        # if given, after the Cancel it ticks on until it is set (the test saw "Cancelling…")
        self.quiet_ticks, self.release, self.tick = quiet_ticks, release, tick

    def __call__(self, plan, progress=None, cancel=None):
        import bertviz_app as bv

        progress({"kind": "progress", "step": 1, "max_steps": 100, "eta": None, "logs": {"loss": 0.69}})
        deadline = time.monotonic() + 60
        while not cancel.wait(self.tick):
            if time.monotonic() > deadline:
                raise AssertionError("Cancel never reached the run")
        for _ in range(self.quiet_ticks):
            time.sleep(self.tick)
        while self.release is not None and not self.release.wait(self.tick):
            if time.monotonic() > deadline:
                raise AssertionError("the test never let the run stop")
        raise bv.CancelledError("stopped at step 1 of 100; nothing was saved.")


def test_cancel_only_asks_and_the_run_says_cancelling_then_cancelled(app_url, data, tiny_model_dir, monkeypatch):
    """The Cancel button writes nothing to the page: its "Cancelling…" could arrive after a run that
    stopped at once had said "Cancelled", leaving "Cancelling…" for good (as on the Explain-a-file tab,
    20f4e0c). The run says "Cancelling…" within a tick of the Cancel, then "Cancelled"."""
    from bertviz_app.train.finetune import job

    monkeypatch.setattr(job, "run_plan", StandInRun())
    client = Client(app_url, verbose=False)
    upload(client, data["good"])
    job = client.submit(*start_args(str(tiny_model_dir), mode="full", name="ui-stand-in"), api_name="/finetune_start")
    deadline = time.time() + 60
    while time.time() < deadline and not any("loss 0.69" in str(o[0]) for o in job.outputs()):
        time.sleep(0.1)
    assert any("loss 0.69" in str(o[0]) for o in job.outputs()), "no progress was streamed"
    assert client.predict(api_name="/finetune_cancel") == ()  # it asks; it writes no status
    out = job.result(timeout=60)
    statuses = [str(o[0]) for o in job.outputs()]
    told = [i for i, st in enumerate(statuses) if "Cancelling…" in st]
    assert told, statuses
    assert field(out, "status") == "**Cancelled:** stopped at step 1 of 100; nothing was saved."
    assert statuses[-1] == field(out, "status") and told[0] < len(statuses) - 1


def test_the_cancel_handler_sets_the_flag_and_returns_nothing():
    from types import SimpleNamespace

    from bertviz_app.ui.finetune_tab import Handlers
    from bertviz_app.ui.streaming import CancelFlag

    flag = CancelFlag()
    h = Handlers(SimpleNamespace(), settings=Settings(), default="default", model_dd=None, predict_text=None,
                 predict_pair=None, tabs=None)
    assert h.on_cancel(flag) is None and flag.event.is_set()


def test_a_file_without_texts_is_refused_naming_its_columns(app_url, tiny_model_dir, tmp_path):
    """Issue 21: an ``id,label`` file had ``id`` guessed as the text. The tab guesses no text column,
    its report names the columns found and says what to fix, and Start refuses, as it does a numbers
    column chosen as the text. The uploaded file is left as it was."""
    path = _write(tmp_path / "ids.csv", "id,label\n" + "".join(f"{i},{('negative', 'positive')[i % 2]}\n"
                                                              for i in range(40)))
    before = path.read_bytes()
    client = Client(app_url, verbose=False)
    notices, preview, text, label, pair, multi, report = upload(client, path)
    assert text["value"] is None and label["value"] == "label"
    assert "No column of 'ids.csv' holds text: found 'id' (numbers), 'label'" in report
    assert "choose the column that holds them as the text column" in report and "Traceback" not in report
    with pytest.raises(Exception) as excinfo:
        client.predict(*start_args(str(tiny_model_dir), text=None, label="label"), api_name="/finetune_start")
    assert "found 'id' (numbers), 'label'" in str(excinfo.value) and "Traceback" not in str(excinfo.value)
    chosen = client.predict("id", "label", "", False, api_name="/finetune_report")
    assert "**Error:** The text column 'id' holds numbers, not texts" in chosen
    with pytest.raises(Exception) as excinfo:
        client.predict(*start_args(str(tiny_model_dir), text="id", label="label"), api_name="/finetune_start")
    assert "The text column 'id' holds numbers" in str(excinfo.value) and "Traceback" not in str(excinfo.value)
    assert path.read_bytes() == before


def test_a_second_start_while_one_runs_is_refused_then_allowed(app_url, data, tiny_model_dir):
    """A local app has one visitor: a second Start (another page) while a fine-tune runs is refused in the
    status line (it used to wait in gradio's queue, then train too); once the first has ended it starts."""
    a, b = Client(app_url, verbose=False), Client(app_url, verbose=False)
    upload(a, data["long"])
    upload(b, data["long"])
    ja = a.submit(*start_args(str(tiny_model_dir), mode="full", epochs=6, batch=2), api_name="/finetune_start")
    deadline = time.time() + 120
    while time.time() < deadline and not any("Training" in str(o[0]) for o in ja.outputs()) and not ja.done():
        time.sleep(0.1)
    assert not ja.done(), "the first run ended before the second Start"
    refused = b.predict(*start_args(str(tiny_model_dir), mode="full", epochs=1), api_name="/finetune_start")
    assert "already have a fine-tune running or waiting" in field(refused, "status")
    oa = ja.result(timeout=180)
    ob = b.predict(*start_args(str(tiny_model_dir), mode="full", epochs=1), api_name="/finetune_start")
    ra, rb = field(oa, "run")["value"], field(ob, "run")["value"]
    assert "Done" in field(oa, "status") and "Done" in field(ob, "status")
    assert ra != rb and ra.startswith("runs/full-") and rb.startswith("runs/full-")  # both saved, neither overwritten


# --------------------------------------------------------------------------- handler-level helpers
def test_misclassified_csv_is_safe_for_spreadsheets():
    from bertviz_app.ui import finetune_tab

    rows = [{"run": "runs/x", "mode": "full", "row": 3, "text": "=HYPERLINK(\"http://x\")", "pair": None,
             "true": "+a", "predicted": "-1.5", "confidence": 0.9}]
    path = finetune_tab.wrong_csv(rows)
    got = list(csv.reader(open(path, encoding="utf-8")))
    assert got[1][3].startswith("'=") and got[1][5] == "'+a" and got[1][6] == "-1.5"
    assert finetune_tab.pick_row([dict(rows[0])], ["full", 3, "...", "+a"])["text"].startswith("=")
    assert finetune_tab.pick_row([dict(rows[0])], ["probe", 3]) is None


def test_report_escapes_user_text():
    from bertviz_app.train.data import read_table
    from bertviz_app.ui import finetune_tab

    table = read_table(b"text,label\n<b>x</b>,<img src=x>\nfine,ok\n", name="x.csv")
    md = finetune_tab.report_md(table, "text", "label", "", False)
    assert "<img" not in md and "&lt;img" in md


def test_push_to_hub_uses_the_token_once_and_never_shows_it(monkeypatch, tmp_path):
    import huggingface_hub

    from bertviz_app.ui import finetune_tab

    models = tmp_path / "models"
    run = models / "runs" / "r"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "run.json").write_text("{}")
    calls = []

    class FakeApi:
        def __init__(self, token=None):
            calls.append(("init", token))

        def create_repo(self, repo_id, **kw):
            calls.append(("create", repo_id, kw["private"]))

        def upload_folder(self, folder_path, repo_id, **kw):
            calls.append(("upload", folder_path, kw["ignore_patterns"]))
            if repo_id == "me/fail":
                raise RuntimeError("401 Unauthorized for token hf_SECRET")
            return type("Info", (), {"commit_url": f"https://huggingface.co/{repo_id}/commit/1"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    md = finetune_tab.push_to_hub("runs/r", "me/model", "hf_SECRET", True, models_dir=models)
    assert "Pushed" in md and "hf_SECRET" not in md
    assert calls == [("init", "hf_SECRET"), ("create", "me/model", True), ("upload", str(run), ["run.json"])]
    with pytest.raises(Exception) as excinfo:
        finetune_tab.push_to_hub("runs/r", "me/fail", "hf_SECRET", True, models_dir=models)
    assert "failed" in str(excinfo.value) and "hf_SECRET" not in str(excinfo.value)
    with pytest.raises(Exception, match="owner/name"):
        finetune_tab.push_to_hub("runs/r", "../x", "hf_SECRET", True, models_dir=models)


def test_report_warns_about_texts_the_model_will_cut():
    from bertviz_app.train.data import read_table
    from bertviz_app.ui.finetune_tab import report_md

    rows = "".join(f"{'word ' * (600 if i == 3 else 5)}{i},{'pos' if i % 2 else 'neg'}\n" for i in range(30))
    report = report_md(read_table(("review,sentiment\n" + rows).encode(), name="x.csv"), "review", "sentiment",
                       None, False)
    assert "longer than 512 tokens" in report and "row 5" in report and "Ready to train" in report


def test_start_after_a_refused_upload_says_why_that_file_was_refused(app_url, data, tiny_model_dir):
    client = Client(app_url, verbose=False)
    notices, *_rest = upload(client, data["header_only"])
    assert "no data rows" in notices  # the file's name stays shown in the upload box; no columns to choose
    with pytest.raises(Exception) as excinfo:
        client.predict(*start_args(str(tiny_model_dir), text=None, label=None), api_name="/finetune_start")
    msg = str(excinfo.value)
    assert "The training file empty.csv was refused" in msg and "no data rows" in msg and "upload it again" in msg
    assert "Upload a training file first" not in msg
    upload(client, data["good"])  # a good file replaces it: the refusal is forgotten
    out = client.submit(*start_args(str(tiny_model_dir), mode="probe", name="after-refusal"),
                        api_name="/finetune_start").result(timeout=120)
    assert "runs/after-refusal saved" in field(out, "status")


def test_a_refused_validation_file_stops_start_with_its_reason(tmp_path):
    from bertviz_app import DataError, read_table
    from bertviz_app.ui.finetune_tab import plan_from_fields, refusal

    table = read_table(str(write_csv(tmp_path / "reviews.csv")))
    why = refusal("/tmp/gradio/abc/val.csv", DataError("val.csv has no data rows."), "validation file")
    with pytest.raises(DataError) as excinfo:
        plan_from_fields(table, None, "review", "sentiment", "", False, "encoder", "probe", "", None, None, None,
                         None, 42, None, 0.2, val_refused=why)
    msg = str(excinfo.value)
    assert "The validation file val.csv was refused: val.csv has no data rows." in msg
    assert "remove it to hold out part of the training data" in msg and "/tmp/gradio" not in msg


def test_base_model_chart_names_the_model_never_a_server_path(tiny):
    from bertviz_app import ENCODER
    from bertviz_app.ui.finetune_tab import compare_side, load_base, shown_name

    assert shown_name("/srv/app/models/tiny-bert") == "folder tiny-bert"
    assert shown_name("owner/name") == "owner/name" and shown_name("runs/x") == "runs/x"
    encoder = load_base(ENCODER, "default", Settings())
    assert encoder.name == ENCODER
    _, _, bar, _ = compare_side(encoder, "a good film", None, "Base")
    title = bar.layout.title.text
    assert title == "Base: encoder", title
    _, _, bar, _ = compare_side(tiny, "a good film", None, "Base")  # a model opened from its folder
    assert str(tiny.path.parent) not in bar.layout.title.text and "tiny-bert" in bar.layout.title.text


def test_progress_says_measuring_until_the_step_rate_is_measured():
    from bertviz_app.ui.finetune_tab import Live, progress_html

    live = Live()
    live.add({"kind": "mode", "mode": "full", "index": 1, "of": 1})
    live.add({"kind": "progress", "step": 5, "max_steps": 100, "eta": None, "logs": {"loss": 0.7}})
    html_ = progress_html(live.step, live.max_steps, live.eta, live.what, live.timed)
    assert "step 5 of 100" in html_ and "time left: measuring..." in html_
    live.add({"kind": "progress", "step": 60, "max_steps": 100, "eta": 600.0, "logs": {"loss": 0.5}})
    assert "about 10.0 min left" in progress_html(live.step, live.max_steps, live.eta, live.what, live.timed)
    live.add({"kind": "mode", "mode": "probe", "index": 1, "of": 1})  # two steps: nothing to measure
    assert "measuring" not in progress_html(live.step, live.max_steps, live.eta, live.what, live.timed)


def test_metrics_say_which_validation_signal_stopped_the_run_and_show_nll_and_ece(tmp_path):
    """Issue 22: a run stopped by a rising validation loss said 'the validation metric stopped
    improving'; the panel names the signal and shows the kept checkpoint's NLL and ECE."""
    import bertviz_app as core
    from bertviz_app.ui.finetune_tab import metrics_md

    metrics = {"accuracy": 0.8, "macro_f1": 0.79, "n": 120, "val_nll": 0.43, "ece": 0.091, "per_class": {}}
    base = dict(path=tmp_path, mode="full", base="encoder", metrics=metrics, misclassified=[], labels=("a", "b"),
                stopped_early=True)
    by_loss = metrics_md([core.RunResult(name="runs/x", stopped_by="loss", **base)])
    assert "validation loss stopped falling" in by_loss and "validation metric stopped improving" not in by_loss
    assert "NLL) 0.430" in by_loss and "15 bins) 0.091" in by_loss
    by_metric = metrics_md([core.RunResult(name="runs/x", stopped_by="metric", **base)])
    assert "validation macro-F1 stopped rising" in by_metric
    both = metrics_md([core.RunResult(name="runs/p", stopped_by="metric", **{**base, "mode": "probe"}),
                       core.RunResult(name="runs/f", stopped_by="loss", **base)])
    assert "| validation loss (NLL) | 0.430 | 0.430 |" in both and "| calibration error (ECE) | 0.091 | 0.091 |" in both
