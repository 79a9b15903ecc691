"""Batch work on Ray against the single-process path, in the same run (issue 34): `evaluate_file` and
`explain_csv` on held-out reviews, in this process and with `engine=RayEngine(...)` on 1 and 2 local
actors and on a two-node cluster started on this machine (`ray start --head --num-cpus 1` and
`ray start --address ... --num-cpus 1`), the outputs compared with the single-process path's, and Ray's
overhead per batch measured with a chunk function that does nothing.

    python bench/ray_scale.py --model /path/to/model --n-evaluate 2000 --n-explain 300 --methods saliency
    python bench/ray_scale.py --rounds 2 ...      # each timed part twice, alternating the engines

Writes bench/ray_results.md (the part above "## Reading", which is written by hand, is rewritten).
The Ray jobs are timed on a Ray already started (a cluster is up before its jobs run); `ray.init`'s own
seconds are given apart. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/ray_scale.py``
    sys.path.insert(0, str(ROOT))

from bertviz_app.config import Settings  # noqa: E402

# An entry point: BERTVIZ_* read once, here; every explanation computed, none from the cache (memo_size 0).
SETTINGS = replace(Settings.from_env(), memo_size=0)
OUT = ROOT / "bench" / "ray_results.md"


def noop(lm, chunk) -> int:
    """A chunk function that does no model work: what is left of a job's time is Ray's."""
    return len(chunk)


def reviews(n: int, labels: list[str], folder: Path) -> Path:
    from bertviz_app.train.default_model import rotten_tomatoes_split

    test = rotten_tomatoes_split()[1].iloc[:n]
    path = folder / f"reviews{n}.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows([t, labels[int(y)]] for t, y in zip(test["text"], test["label"]))
    return path


def differing_cells(ref: Path, got: Path) -> tuple[int, int, float]:
    """(cells that differ as written, cells compared, largest difference of a numeric cell); the seconds
    columns (clocks) are not compared."""
    a = list(csv.reader(ref.open(encoding="utf-8", newline="")))
    b = list(csv.reader(got.open(encoding="utf-8", newline="")))
    if a[0] != b[0] or len(a) != len(b):
        return -1, 0, math.inf
    keep = [i for i, h in enumerate(a[0]) if not h.endswith("_seconds")]
    diff, worst = 0, 0.0
    for ra, rb in zip(a[1:], b[1:]):
        for i in keep:
            if ra[i] != rb[i]:
                diff += 1
                try:
                    worst = max(worst, abs(float(ra[i]) - float(rb[i])))
                except ValueError:  # a top-words cell: the same words, their scores compared
                    wa = [w.rsplit(" ", 1) for w in ra[i].split("; ")]
                    wb = [w.rsplit(" ", 1) for w in rb[i].split("; ")]
                    same = len(wa) == len(wb) and all(x[0] == y[0] for x, y in zip(wa, wb))
                    worst = max(worst, max(abs(float(x[1]) - float(y[1])) for x, y in zip(wa, wb))) if same \
                        else math.inf
    return diff, len(keep) * (len(a) - 1), worst


def run_jobs(lm, data: Path, folder: Path, args, engines: list[tuple[str, object]]) -> list[dict]:
    """Every timed part, the engines alternating inside each round (load that changes hits them alike):
    evaluate, explain, then the no-op overhead jobs; engine None is the single-process path."""
    import bertviz_app as bv
    from bertviz_app.interpret.batch_explain import explain_csv

    out = []
    for r in range(args.rounds):
        for label, engine in engines:
            t = time.perf_counter()
            ev = bv.evaluate_file(lm, data, engine=engine)
            out.append({"job": "evaluate", "engine": label, "round": r, "seconds": time.perf_counter() - t,
                        "rows": ev.rows, "logits": ev.logits.tolist(), "load": os.getloadavg()[0]})
        for label, engine in engines:
            t = time.perf_counter()
            path = folder / f"explain-{label.replace(' ', '_').replace(',', '')}-{r}.csv"
            res = explain_csv(lm, args.explain_data, path, methods=args.methods, tolerance=args.tolerance,
                              engine=engine)
            out.append({"job": "explain", "engine": label, "round": r, "seconds": time.perf_counter() - t,
                        "rows": res.explained, "path": str(path), "load": os.getloadavg()[0]})
    for label, engine in engines:
        for k in (args.noop_few, args.noop_many) if engine is not None else ():
            t = time.perf_counter()
            engine.map_chunks(lm, noop, [[i] for i in range(k)])
            out.append({"job": f"noop{k}", "engine": label, "round": 0, "seconds": time.perf_counter() - t,
                        "rows": k})
    return out


def start_two_nodes(temp: Path) -> tuple[str, list[subprocess.Popen], dict]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"]
    procs = []
    for cmd in (["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}"],
                [f"--address=127.0.0.1:{port}"]):
        log = temp.with_suffix(f".{len(procs)}.log")
        procs.append(subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", *cmd, *common],
                                      stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True))
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text(errors="replace"):
            if time.monotonic() > deadline or procs[-1].poll() is not None:
                raise SystemExit(f"ray start failed: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.3)
    return f"127.0.0.1:{port}", procs, env


def stop(procs: list[subprocess.Popen]) -> None:
    """Every process of the cluster's two sessions, by id (no other Ray on the machine is touched)."""
    sids = {p.pid for p in procs}
    for _ in range(3):
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3]) in sids:
                        os.kill(int(entry.name), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        for p in procs:
            p.wait(timeout=30)
        time.sleep(0.5)


def child(args) -> int:
    """--child: connect to --address and run the Ray parts there; their records as JSON on stdout."""
    import bertviz_app as bv
    from bertviz_app.service.ray_engine import RayEngine

    lm = bv.load_model(args.model, device="cpu", settings=SETTINGS)
    engine = RayEngine(address=args.address, workers=2)
    t = time.perf_counter()
    engine.connect()
    init = time.perf_counter() - t
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # noop reaches the actors by value
    jobs = run_jobs(lm, Path(args.data), Path(args.folder), args, [("two nodes x 1 actor", engine)])
    print(json.dumps({"init": init, "jobs": jobs}))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--n-evaluate", type=int, default=2000)
    ap.add_argument("--n-explain", type=int, default=2000)
    ap.add_argument("--methods", default="ig", help="explain_csv's methods (default: %(default)s)")
    ap.add_argument("--tolerance", type=float, default=None, help="IG's tolerance (default: the library's)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--noop-few", type=int, default=8)
    ap.add_argument("--noop-many", type=int, default=200)
    ap.add_argument("--no-cluster", action="store_true", help="skip the two-node cluster")
    ap.add_argument("--skip-one-actor", action="store_true", help="skip the one-actor local engine")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--address", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--data", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--explain-data", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--folder", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)

    import numpy as np

    import bertviz_app as bv
    from bertviz_app.interpret.batch_explain import explain_csv
    from bertviz_app.service.ray_engine import RayEngine

    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    lm = bv.load_model(args.model, device="cpu", settings=SETTINGS)
    data = reviews(args.n_evaluate, list(lm.labels), folder)
    args.explain_data = reviews(args.n_explain, list(lm.labels), folder)
    # warm-up, untimed: the lazy imports (scikit-learn...) and torch's first passes
    bv.evaluate_file(lm, reviews(64, list(lm.labels), folder))
    explain_csv(lm, reviews(4, list(lm.labels), folder), folder / "warm.csv", methods=args.methods)
    load = [os.getloadavg()[0]]
    import ray
    from ray import cloudpickle

    t = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, object_store_memory=200 * 2**20, log_to_driver=False,
             logging_level="ERROR")
    init_local = time.perf_counter() - t
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # noop reaches the actors by value
    # the single-process path, one local actor, one actor per core: alternating in every round
    engines = [("single process", None), ("local Ray, 1 actor", RayEngine(workers=1)),
               (f"local Ray, {os.cpu_count()} actors", RayEngine(workers=os.cpu_count()))]
    if args.skip_one_actor:  # a long job: only the comparison the issue states (one actor per core)
        del engines[1]
    jobs = run_jobs(lm, data, folder, args, engines)
    ray.shutdown()
    load.append(os.getloadavg()[0])
    init_cluster = None
    if not args.no_cluster:
        temp = Path("/tmp") / f"bvbench-{uuid.uuid4().hex[:8]}"
        address, procs, env = start_two_nodes(temp)
        try:
            run = subprocess.run([sys.executable, __file__, "--child", "--model", args.model, "--address", address,
                                  "--data", str(data), "--explain-data", str(args.explain_data), "--folder",
                                  str(folder), "--methods", args.methods, "--rounds", str(args.rounds),
                                  "--noop-few", str(args.noop_few), "--noop-many", str(args.noop_many)]
                                 + ([] if args.tolerance is None else ["--tolerance", str(args.tolerance)]),
                                 env=env, capture_output=True, text=True, timeout=3600)
        finally:
            stop(procs)
        if run.returncode:
            raise SystemExit(run.stderr[-3000:])
        got = json.loads(run.stdout.strip().splitlines()[-1])
        init_cluster, jobs = got["init"], jobs + got["jobs"]
    load.append(os.getloadavg()[0])
    write(args, jobs, init_local, init_cluster, load, time.perf_counter() - started, np)
    return 0


