"""The load test in a reduced form (bench/load.py runs the full one): concurrent clients on
/predict and /explain against `python app.py`, zero failures, flat memory; and a full queue (the
explain engine held, so the queue is known to be full) answers at once with a clear message."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("gradio_client")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.load import load_test  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from conftest import served_app  # noqa: E402


def test_concurrent_clients_all_answered_and_memory_flat(tiny_model_dir, tmp_path):
    s = load_test(str(tiny_model_dir), clients=8, requests=5, explain_clients=3, explain_requests=2, budget_s=300,
                  env_extra={"BERTVIZ_MODELS_DIR": str(tmp_path)})
    for endpoint, e in s["endpoints"].items():
        assert e["failed"] == 0 and e["answered"] == e["expected"], (endpoint, e)
    assert s["server_answers_after"]
    # 50 requests must not grow the server: a leak of per-request state would show here
    assert s["rss_after_mb"] - s["rss_before_mb"] < 150, s


def test_full_queue_refuses_at_once_with_a_clear_message(tiny_model_dir, tmp_path, monkeypatch):
    """The explain engine held (the app runs in this process): EXPLAIN_CONCURRENCY calls running and one
    waiting fill /explain's queue of one, so the next call is refused at once with gradio's "queue is full",
    and the JSON route's next request with a 503 that says the server is busy; once the engine is let go,
    every call let in is answered (200 / complete)."""
    import httpx

    from bertviz_app import service
    from bertviz_app.serve import server
    from bertviz_app.serve.server import EXPLAIN_CONCURRENCY
    from bertviz_app.ui.api import EXPLAIN_CONCURRENCY as GRADIO_EXPLAIN_CONCURRENCY

    real = service.explain
    state = threading.Condition()
    running, release = [0], [threading.Event()]

    def held_explain(*args, **kwargs):
        with state:
            running[0] += 1
            state.notify_all()
            gate = release[0]
        if not gate.wait(120):
            raise AssertionError("the test never let the explain engine go")
        return real(*args, **kwargs)

    def wait_running(n: int) -> None:
        with state:
            assert state.wait_for(lambda: running[0] >= n, timeout=120), (running[0], n)

    gates = []  # the JSON routes' gates, to see a request waiting in one
    real_init = server.Gate.__init__

    def recorded_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        gates.append(self)

    monkeypatch.setattr(service, "explain", held_explain)
    monkeypatch.setattr(server.Gate, "__init__", recorded_init)
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path, BERTVIZ_QUEUE_SIZE=1) as url:
        # gradio's queue, over raw HTTP: a POST to /gradio_api/call/explain returns once the call is queued
        args = ["the film was good", "", "pad", 8, "", "", None, False, None]  # text .. model (""): the default

        def call():
            return httpx.post(f"{url}gradio_api/call/explain", json={"data": args}, timeout=30)

        let_in = [call() for _ in range(GRADIO_EXPLAIN_CONCURRENCY)]
        wait_running(GRADIO_EXPLAIN_CONCURRENCY)  # all running, held
        let_in.append(call())  # ... and one waiting: the queue of one is full
        assert all(r.status_code == 200 and "event_id" in r.json() for r in let_in), [r.text for r in let_in]
        refused = call()
        assert refused.status_code != 200 and "queue is full" in refused.text.lower(), (refused.status_code,
                                                                                       refused.text)
        release[0].set()
        for r in let_in:
            answer = httpx.get(f"{url}gradio_api/call/explain/{r.json()['event_id']}", timeout=120).text
            assert "event: complete" in answer and '"attributions"' in answer, answer[:300]

        # the JSON route keeps the same bound: EXPLAIN_CONCURRENCY running + 1 waiting, then a 503 at once
        with state:
            running[0], release[0] = 0, threading.Event()
        gate = next(g for g in gates if g.name == "explain")
        statuses = []

        def rest():
            r = httpx.post(f"{url}v1/explain", json={"text": "the film was good", "n_steps": 8}, timeout=120)
            statuses.append(r.status_code)

        threads = [threading.Thread(target=rest) for _ in range(EXPLAIN_CONCURRENCY + 1)]
        for t in threads[:-1]:
            t.start()
        wait_running(EXPLAIN_CONCURRENCY)
        threads[-1].start()
        for _ in range(1200):  # the last one is waiting in the gate (its count is the event loop's)
            if gate.in_flight == EXPLAIN_CONCURRENCY + 1:
                break
            threads[-1].join(0.1)
        assert gate.in_flight == EXPLAIN_CONCURRENCY + 1, gate.in_flight
        busy = httpx.post(f"{url}v1/explain", json={"text": "the film was good", "n_steps": 8}, timeout=30)
        assert busy.status_code == 503, busy.text
        message = busy.json()["error"]
        assert "busy" in message and "try again" in message, message
        release[0].set()
        for t in threads:
            t.join(120)
        assert statuses == [200] * (EXPLAIN_CONCURRENCY + 1), statuses  # every request let in is answered
        ok = httpx.post(f"{url}v1/explain", json={"text": "the film was good", "n_steps": 8}, timeout=120)
        assert ok.status_code == 200 and ok.json()["attributions"], ok.text[:300]
