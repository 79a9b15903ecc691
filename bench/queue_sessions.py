"""gradio's queue over plain HTTP with and without lazy session configs (bertviz_app/ui/gradio_sessions.py).

    python bench/queue_sessions.py [--model encoder] [--clients 32] [--requests 10] [--rounds 2]

Serves the app twice per round in a subprocess on a loopback port, once as shipped and once with
``gradio_sessions.install`` turned off (gradio builds every component's config for each new session), and
sends the same load to each: ``clients`` threads x ``requests`` short texts through ``POST
/gradio_api/call/predict`` + its event stream (bench/load.py's QueueClient), and the same through ``POST
/v1/predict`` as the same-run peer. Prints a Markdown table (and writes bench/queue_sessions_results.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.load import QueueClient, RestClient, free_port  # noqa: E402

SERVE = ("import sys\n"
         "if sys.argv[1] == 'off':\n"
         "    import bertviz_app.ui.gradio_sessions as g\n"
         "    g.install = lambda: False\n"
         "from bertviz_app.cli import main\n"
         "sys.exit(main(['serve', '--model', sys.argv[2], '--port', sys.argv[3]]))")


def serve(mode: str, model: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVE, mode, model, str(port)], cwd=ROOT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}gradio_api/info", timeout=2)
            return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("the server did not answer within 300 s")


def send(url: str, client_class, clients: int, requests: int) -> tuple[list[float], float]:
    """``clients`` threads, each with its own client, sending ``requests`` short texts one after the other:
    (the answered calls' latencies in s, the wall time of the whole load)."""
    lat: list[float] = []

    def worker(k: int) -> None:
        c = client_class(url)
        for j in range(requests):
            t = time.perf_counter()
            c.predict(f"the film was good, said viewer {k} in review {j}", "/predict")
            lat.append(time.perf_counter() - t)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return lat, time.perf_counter() - t0


def load(url: str, client_class, clients: int, requests: int) -> tuple[float, float, float]:
    """(one call's median s over 10, calls/s under the load, p50 s under the load)."""
    one = client_class(url)
    one.predict("warm up", "/predict")
    singles = []
    for i in range(10):
        t = time.perf_counter()
        one.predict(f"a single call number {i}", "/predict")
        singles.append(time.perf_counter() - t)
    lat, wall = send(url, client_class, clients, requests)
    return statistics.median(singles), clients * requests / wall, statistics.median(lat)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="encoder")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "queue_sessions_results.md"))
    args = ap.parse_args(argv)
    rows = []
    for r in range(args.rounds):
        for mode in ("on", "off"):
            proc, url = serve(mode, args.model)
            try:
                q = load(url, QueueClient, args.clients, args.requests)
                j = load(url, RestClient, args.clients, args.requests)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            rows.append((r + 1, mode, q, j))
    lines = ["# gradio's queue with and without lazy session configs", "",
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, model `{args.model}`, "
             f"{args.clients} clients x {args.requests} short texts per path, `python bench/queue_sessions.py`.", "",
             "| round | lazy configs | queue: one call | queue under load | JSON route under load | queue / JSON |",
             "|---|---|---|---|---|---|"]
    for r, mode, q, j in rows:
        lines.append(f"| {r} | {mode} | {q[0] * 1000:.0f} ms | {q[1]:.1f} calls/s (p50 {q[2] * 1000:.0f} ms) | "
                     f"{j[1]:.1f} calls/s | **{q[1] / j[1]:.0%}** |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
