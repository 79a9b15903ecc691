"""A fine-tune is a job, not its page (issue 35): the Fine-tune tab's streaming handler only follows
it, so a page that goes away (gradio closes the event's generator) leaves it training to its end and
saving a run that is not cancelled; Cancel, from any page of the visitor, still stops it; a cancelled
run is never judged "learned"; and each visitor has one fine-tune at a time (FinetuneJobs)."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest
from test_finetune import write_csv

import bertviz_app as bv
from bertviz_app.errors import CancelledError, LimitError
from bertviz_app.models import visitors
from bertviz_app.train.finetune import FinetuneJobs, job

A = visitors.owner_hash(visitors.new_token())
B = visitors.owner_hash(visitors.new_token())


# --------------------------------------------------------------------------- the tab's handler, outside a server
@pytest.fixture()
def handlers(settings):
    pytest.importorskip("gradio")
    from bertviz_app.ui.finetune_tab import Handlers

    keys = ["status", "bar", "verdict", "curves", "metrics", "per_class", "confusion", "wrong", "wrong_csv", "results",
            "selected", "selected_md", "run", "runs_table", "base", "sample"]
    f = SimpleNamespace(**{k: k for k in keys})  # the components, by name: the handler's outputs are dicts
    return Handlers(f, settings=settings, default="default", model_dd="model", predict_text="text",
                    predict_pair="pair", tabs="tabs")


def start(h, flag, tmp_path, tiny_model_dir, name, epochs=4):
    """The tab's Start: the handler's generator, as gradio drives it (full mode on 48 rows)."""
    table = bv.read_table(write_csv(tmp_path / f"{name}.csv"))
    return h.train(flag, table, None, "review", "sentiment", "", False, str(tiny_model_dir), "full", name, epochs,
                   5e-4, 4, None, 42, 0, 0.2)


def until_training(gen) -> list[dict]:
    """The handler's outputs up to its first live progress update (the run is training then)."""
    seen = []
    for out in gen:
        seen.append(out)
        if "**Training" in str(out.get("status")):
            return seen
    raise AssertionError(f"the run ended before it reported any progress: {seen[-1]}")


def run_json(settings, name: str) -> dict:
    return json.loads((settings.models_dir / "runs" / name / "run.json").read_text())


def test_a_closed_page_leaves_the_fine_tune_training_to_its_end(handlers, settings, tmp_path, tiny_model_dir):
    """The page goes away mid-training: gradio closes the event's generator. The job trains on to its
    end and saves a run that is not cancelled, judged like any finished run."""
    from bertviz_app.ui.streaming import CancelFlag

    gen = start(handlers, CancelFlag(), tmp_path, tiny_model_dir, "left-alone", epochs=6)
    until_training(gen)
    running = handlers.jobs.current("local")
    assert running is not None and running.running  # positive control: it was training when the page went
    gen.close()  # what gradio does to the event of a client that disconnected
    (result,) = running.wait(timeout=300)
    assert not result.cancelled and result.name == "runs/left-alone"
    info = run_json(settings, "left-alone")
    assert info["cancelled"] is False and info["steps"] >= 1
    assert info["verdict"]["status"] != "cancelled"
    assert handlers.jobs.current("local") is None  # ended: the visitor may start again


def test_cancel_from_another_page_of_the_visitor_stops_the_job(handlers, settings, tmp_path, tiny_model_dir):
    """Cancel still cancels, from any page of the visitor (a reopened one has its own flag): the run
    stops within a step, keeps the best weights so far and is saved as cancelled, not "learned"."""
    from bertviz_app.ui.streaming import CancelFlag

    gen = start(handlers, CancelFlag(), tmp_path, tiny_model_dir, "stopped", epochs=60)
    until_training(gen)
    gen.close()  # the page that started it is gone
    assert handlers.on_cancel(CancelFlag()) is None  # the Cancel of another page (its own, fresh flag)
    running = handlers.jobs.current("local")
    if running is not None:
        running.wait(timeout=120)
    info = run_json(settings, "stopped")
    assert info["cancelled"] is True and info["steps"] < info["max_steps"], info
    assert info["verdict"]["status"] == "cancelled" and info["verdict"]["learned"] is False
    assert f"step {info['steps']} of {info['max_steps']}" in info["verdict"]["message"]
    assert "partial run" in info["verdict"]["message"]


def test_a_second_start_of_the_visitor_is_refused_in_the_status_line(handlers, settings, tmp_path, tiny_model_dir):
    """One fine-tune per visitor: a second Start (another tab, same owner) while theirs runs is answered in
    the status line, saying how to see and cancel it, and trains nothing; once theirs has ended the
    visitor starts again (positive control)."""
    from bertviz_app.ui.streaming import CancelFlag

    first = start(handlers, CancelFlag(), tmp_path, tiny_model_dir, "first", epochs=6)
    until_training(first)
    second = list(start(handlers, CancelFlag(), tmp_path, tiny_model_dir, "second"))
    assert len(second) == 1, second
    status = second[0]["status"]
    assert "already have a fine-tune running or waiting" in status
    assert "Reload this page to follow its progress" in status and "Cancel" in status
    outs = list(first)  # the first one runs on to its end, then shows its results
    assert "**Done.**" in outs[-1]["status"] and "runs/first saved" in outs[-1]["status"]
    assert not (settings.models_dir / "runs" / "second").exists()
    again = list(start(handlers, CancelFlag(), tmp_path, tiny_model_dir, "second", epochs=1))
    assert "**Done.**" in again[-1]["status"]
    assert run_json(settings, "second")["cancelled"] is False


