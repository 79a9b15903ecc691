"""End to end: the real build-default path on a reduced sample, then the model predicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_reduced_build_default_trains_saves_and_predicts(tmp_path):
    env = {**os.environ, "BERTVIZ_MODELS_DIR": str(tmp_path / "models"), "HF_HUB_OFFLINE": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "bertviz_app", "build-default", "--max-train-rows", "400", "--test-size", "200",
         "--epochs", "3", "--json"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=900,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    result = json.loads(build.stdout)
    assert "step" in build.stderr and "saved" in build.stderr  # progress was printed while building
    model_dir = tmp_path / "models" / "default"
    assert result["path"] == str(model_dir)
    assert (model_dir / "model.safetensors").is_file() and not list(model_dir.glob("*.bin"))
    card = (model_dir / "README.md").read_text()
    assert "400 training reviews" in card and "200 held-out" in card and "accuracy" in card
    # 400 reviews is far from the full build; it must still beat the majority class (0.58) and
    # predict both classes (a one-class model has macro-F1 <= 0.37 here).
    assert result["metrics"]["accuracy"] > 0.6 and result["metrics"]["macro_f1"] > 0.55, result
    config = json.loads((model_dir / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}

    pred = subprocess.run(
        [sys.executable, "-m", "bertviz_app", "predict", "A gorgeous, moving film.", "--json"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )
    assert pred.returncode == 0, pred.stderr
    row = json.loads(pred.stdout)
    assert row["label"] in ("negative", "positive") and abs(sum(row["scores"].values()) - 1) < 1e-6


# --- the background build's bookkeeping (files any process can read), without training ---


def _events(path: Path, *events: dict) -> None:
    from bertviz_app.models.build_job import EventLog

    log = EventLog(path)
    for e in events:
        log(e)


def test_status_missing_then_building_then_failed_when_the_builder_died(tmp_path):
    from bertviz_app.models.build_job import build_lock, read_status

    models = tmp_path / "models"
    assert read_status(models).state == "missing"
    events = models / ".build" / "default.jsonl"
    with build_lock(models):
        _events(events, {"stage": "data", "message": "reading", "fraction": 0.04, "eta": 120.0},
                {"stage": "train", "message": "step 10/336", "fraction": 0.3, "eta": 90.0})
        s = read_status(models)
        assert s.state == "building" and s.pid == os.getpid()
        assert s.fraction == 0.3 and s.message == "step 10/336" and s.log == ("reading", "step 10/336")
        assert 0 < s.eta <= 90 and s.elapsed >= 0
        assert "30%" in s.line() and "left" in s.line()
    s = read_status(models)  # the lock is gone, the events stop before "done": it was killed
    assert s.state == "failed" and "stopped at 30%" in s.error and "build-default" in s.error


def test_status_failed_with_the_builders_reason_and_built_once_saved(tmp_path):
    from bertviz_app.models.build_job import read_status

    models = tmp_path / "models"
    _events(models / ".build" / "default.jsonl",
            {"stage": "error", "message": "scattertext is not installed", "fraction": 0.0})
    s = read_status(models)
    assert s.state == "failed" and s.error == "scattertext is not installed"
    (models / "default").mkdir(parents=True)
    (models / "default" / "config.json").write_text("{}")
    assert read_status(models).state == "built"


def test_a_second_build_is_refused_while_one_runs(tmp_path):
    from bertviz_app.models.build_job import build_lock

    models = tmp_path / "models"
    env = {**os.environ, "BERTVIZ_MODELS_DIR": str(models), "HF_HUB_OFFLINE": "1"}
    with build_lock(models):
        second = subprocess.run([sys.executable, "-m", "bertviz_app", "build-default", "--max-train-rows", "10"],
                                capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert second.returncode == 2
    assert f"Another process (pid {os.getpid()}) is building the default model" in second.stderr
    assert "Traceback" not in second.stderr and not (models / "default").exists()


def test_not_built_message_names_the_encoder_and_the_running_build(tmp_path):
    from bertviz_app import ModelNotFoundError, Settings, load_model
    from bertviz_app.models.build_job import EXPECTED_BUILD_TEXT, build_lock

    models = tmp_path / "models"
    with build_lock(models):
        _events(models / ".build" / "default.jsonl",
                {"stage": "train", "message": "step 5/9", "fraction": 0.5, "eta": 60.0})
        with pytest.raises(ModelNotFoundError) as err:
            load_model("default", settings=Settings(models_dir=models))
    msg = str(err.value)
    assert ("not built yet" in msg and "being built now: 50%" in msg and "'encoder'" in msg
            and EXPECTED_BUILD_TEXT in msg)


def test_encoder_opens_by_name_with_the_fresh_head_warning(settings):
    from bertviz_app import load_model
    from bertviz_app.train.default_model import encoder_path

    lm = load_model("encoder", device="cpu", settings=settings)
    assert lm.path == encoder_path() and lm.num_layers == 6
    assert any("no trained classification head" in w for w in lm.warnings)


def test_eta_says_measuring_until_training_has_timed_this_machine():
    """No typical-build guess as an ETA (it said 7 min 42 s at 19 s of a build that took 9 min 52 s):
    "measuring..." until the training's rate is measured, then the measured ETA."""
    from bertviz_app.models.build_job import BuildStatus
    from bertviz_app.ui.build_panel import panel_md

    early = BuildStatus("building", 0.02, 19.0, None, "reading the reviews", ("reading the reviews",), stage="data")
    timed = BuildStatus("building", 0.5, 90.0, 75.0, "step 168/336", ("step 168/336",), stage="train")
    assert "time left: measuring..." in early.line() and "time left: measuring..." in panel_md(early)
    assert "about 8 minutes on a quiet 2-core CPU" in panel_md(early)  # what to expect meanwhile, not as an ETA
    assert "measuring" not in timed.line() and "measuring" not in panel_md(timed)
    assert "**50%**" in panel_md(timed) and "1 min 15 s" in panel_md(timed) and "step 168/336" in panel_md(timed)
    assert ("failed" in panel_md(BuildStatus("failed", error="disk full"))
            and "disk full" in panel_md(BuildStatus("failed", error="disk full")))


