"""`python app.py` on a fresh clone (no model built): the page answers while the default model
builds in the background (the page first, the built model after it), shows the build's progress,
opens the bare encoder meanwhile and switches to the default model when it is built; the build
process never outlives the server.

The build child honours BERTVIZ_BUILD_MAX_TRAIN_ROWS / BERTVIZ_BUILD_TEST_SIZE, so these tests run
the real build path on a few hundred reviews instead of spending minutes on the full build; the default
tagger's build, which follows it, BERTVIZ_BUILD_TAGGER_SENTENCES (a few dozen sentences: the path, not a
tagger worth reading; tests/test_default_tagger.py checks what a larger reduced build finds, in a browser too)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


def _start_app(tmp_path: Path, rows: int, tagger_sentences: int = 0) -> tuple[subprocess.Popen, str, Path]:
    """The app as the README starts it, on a reduced build; ``tagger_sentences``: the default tagger's reduced build
    after it (0: no tagger build)."""
    models = tmp_path / "models"
    port = free_port()
    env = {**os.environ, "BERTVIZ_MODELS_DIR": str(models), "BERTVIZ_PORT": str(port), "BERTVIZ_MODEL": "default",
           "HF_HUB_OFFLINE": "1", "BERTVIZ_BUILD_MAX_TRAIN_ROWS": str(rows), "BERTVIZ_BUILD_TEST_SIZE": "64",
           "BERTVIZ_BUILD_TAGGER": "1" if tagger_sentences else "0",
           "BERTVIZ_BUILD_TAGGER_SENTENCES": str(tagger_sentences)}
    env.pop("BERTVIZ_HOST", None)  # the default bind: 127.0.0.1
    log = (tmp_path / "app.log").open("w")
    # Its own process group, so the test can end the server and anything it started at once.
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, f"http://127.0.0.1:{port}/", models


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return not Path("/proc").is_dir()


def _builder_pid(models: Path, within: float = 120, name: str = "default") -> int:
    lock = models / ".build" / f"{name}.lock"
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        text = lock.read_text().strip() if lock.is_file() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.2)
    raise AssertionError("no build process took the build lock")


def _wait_for_log(path: Path, *lines: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while True:
        missing = [line for line in lines if line not in path.read_text()]
        if not missing:
            return
        assert time.monotonic() < deadline, f"not in the server's log after {within:.0f} s: {missing}"
        time.sleep(0.2)


def _stop_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def test_page_at_once_shows_the_build_then_switches_to_the_built_model(tmp_path, browser):
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect

    proc, url, models = _start_app(tmp_path, rows=320, tagger_sentences=40)
    try:
        page = browser.new_page()
        while True:  # until the server answers (a hang: pytest-timeout; how fast: bench/)
            try:
                page.goto(url, timeout=5000)
                break
            except PlaywrightError:
                assert proc.poll() is None, (tmp_path / "app.log").read_text()[-3000:]
                time.sleep(0.25)
        # First the startup page (while gradio and torch load), then the app itself: both show the build,
        # and the first page comes before the built model: the build's progress is shown while it runs.
        first = page.locator("#bv-startup-build, #bv-build")
        expect(first.first).to_contain_text("Building the default model", timeout=300_000)
        expect(first.first).to_contain_text("%")
        assert not (models / "default" / "config.json").exists(), "the page came only after the build"
        events = models / ".build" / "default.jsonl"
        stages = [json.loads(line)["stage"] for line in events.read_text().splitlines()] if events.is_file() else []
        assert "done" not in stages, stages
        panel = page.locator("#bv-build")  # the startup page turns into the app by itself
        expect(panel).to_contain_text("Building the default model", timeout=300_000)
        assert not (models / "default" / "config.json").exists()  # it really was still building
        # Meanwhile the page opened the bare encoder, with its untrained-head warning.
        expect(page.locator("#bv-model-info")).to_contain_text("encoder", timeout=120_000)
        expect(page.locator("#bv-warnings")).to_contain_text("no trained classification head")
        page.get_by_role("tab", name="Model").click()
        expect(page.locator("#bv-model input")).to_have_value("encoder")
        # The build finishes: the dropdown switches to the default model and the page says so, no restart.
        expect(panel).to_contain_text("The default model is ready", timeout=600_000)
        expect(page.locator("#bv-model input")).to_have_value("default", timeout=30_000)
        expect(page.locator("#bv-model-summary")).to_contain_text("negative, positive", timeout=120_000)
        expect(page.locator("#bv-model-summary")).not_to_contain_text("no trained classification head")
        page.get_by_role("tab", name="Predict").click()
        expect(page.locator("#bv-model-info")).to_contain_text("default")
        expect(page.locator("#bv-warnings")).not_to_contain_text("no trained classification head")
        assert (models / "default" / "model.safetensors").is_file()
        log = (tmp_path / "app.log").read_text()
        # the terminal too
        assert "building the default model in the background" in log and "default model build" in log
        # Then the default tagger, in a second child that waited for the first: when it is built the page says
        # so and offers it, without switching away from the default model.
        line = page.locator("#bv-build-tagger")
        expect(line).to_contain_text("The default tagger is ready", timeout=600_000)
        expect(page.locator("#bv-model-info")).to_contain_text("default")
        tagger_events = [json.loads(x) for x in (models / ".build" / "default-tagger.jsonl").read_text().splitlines()]
        done = [json.loads(x) for x in events.read_text().splitlines()][-1]
        assert done["stage"] == "done" and tagger_events[-1]["stage"] == "done"
        labelling = next(e for e in tagger_events if e["stage"] == "data")
        assert labelling["time"] >= done["time"], "the tagger's build shared the CPU with the default model's"
        page.get_by_role("tab", name="Model").click()
        box = page.locator("#bv-model input")
        expect(box).to_have_value("default")
        box.click()
        box.fill("default-tagger")
        page.get_by_role("option", name="default-tagger", exact=True).click()
        page.get_by_role("button", name="Load model").click()
        expect(page.locator("#bv-model-summary")).to_contain_text("ForTokenClassification", timeout=120_000)
        expect(page.locator("#bv-model-info")).to_contain_text("silver-standard labels")
        # The server logs "is built" when it sees the build process exit, which may come after the page read the
        # build's last event: wait for the lines (a missing one fails after the wait, naming itself).
        _wait_for_log(tmp_path / "app.log", "building the default tagger in the background",
                      "the default tagger is built")
        page.close()
    finally:
        _stop_group(proc)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_build_processes_die_with_the_server(tmp_path, sig):
    proc, _, models = _start_app(tmp_path, rows=2000, tagger_sentences=40)
    try:
        builder = _builder_pid(models)
        tagger = _builder_pid(models, name="default-tagger")  # waiting for the first, its lock taken
        assert len({builder, tagger, proc.pid}) == 3 and _alive(builder) and _alive(tagger)
        os.kill(proc.pid, sig)  # the server alone, not its group: the children must not be orphaned
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while (_alive(builder) or _alive(tagger)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(builder), f"the build process {builder} outlived the server ({sig.name})"
        assert not _alive(tagger), f"the tagger's build process {tagger} outlived the server ({sig.name})"
        assert not (models / "default-tagger").exists()
        assert not (models / "default").exists()
        events = [json.loads(line) for line in (models / ".build" / "default.jsonl").read_text().splitlines()]
        assert not events or events[-1]["stage"] != "done"  # stopped before its first event, or mid-way
    finally:
        _stop_group(proc)


def test_startup_page_answers_not_ready_with_the_build_progress_then_frees_the_port(tmp_path):
    import socket
    import urllib.error
    import urllib.request

    from bertviz_app.models.build_job import EventLog, build_lock
    from bertviz_app.serve.startup_page import MARKER, StartupPage

    models = tmp_path / "models"
    port = free_port()
    with build_lock(models), StartupPage("127.0.0.1", port, models) as page:
        EventLog(models / ".build" / "default.jsonl")(
            {"stage": "train", "message": "step 7/336", "fraction": 0.25, "eta": 80.0})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/anything", timeout=10)
        assert err.value.code == 503 and err.value.headers[MARKER] == "1"  # health checks: not ready yet
        body = err.value.read().decode()
        assert "Building the default model" in body and "25%" in body and "step 7/336" in body
        page.close()
    with socket.socket() as s:  # the real app can take the port over (uvicorn binds with SO_REUSEADDR,
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # so a closed connection's TIME_WAIT is no bar)
        s.bind(("127.0.0.1", port))


def test_startup_page_is_quiet_when_a_browser_hangs_up_mid_response(tmp_path, capfd, caplog):
    """A browser that closes the connection before reading the answer (a reload, a closed tab) is
    routine: no 'Exception occurred during processing of request' traceback in the terminal."""
    import socket
    import struct
    import threading
    import urllib.error
    import urllib.request

    from bertviz_app.serve.startup_page import StartupPage

    port = free_port()
    with StartupPage("127.0.0.1", port, tmp_path / "models"):
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = reset, at once
            s.close()
        with pytest.raises(urllib.error.HTTPError) as err:  # the server still answers the next browser
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
        assert err.value.code == 503
        deadline = time.monotonic() + 10  # every request thread has finished (and said what it had to say)
        while any("process_request" in t.name for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.05)
    out, err_text = capfd.readouterr()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for text in (out, err_text, logged):
        assert "Traceback" not in text and "Exception" not in text and "Error" not in text, text


def test_a_stop_signal_whose_interrupt_is_lost_still_ends_the_process(monkeypatch):
    """SIGTERM during start-up raises KeyboardInterrupt; if the interpreter loses it (a signal landing in a
    finaliser), the timer the signal armed ends the process after the grace period anyway."""
    from bertviz_app.serve import server

    exits = []
    monkeypatch.setattr(server, "STOP_GRACE_S", 0.05)
    monkeypatch.setattr(server.os, "_exit", exits.append)
    monkeypatch.setattr(server.stop_on_signal, "armed", False, raising=False)
    with pytest.raises(KeyboardInterrupt):
        server.stop_on_signal(signal.SIGTERM, None)
    with pytest.raises(KeyboardInterrupt):  # a second signal raises again, arming nothing more
        server.stop_on_signal(signal.SIGTERM, None)
    deadline = time.monotonic() + 5
    while not exits and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert exits == [128 + signal.SIGTERM]
