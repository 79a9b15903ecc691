"""The load test in a reduced form (bench/load.py runs the full one): concurrent clients on
/predict and /explain against `python app.py`, zero failures, flat memory, and a full queue
answers at once with a clear message."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("gradio_client")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.load import free_port, load_test, start_server  # noqa: E402


def test_concurrent_clients_all_answered_and_memory_flat(tiny_model_dir, tmp_path):
    s = load_test(str(tiny_model_dir), clients=8, requests=5, explain_clients=3, explain_requests=2, budget_s=300,
                  env_extra={"BERTVIZ_MODELS_DIR": str(tmp_path)})
    for endpoint, e in s["endpoints"].items():
        assert e["failed"] == 0 and e["answered"] == e["expected"], (endpoint, e)
    assert s["server_answers_after"]
    # 50 requests must not grow the server: a leak of per-request state would show here
    assert s["rss_after_mb"] - s["rss_before_mb"] < 150, s


def test_full_queue_refuses_at_once_with_a_clear_message(tiny_model_dir, tmp_path):
    from gradio_client import Client

    port = free_port()
    server = start_server(str(tiny_model_dir), port, {"BERTVIZ_MODELS_DIR": str(tmp_path), "BERTVIZ_QUEUE_SIZE": "1"})
    try:
        url = f"http://127.0.0.1:{port}/"
        errors, done = [], []

        def flood(k):
            try:
                Client(url, verbose=False).predict("the film was good " * 20, "", "pad", 400, api_name="/explain")
                done.append(k)
            except Exception as exc:  # noqa: BLE001
                errors.append(str(exc))

        # more floods than /explain lets in (EXPLAIN_CONCURRENCY) plus the one-place queue
        threads = [threading.Thread(target=flood, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert done, errors  # the server kept working through the flood
        assert errors and all("queue is full" in e.lower() for e in errors), errors
        assert Client(url, verbose=False).predict("good film", api_name="/predict")["label"]

        # the JSON route keeps the same bound: beyond EXPLAIN_CONCURRENCY running + 1 waiting, a 503 at once
        import json
        import urllib.error
        import urllib.request

        statuses, messages = [], []

        def rest_flood(k):
            body = json.dumps({"text": "the film was good " * 20, "n_steps": 400}).encode()
            req = urllib.request.Request(f"{url}v1/explain", data=body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=300) as r:
                    statuses.append(r.status)
            except urllib.error.HTTPError as err:
                statuses.append(err.code)
                messages.append(json.loads(err.read())["error"])

        threads = [threading.Thread(target=rest_flood, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert 200 in statuses and 503 in statuses, statuses
        assert set(statuses) <= {200, 503} and all("busy" in m and "try again" in m for m in messages), messages
    finally:
        server.terminate()
        server.wait(timeout=30)