def test_a_background_build_starts_without_an_eta(tmp_path, monkeypatch):
    """The server's first event (before the child has loaded torch) has no ETA to guess; the child gets
    the models folder and the reduced-build knobs as options and this process's environment unchanged."""
    import subprocess as sp

    from bertviz_app.models import build_job

    started = []

    class NoChild:
        pid = 0

        def __init__(self, cmd, **kw):
            started.append((cmd, kw))

        def poll(self):
            return 0

    monkeypatch.setattr(sp, "Popen", NoChild)
    models = tmp_path / "models"
    job = build_job.BackgroundBuild(models, max_train_rows=400, test_size=0, epochs=0.5)
    monkeypatch.setattr(job, "follow", lambda: None)
    job.start()
    first = build_job.read_events(models / ".build" / "default.jsonl")[0]
    assert first["stage"] == "start" and first["eta"] is None
    (cmd, kw), = started
    assert cmd[1:] == ["-m", "bertviz_app", "build-default", "--models-dir", str(models), "--progress-file",
                       str(models / ".build" / "default.jsonl"), "--max-train-rows", "400", "--epochs", "0.5"]
    assert kw["env"] is None and kw["cwd"] == str(ROOT)  # the test-size knob 0: the build's own default


def _no_children(monkeypatch, pids=(4242, 4343)):
    """Popen replaced by a recorder: each child started gets the next of ``pids`` and counts as running."""
    import subprocess as sp

    started = []

    class Child:
        def __init__(self, cmd, **kw):
            self.pid = pids[len(started)]
            started.append((cmd, kw))

        def poll(self):
            return None

        def terminate(self):
            pass

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(sp, "Popen", Child)
    return started


@pytest.fixture
def fresh_jobs(monkeypatch):
    """No build this process started earlier counts (the module-level record of started builds)."""
    from bertviz_app.models import build_job

    monkeypatch.setattr(build_job, "_JOBS", {})
    monkeypatch.setattr(build_job.BackgroundBuild, "follow", lambda self: None)
    return build_job


def test_the_default_tagger_builds_after_the_default_model_in_a_second_child(tmp_path, monkeypatch, fresh_jobs):
    """``python app.py`` starts the default model's build, then the tagger's in a child that waits for the first
    (``--after-pid``, the first child's pid): the two builds never share the CPU. Its status is its own."""
    from bertviz_app import Settings

    build_job = fresh_jobs
    monkeypatch.setattr(build_job, "tagger_labeller_installed", lambda: True)
    started = _no_children(monkeypatch)
    models = tmp_path / "models"
    settings = Settings(models_dir=models, build_max_train_rows=300, build_tagger_sentences=40)
    status = build_job.start_default_build(settings)
    assert status.state == "building" and status.pid == 4242
    (classifier, _), (tagger, kw) = started
    assert classifier[3] == "build-default" and "--max-train-rows" in classifier
    assert tagger[1:] == ["-m", "bertviz_app", "build-default-tagger", "--models-dir", str(models), "--progress-file",
                          str(models / ".build" / "default-tagger.jsonl"), "--max-sentences", "40",
                          "--after-pid", "4242"]
    assert kw["env"] is None and kw["cwd"] == str(ROOT)
    tagger_status = build_job.read_status(models, build_job.TAGGER)
    assert tagger_status.state == "building" and tagger_status.pid == 4343 and tagger_status.name == "default-tagger"
    assert "building the default tagger" in tagger_status.line()
    assert build_job.start_default_build(settings).pid == 4242 and len(started) == 2  # running: not started again


