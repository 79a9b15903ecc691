"""Calls to gradio's API whose inputs do not fit the event (issue 36's doors, tried as an API client would
over raw HTTP): too few inputs, a wrongly typed one, a named call with a missing or unknown argument. gradio
answers the first with ``{"error": null}`` and the last with a bare 500, logging a traceback for each; the
app answers every door with a message that says what to send, logs one line, and the same door with the
right inputs answers (positive control)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("gradio")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import served_app  # noqa: E402

PREDICT = ["a gorgeous film", "", "", False, 128, "mean", True]  # /predict's 7 inputs


@pytest.fixture(scope="module")
def app(tiny_model_dir, tmp_path_factory):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("malformed-models")) as url:
        yield url


def stream(url: str, started: httpx.Response) -> tuple[str, object]:
    """(event, data) of the last message of an event's stream."""
    started.raise_for_status()
    text = httpx.get(f"{url}gradio_api/call/predict/{started.json()['event_id']}", timeout=120).text
    event, _, data = text.strip().rpartition("\ndata:")
    return event.rsplit("event:", 1)[-1].strip(), json.loads(data)


def fn_index(url: str, name: str) -> int:
    deps = httpx.get(f"{url}config", timeout=30).json()["dependencies"]
    return next(d["id"] for d in deps if d.get("api_name") == name)


def quiet_log(capfd, caplog) -> str:
    log = "".join(capfd.readouterr()) + caplog.text
    assert "Traceback" not in log
    return log


def test_too_few_inputs_are_answered_with_what_to_send_on_every_door(app, capfd, caplog):
    caplog.set_level(logging.INFO, logger="bertviz_app")
    post = lambda path, body: httpx.post(f"{app}gradio_api/{path}", json=body, timeout=60)  # noqa: E731
    idx = fn_index(app, "predict")
    doors = {
        "call": lambda data: stream(app, post("call/predict", {"data": data})),
        "queue/join": lambda data: stream(app, post("queue/join", {"data": data, "fn_index": idx,
                                                                   "session_hash": "malformed01"})),
    }
    for door, send in doors.items():
        event, data = send(PREDICT[:1])
        assert event == "error", door
        assert data["error"].startswith("predict takes 7 inputs; the request sent 1. Send them all, in order"), door
        assert "/gradio_api/info" in data["error"]
        event, data = send(PREDICT)  # positive control: the same door with every input
        assert event == "complete", (door, data)
        assert abs(sum(data[0]["scores"].values()) - 1) < 1e-4
    # the direct route answers at once
    r = post("run/predict", {"data": PREDICT[:2]})
    assert "predict takes 7 inputs; the request sent 2" in r.json()["error"]
    log = quiet_log(capfd, caplog)
    assert log.count("Refused a request: malformed call to predict") == 3


def test_a_wrongly_typed_input_names_its_position(app, capfd, caplog):
    caplog.set_level(logging.INFO, logger="bertviz_app")
    deps = httpx.get(f"{app}config", timeout=30).json()["dependencies"]
    # an event of the page whose first input is a Dataset (it takes a row index, not text)
    comps = {c["id"]: c for c in httpx.get(f"{app}config", timeout=30).json()["components"]}
    dep = next(d for d in deps if d["inputs"] and comps[d["inputs"][0]]["type"] == "dataset")
    body = {"fn_index": dep["id"], "session_hash": "malformed02", "data": ["not a row index"]}
    event, data = stream(app, httpx.post(f"{app}gradio_api/queue/join", json=body, timeout=60))
    assert event == "error"
    assert data["error"].startswith("Input 1 of ") and "is not of the type it takes" in data["error"]
    assert "not a row index" not in data["error"]  # what was sent is not echoed
    event, data = stream(app, httpx.post(f"{app}gradio_api/queue/join", json={**body, "data": [0]}, timeout=60))
    assert event == "complete"  # positive control: a row index is read
    quiet_log(capfd, caplog)


def test_named_calls_with_a_missing_or_unknown_argument_get_400_and_a_message(app, capfd, caplog):
    caplog.set_level(logging.INFO, logger="bertviz_app")
    v2 = lambda body: httpx.post(f"{app}gradio_api/call/v2/predict", json=body, timeout=60)  # noqa: E731
    r = v2({})
    assert r.status_code == 400
    assert r.json()["error"].startswith("No value provided for required argument: text.")
    r = v2({"text": "a film", "sentiment": "yes"})
    assert r.status_code == 400
    assert r.json()["error"].startswith("Parameter `sentiment` is not a valid key-word argument.")
    assert "/gradio_api/info" in r.json()["error"]
    event, data = stream(app, v2({"text": "a film"}))  # positive control: the defaults fill the rest
    assert event == "complete" and data[0]["text"] == "a film"
    log = quiet_log(capfd, caplog)
    assert log.count("Refused a request: malformed call to predict") == 2
