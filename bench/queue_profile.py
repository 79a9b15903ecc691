"""Where the CPU time of a queued `/predict` goes: py-spy on the served app under queue load.

    python bench/queue_profile.py [--model encoder] [--clients 32] [--requests 10] [--rate 250]

Serves the app in a subprocess on a loopback port, then, for each path in turn, records the server with
py-spy (``--format raw``, active samples only, no ``--idle``) while ``clients`` threads x ``requests``
short texts go through it: gradio's queue over plain HTTP (``POST /gradio_api/call/predict`` + its
event stream, bench/load.py's QueueClient) and the JSON route (``POST /v1/predict``) as the same-run
peer. Each sample is put in one bucket by the frames of its stack (first rule that matches, from the
innermost frame outwards: the model's forward, the app's own code, gradio's queue, gradio's blocks
(pre/post-processing, session state), gradio's routes (the event stream), pydantic/JSON, the HTTP
server, asyncio's loop), and each bucket is reported as CPU milliseconds per call: samples / rate /
calls. Writes bench/queue_profile_results.md. Needs py-spy on PATH and the right to trace a child
process (root, or ptrace_scope 0).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.load import QueueClient, RestClient  # noqa: E402
from bench.queue_sessions import send, serve  # noqa: E402

# (bucket, substrings of a frame's "function (file:line)"): the first bucket any frame of a stack
# matches, frames read from the innermost outwards, takes the sample.
BUCKETS = [
    ("model forward (torch)", ("torch/nn/", "torch/_tensor", "transformers/models/")),
    ("tokenizer", ("tokenizers", "tokenization_")),
    ("the app's engine (bertviz_app, not ui)", ("bertviz_app/batching", "bertviz_app/inference",
                                                 "bertviz_app/forward", "bertviz_app/encoding",
                                                 "bertviz_app/registry")),
    ("the app's handler and serving layer (bertviz_app/ui, server)", ("bertviz_app/",)),
    ("pydantic / JSON encoding", ("pydantic", "orjson", "json/", "jsonable_encoder")),
    ("gradio queue (queueing.py)", ("gradio/queueing", "gradio/server_messages")),
    ("gradio blocks (pre/post-process, session state)", ("gradio/blocks", "gradio/components",
                                                          "gradio/state_holder", "gradio/data_classes",
                                                          "gradio/processing_utils", "gradio/utils")),
    ("gradio routes (call API, event stream)", ("gradio/routes", "gradio/route_utils")),
    ("HTTP server (uvicorn, starlette, h11, anyio)", ("uvicorn", "starlette", "h11", "httptools",
                                                      "anyio", "fastapi")),
    ("asyncio event loop", ("asyncio",)),
]
OTHER = "other (threads, logging, GC, ...)"


def bucket(frames: list[str]) -> tuple[str, str]:
    """(bucket, the frame that put the sample there)."""
    for frame in reversed(frames):  # innermost last in py-spy's raw format
        for name, keys in BUCKETS:
            if any(k in frame for k in keys):
                return name, frame
    return OTHER, frames[-1] if frames else ""


def drive(url: str, client_class, clients: int, requests: int) -> tuple[int, float]:
    warm = client_class(url)
    for i in range(5):
        warm.predict(f"warm up {i}", "/predict")
    lat, wall = send(url, client_class, clients, requests)
    return len(lat), wall


def profile(pid: int, url: str, client_class, clients: int, requests: int, rate: int) -> dict:
    out = Path(tempfile.mkdtemp()) / "raw.txt"
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate),
                            "--output", str(out), "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    calls, wall = drive(url, client_class, clients, requests)
    spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
    spy.wait(timeout=60)
    counts: collections.Counter = collections.Counter()
    frames: collections.Counter = collections.Counter()
    total = 0
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        name, frame = bucket(stack.split(";"))
        counts[name] += int(n)
        frames[name, frame] += int(n)
        total += int(n)
    shutil.rmtree(out.parent, ignore_errors=True)
    return {"calls": calls, "wall": wall, "samples": total, "counts": counts, "frames": frames}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="encoder")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--rate", type=int, default=250)
    ap.add_argument("--top", type=int, default=3, help="frames listed per bucket for the queue path")
    ap.add_argument("--out", default=str(ROOT / "bench" / "queue_profile_results.md"))
    args = ap.parse_args(argv)
    if shutil.which("py-spy") is None:
        print("py-spy is not installed: pip install py-spy", file=sys.stderr)
        return 2
    proc, url = serve("on", args.model)
    try:
        runs = {name: profile(proc.pid, url, cls, args.clients, args.requests, args.rate)
                for name, cls in (("queue", QueueClient), ("rest", RestClient))}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    names = [name for name, _ in BUCKETS] + [OTHER]
    ms = {p: {b: 1000 * r["counts"][b] / args.rate / max(r["calls"], 1) for b in names} for p, r in runs.items()}
    lines = [
        "# Where a queued `/predict` spends the server's CPU",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {args.clients} clients x {args.requests} short texts "
        f"per path, model `{args.model}`, py-spy at {args.rate} Hz on the server (active samples only), "
        "`python bench/queue_profile.py`.",
        "",
        "| where (first match from the innermost frame) | gradio's queue, plain HTTP: CPU ms per call "
        "| JSON route: CPU ms per call | difference |",
        "|---|---|---|---|",
    ]
    for b in names:
        q, r = ms["queue"][b], ms["rest"][b]
        lines.append(f"| {b} | {q:.2f} | {r:.2f} | {q - r:+.2f} |")
    tq, tr = sum(ms["queue"].values()), sum(ms["rest"].values())
    lines.append(f"| **all server CPU** | **{tq:.2f}** | **{tr:.2f}** | **{tq - tr:+.2f}** |")
    lines += ["", *(f"- {p}: {r['calls']} calls in {r['wall']:.1f} s ({r['calls'] / r['wall']:.1f} calls/s), "
                    f"{r['samples']} samples" for p, r in runs.items())]
    q = runs["queue"]
    lines += ["", f"Where each bucket's samples were taken on the queue path (top {args.top} frames, "
              "CPU ms per call):", ""]
    for b in names:
        top = [(f, n) for (name, f), n in q["frames"].most_common() if name == b][: args.top]
        if top and ms["queue"][b] >= 0.1:
            lines.append(f"- {b}: " + "; ".join(f"`{f}` {1000 * n / args.rate / max(q['calls'], 1):.2f}"
                                                 for f, n in top))
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