def test_the_tagger_is_built_alone_when_the_default_model_is_built_and_never_when_turned_off(tmp_path, monkeypatch,
                                                                                             fresh_jobs):
    from bertviz_app import Settings

    build_job = fresh_jobs
    monkeypatch.setattr(build_job, "tagger_labeller_installed", lambda: True)
    started = _no_children(monkeypatch)
    models = tmp_path / "models"
    (models / "default").mkdir(parents=True)
    (models / "default" / "config.json").write_text("{}")
    assert build_job.start_default_build(Settings(models_dir=models)).state == "built"
    (tagger, _), = started
    assert tagger[3] == "build-default-tagger" and "--after-pid" not in tagger and "--max-sentences" not in tagger
    fresh_jobs._JOBS.clear()
    started.clear()
    build_job.start_default_build(Settings(models_dir=tmp_path / "other", build_tagger=False))
    assert [cmd[3] for cmd, _ in started] == ["build-default"]  # control: the classifier's build alone


def test_without_spacy_the_tagger_is_not_started_and_the_log_says_how_to_install_it(tmp_path, monkeypatch,
                                                                                     fresh_jobs, caplog):
    import logging

    from bertviz_app import ModelNotFoundError, Settings, load_model

    build_job = fresh_jobs
    monkeypatch.setattr(build_job, "tagger_labeller_installed", lambda: False)
    started = _no_children(monkeypatch)
    models = tmp_path / "models"
    with caplog.at_level(logging.INFO, logger="bertviz_app.build"):
        build_job.start_default_build(Settings(models_dir=models))
    assert [cmd[3] for cmd, _ in started] == ["build-default"]
    assert "the default tagger is not built and cannot be built here" in caplog.text
    assert "scripts/setup.sh installs spaCy" in caplog.text
    with pytest.raises(ModelNotFoundError) as err:  # asked for by name: why, and what to do
        load_model("default-tagger", settings=Settings(models_dir=models))
    assert "The default tagger is not built yet" in str(err.value) and "needs spaCy" in str(err.value)


def test_the_tagger_waits_for_the_first_build_holding_its_lock_and_says_so(tmp_path, monkeypatch):
    """``build_default_tagger(after_pid=...)``: the tagger's lock taken at once (every process sees the build), a
    "wait" event, and nothing labelled until that process has ended (an ended process is not waited for)."""
    import time

    from bertviz_app import Settings, load_model
    from bertviz_app.errors import ModelLoadError, ModelNotFoundError
    from bertviz_app.models import build_job
    from bertviz_app.train import default_tagger as dt

    models = tmp_path / "models"
    events = []
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2.5)"])
    called = []

    def labeller():
        called.append(time.monotonic())
        raise ModelLoadError("stopped here by the test")

    monkeypatch.setattr(dt, "load_labeller", labeller)
    import threading

    def build():
        with pytest.raises(ModelLoadError, match="stopped here"):
            dt.build_default_tagger(models / dt.NAME, after_pid=first.pid, events=events.append)

    t = threading.Thread(target=build)
    t.start()
    deadline = time.monotonic() + 10
    while not events and time.monotonic() < deadline:
        time.sleep(0.05)
    log = build_job.EventLog(models / ".build" / "default-tagger.jsonl")
    log(events[0])
    status = build_job.read_status(models, build_job.TAGGER)
    assert status.state == "building" and status.stage == "wait" and f"pid {first.pid}" in status.message
    assert "waits to be built" in status.line()
    with pytest.raises(ModelNotFoundError, match="It is built next, after the default model's build"):
        load_model("default-tagger", settings=Settings(models_dir=models))
    assert not called  # still waiting
    first.wait()
    ended = time.monotonic()
    t.join(timeout=30)
    assert called and called[0] >= ended - 0.05
    called.clear()
    events.clear()
    with pytest.raises(ModelLoadError, match="stopped here"):  # control: a process already gone is not waited for
        dt.build_default_tagger(models / dt.NAME, after_pid=first.pid, events=events.append)
    assert called and [e["stage"] for e in events] == ["start"]


def test_wait_for_process_counts_a_zombie_as_ended():
    from bertviz_app.models.build_job import wait_for_process

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert wait_for_process(child.pid, poll=0.05, timeout=30)  # ended, not yet reaped by us: a zombie
    child.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not wait_for_process(sleeper.pid, poll=0.05, timeout=0.3)  # control: a live one is waited for
    finally:
        sleeper.kill()
        sleeper.wait()
