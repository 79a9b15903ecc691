"""What the served app's log holds (issue 35): an input error is one line naming its kind, without the
visitor's rows or text and without a traceback; a real fault keeps its traceback. Driven over gradio's
API with raw HTTP, as a page or a client would."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("gradio")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bertviz_app import service  # noqa: E402
from bertviz_app.ui import guards  # noqa: E402

from conftest import served_app  # noqa: E402

MARK = f"private-tweet-{uuid.uuid4().hex[:10]}"


def call(url: str, name: str, data: list) -> str:
    """POST /gradio_api/call/<name>, then its whole event stream."""
    r = httpx.post(f"{url}gradio_api/call/{name}", json={"data": data}, timeout=30)
    r.raise_for_status()
    return httpx.get(f"{url}gradio_api/call/{name}/{r.json()['event_id']}", timeout=120).text


def uploaded(url: str, text: str) -> dict:
    r = httpx.post(f"{url}gradio_api/upload", files={"files": ("tweets.csv", text.encode(), "text/csv")}, timeout=30)
    r.raise_for_status()
    return {"path": r.json()[0], "meta": {"_type": "gradio.FileData"}, "orig_name": "tweets.csv"}


@pytest.fixture(scope="module")
def app(tiny_model_dir, tmp_path_factory):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("log-models"),
                    BERTVIZ_PUBLIC=1) as url:
        yield url


def test_input_errors_log_one_line_without_the_visitors_content(app, capfd, caplog):
    caplog.set_level(logging.INFO, logger="bertviz_app")
    rows = f"text,label\n{MARK} one,{MARK}-spam\n{MARK} two,{MARK}-ham\n"
    out = call(app, "evaluate", [uploaded(app, rows), "", "", "", "", "", False, ""])
    assert "event: error" in out and MARK in out  # the visitor's own rows come back to them, quoted as given
    out = call(app, "predict", ["", "", "", False, 128, "mean", True])
    assert "event: error" in out and "text" in json.loads(out.split("data:", 1)[1])["error"].lower()
    log = "".join(capfd.readouterr()) + caplog.text
    assert MARK not in log
    assert "Traceback" not in log
    refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Refused a request")]
    assert len(refused) == 2, refused


def test_a_real_fault_keeps_its_traceback_in_the_log(app, capfd, caplog, monkeypatch):
    """The positive control: the same door, an unexpected exception: the generic message to the client,
    the traceback (once) in the log."""
    def broken(*args, **kwargs):
        raise RuntimeError(f"boom {MARK}")

    async def broken_async(*args, **kwargs):  # gradio's /predict awaits its batch (service.predict_async)
        broken()

    monkeypatch.setattr(service, "predict", broken)
    monkeypatch.setattr(service, "predict_async", broken_async)
    out = call(app, "predict", ["the film was good", "", "", False, 128, "mean", True])
    assert "event: error" in out and guards.UNEXPECTED in out and MARK not in out
    log = "".join(capfd.readouterr()) + caplog.text
    assert log.count("Traceback") == 1 and "RuntimeError: boom" in log