def test_a_reopened_page_follows_the_running_job_from_its_start(handlers, settings, tmp_path, tiny_model_dir):
    """A page opened while the visitor's fine-tune runs shows it (progress, then the results); with no
    fine-tune running it leaves the status alone and lists the runs (one may have ended just now)."""
    from bertviz_app.ui.streaming import CancelFlag

    (idle,) = handlers.resume()  # nothing runs: the status is left as it is, the runs list read again
    assert list(idle) == ["runs_table"] and idle["runs_table"].empty
    gen = start(handlers, CancelFlag(), tmp_path, tiny_model_dir, "followed", epochs=6)
    until_training(gen)
    gen.close()
    outs = list(handlers.resume())
    assert "Following your fine-tune" in outs[0]["status"]
    assert any("**Training" in str(o.get("status")) for o in outs)
    assert "**Done.**" in outs[-1]["status"] and "runs/followed saved" in outs[-1]["status"]
    assert outs[-1]["run"]["value"] == "runs/followed"
    (idle,) = handlers.resume()  # it has ended: listed
    assert "runs/followed" in idle["runs_table"].to_string()


# --------------------------------------------------------------------------- the jobs, with a stand-in training
class StandIn:
    """``run_plan`` for FinetuneJob without training: reports, then ends when ``release`` is set (a result)
    or the job is cancelled (CancelledError)."""

    def __init__(self):
        self.release = threading.Event()
        self.started = threading.Event()

    def __call__(self, plan, progress=None, cancel=None):
        self.started.set()
        progress({"kind": "progress", "step": 1, "max_steps": 10, "eta": None, "logs": {"loss": 0.7}})
        while not self.release.wait(0.05):
            if cancel.is_set():
                raise CancelledError("stopped at step 1 of 10.")
        return [plan]


@pytest.fixture()
def stand_in(monkeypatch):
    fake = StandIn()
    monkeypatch.setattr(job, "run_plan", fake)
    return fake


def test_one_fine_tune_per_visitor_others_wait_their_turn(stand_in):
    jobs = FinetuneJobs(max_waiting=2, poll=0.05)
    a = jobs.submit(A, "plan of A")
    assert stand_in.started.wait(10)
    with pytest.raises(LimitError, match="already have a fine-tune running or waiting"):
        jobs.submit(A, "A's second tab")  # the same visitor, while theirs runs
    b = jobs.submit(B, "plan of B")  # positive control: another visitor may start, and waits
    first_b = next(e for e in b.events(timeout=0.05) if e is not None)
    assert first_b == {"kind": "waiting", "position": 1}
    with pytest.raises(LimitError, match="already have a fine-tune running or waiting"):
        jobs.submit(B, "B's second tab")  # waiting counts as running
    stand_in.release.set()
    assert a.wait(10) == ["plan of A"] and b.wait(10) == ["plan of B"]
    assert jobs.current(A) is None and jobs.current(B) is None
    again = jobs.submit(A, "A again")  # theirs has ended: the visitor starts again
    assert again.wait(10) == ["A again"]


def test_a_job_outlives_its_readers_and_every_reader_sees_every_event(stand_in):
    jobs = FinetuneJobs(poll=0.05)
    a = jobs.submit(A, "plan")
    reader = a.events(timeout=0.05)
    assert next(e for e in reader if e is not None)["kind"] == "progress"
    reader.close()  # the page that followed it is gone
    assert a.running
    late = a.events(timeout=0.05)  # a page opened later: the events from the first
    assert next(e for e in late if e is not None)["logs"] == {"loss": 0.7}
    stand_in.release.set()
    assert [e for e in late if e is not None] == [] and a.wait(10) == ["plan"] and not a.running


def test_cancel_stops_the_visitors_job_and_no_one_elses(stand_in):
    jobs = FinetuneJobs(max_waiting=1, poll=0.05)
    a = jobs.submit(A, "plan of A")
    b = jobs.submit(B, "plan of B")  # waiting behind A
    assert not jobs.cancel(visitors.owner_hash(visitors.new_token()))  # a visitor without a job: nothing to stop
    assert jobs.cancel(B)
    with pytest.raises(CancelledError, match="before training started"):
        b.wait(10)
    assert a.running  # A's goes on
    assert jobs.cancel(A)
    with pytest.raises(CancelledError, match="stopped at step 1"):
        a.wait(10)


def test_a_cancelled_verdict_is_never_learned():
    from bertviz_app.train.finetune.runner import cancelled_verdict

    learned = bv.Verdict(status="learned", message="The model learned.", suggestions=(), majority={})
    assert learned.learned  # positive control
    v = cancelled_verdict(learned, {"cancelled": True, "steps": 66, "max_steps": 150})
    assert v.status == "cancelled" and not v.learned
    assert "step 66 of 150" in v.message and "partial run" in v.message


def test_a_waiting_fine_tune_shows_its_position_and_cancels_before_its_turn(handlers, stand_in):
    """The tab's follower of a job waiting behind another visitor's says how many are ahead; Cancel while
    it waits ends it before it trains, and the other visitor's goes on."""
    from bertviz_app.ui.finetune_view import Live

    jobs = handlers.jobs = FinetuneJobs(max_waiting=1, poll=0.05)
    theirs = jobs.submit(B, "plan of B")
    assert stand_in.started.wait(10)
    follow = handlers.follow(jobs.submit(A, "plan of A"), Live())
    first = next(follow)
    assert first["status"].startswith("**Waiting:** 1 fine-tune(s) ahead of yours"), first
    assert jobs.cancel(A)
    assert list(follow)[-1]["status"] == "**Cancelled:** Cancelled before training started: nothing was saved."
    assert theirs.running
    stand_in.release.set()
    assert theirs.wait(10) == ["plan of B"]