def write(args, jobs: list[dict], init_local: float, init_cluster: float | None, load: list[float], total: float,
          np) -> None:
    engines = list(dict.fromkeys(j["engine"] for j in jobs))
    med = lambda job, eng: float(np.median([j["seconds"] for j in jobs if j["job"] == job and j["engine"] == eng]))  # noqa: E731
    ref_ev = np.array(next(j for j in jobs if j["job"] == "evaluate" and j["engine"] == "single process")["logits"])
    ref_ex = Path(next(j for j in jobs if j["job"] == "explain" and j["engine"] == "single process")["path"])
    n_ev = next(j["rows"] for j in jobs if j["job"] == "evaluate")
    n_ex = next(j["rows"] for j in jobs if j["job"] == "explain")
    lines = [
        "# Batch work on Ray: evaluate and explain-csv against the single-process path",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores (1-minute load "
        f"average {', '.join(f'{x:.1f}' for x in load)} at the start, after the "
        "local part (this process and the local Ray, alternating), at the end), CPU only, ray 2.60.0, model "
        f"`{Path(args.model).name}`, {total / 60:.1f} min in all.",
        f"`python bench/ray_scale.py --model {args.model} --n-evaluate {args.n_evaluate} --n-explain {args.n_explain} "
        f"--methods {args.methods} --rounds {args.rounds}"
        f"{' --no-cluster' if args.no_cluster else ''}{' --skip-one-actor' if args.skip_one_actor else ''}`: "
        "median seconds over the rounds, the engines alternating "
        "inside each round. Ray's jobs are timed on a Ray already up (each job starts its own actors, which load "
        "the model: that is in the time); `ray.init` "
        f"took {init_local:.1f} s for the local Ray"
        + (f" and {init_cluster:.1f} s to connect to the two-node cluster." if init_cluster is not None else "."),
        "",
        f"| engine | evaluate {n_ev:,} rows: s | x single | rows/s | explain-csv {n_ex:,} rows ({args.methods}): s | "
        "x single | rows/s | evaluate logits: max abs diff | explain CSV: cells differing (of compared) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    base_ev, base_ex = med("evaluate", "single process"), med("explain", "single process")
    for eng in engines:
        ev, ex = med("evaluate", eng), med("explain", eng)
        logits = np.array(next(j for j in jobs if j["job"] == "evaluate" and j["engine"] == eng)["logits"])
        d, n, worst = differing_cells(ref_ex, Path(next(j for j in jobs if j["job"] == "explain"
                                                         and j["engine"] == eng)["path"]))
        lines.append(f"| {eng} | {ev:.2f} | {ev / base_ev:.2f} | {n_ev / ev:.0f} | {ex:.1f} | {ex / base_ex:.2f} | "
                     f"{n_ex / ex:.1f} | {float(np.abs(logits - ref_ev).max()):.1e} | {d} of {n:,}"
                     + (f" (largest {worst:.1e})" if d else "") + " |")
    lines += ["", f"Ray's overhead: a job of chunks that do no model work (`noop`), {args.noop_few} and "
              f"{args.noop_many} chunks; the per-batch cost is the difference over the extra chunks, the fixed cost "
              "(actors started, the model loaded in each) what is left of the small job.", "",
              "| engine | job of " + f"{args.noop_few} chunks: s | job of {args.noop_many} chunks: s | per batch: ms |",
              "|---|---:|---:|---:|"]
    for eng in engines[1:]:
        few, many = med(f"noop{args.noop_few}", eng), med(f"noop{args.noop_many}", eng)
        per = 1000 * (many - few) / (args.noop_many - args.noop_few)
        lines.append(f"| {eng} | {few:.2f} | {many:.2f} | {per:.1f} |")
    lines.append("")
    out = Path(args.out)
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    keep = old[old.index("## Reading"):] if "## Reading" in old else "## Reading (written by hand)\n"
    out.write_text("\n".join(lines) + "\n" + keep, encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
