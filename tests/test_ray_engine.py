"""Batch work on Ray (issue 34): explain-csv, predict-csv and evaluate with ``engine=RayEngine(...)``
(``--engine ray``) against the single-process path's own output on the same file, as the reference.

One local Ray for the file (``ray.init(num_cpus=2, include_dashboard=False)``, a small object store),
started by the first test that needs it; the two-node test starts its own cluster with ``ray start``
subprocesses in their own process sessions and ends exactly those. Without ``ray`` installed only the
first tests run: the library imports no ray, and ``--engine ray`` says how to install it."""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from bertviz_app.config import Settings
from bertviz_app.errors import CancelledError, InputError
from bertviz_app.evaluate.evaluation import evaluate_file
from bertviz_app.interpret import batch_explain
from bertviz_app.interpret.batch_explain import explain_csv, predict_csv
from bertviz_app.service.ray_engine import INSTALL_HINT, EngineError, RayEngine, make_engine

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["good", "bad", "great", "awful", "fun", "tedious", "film", "movie", "not", "was", "joyless", "moving"]
N_STEPS = 16  # fixed IG steps: the same computation in both paths, and fast


def _table(n: int = 40, seed: int = 0) -> str:
    """A CSV of ``n`` short reviews: text, label, a note column with formula-like cells; row 5's text is
    empty (skipped with its reason by both paths)."""
    rnd = random.Random(seed)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["text", "label", "note"])
    for i in range(n):
        text = "" if i == 3 else " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 9)))
        w.writerow([text, rnd.choice(["positive", "negative"]), "=1+1" if i % 7 == 0 else f"n{i}"])
    return buf.getvalue()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ray-data") / "reviews.csv"
    path.write_text(_table(), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def model(signal_model_dir, tmp_path_factory):
    """The trained tiny BERT, loaded as the CLI loads it (a folder), with no result cache."""
    from bertviz_app import load_model

    return load_model(str(signal_model_dir()), device="cpu",
                      settings=Settings(memo_size=0, models_dir=tmp_path_factory.mktemp("ray-models")))


@pytest.fixture(scope="module")
def reference(model, data, tmp_path_factory) -> dict[str, Path]:
    """The single-process path's explain-csv files (CSV and JSONL)."""
    out = tmp_path_factory.mktemp("ray-reference")
    files = {"explain.csv": out / "explain.csv", "explain.jsonl": out / "explain.jsonl"}
    for name in ("explain.csv", "explain.jsonl"):
        explain_csv(model, data, files[name], methods="ig,saliency", n_steps=N_STEPS, tolerance=None)
    return files


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for this file (this worker process's own under pytest-xdist), ended after it."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 2**20, log_to_driver=False,
                 logging_level=logging.ERROR)
    yield ray
    if started:
        ray.shutdown()


# --------------------------------------------------------------------------- comparisons
def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


def _last_place(cell: str) -> float:
    """One unit of the last digit a number was printed with ("0.0421": 1e-4; "-8.216e-05": 1e-8)."""
    mantissa, _, exp = cell.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def _same_number(a: str, b: str) -> bool:
    """Two printed numbers equal up to a rounding flip of their last digit (the values differ by float noise)."""
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6) or abs(x - y) <= 1.01 * _last_place(a)


def _same_words(a: str, b: str) -> bool:
    """Two top-words cells ("good +0.1234; bad -0.0456"): the same words, their scores as ``_same_number``;
    near-ties may swap places."""
    pa = sorted(tuple(p.rsplit(" ", 1)) for p in a.split("; ") if p)
    pb = sorted(tuple(p.rsplit(" ", 1)) for p in b.split("; ") if p)
    return len(pa) == len(pb) and all(wa == wb and _same_number(sa, sb) for (wa, sa), (wb, sb) in zip(pa, pb))


def assert_same_csv(ref: Path, got: Path) -> None:
    """The same header, rows in the same order, every input cell and every text cell as given; numbers
    within float noise (the seconds columns are clocks, not compared)."""
    a, b = _rows(ref), _rows(got)
    assert a[0] == b[0], "the header differs"
    assert len(a) == len(b), f"{len(b) - 1} rows written, the reference has {len(a) - 1}"
    inputs = a[0].index("bv_row")
    for ra, rb in zip(a[1:], b[1:]):
        assert ra[:inputs] == rb[:inputs], f"input cells changed: {ra[:inputs]} -> {rb[:inputs]}"
        for name, x, y in zip(a[0][inputs:], ra[inputs:], rb[inputs:]):
            if x == y or name.endswith("_seconds"):
                continue
            ok = _same_words(x, y) if name.endswith("_top_words") else _same_number(x, y)
            assert ok, f"row {ra[inputs]}, {name}: {y!r}, the reference {x!r}"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _numbers(x, path=""):
    """Every number of a JSON value by its path; the clocks (seconds) left out."""
    if isinstance(x, dict):
        for k, v in x.items():
            if "seconds" not in k:
                yield from _numbers(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield path, float(x)


def _strings(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _strings(v, f"{path}[{i}]")
    elif not isinstance(x, (int, float)) or isinstance(x, bool):
        yield path, x


def assert_same_jsonl(ref: Path, got: Path) -> None:
    """Each row exactly once, in order; every string and flag equal, every number within 1e-5 (relative;
    1e-6 absolute near 0)."""
    a, b = _records(ref), _records(got)
    assert [r["row"] for r in b] == [r["row"] for r in a], "rows lost, repeated or out of order"
    for ra, rb in zip(a, b):
        assert dict(_strings(ra)) == dict(_strings(rb))
        na, nb = dict(_numbers(ra)), dict(_numbers(rb))
        assert na.keys() == nb.keys()
        for k in na:
            assert math.isclose(na[k], nb[k], rel_tol=1e-5, abs_tol=1e-6), f"row {ra['row']} {k}: {nb[k]} vs {na[k]}"


def test_the_comparisons_catch_a_changed_number_and_a_lost_row(reference, tmp_path):
    """Positive control for the comparisons the Ray tests rely on: the reference equals itself, and a
    copy with one probability changed, or one row dropped, does not."""
    assert_same_csv(reference["explain.csv"], reference["explain.csv"])
    assert_same_jsonl(reference["explain.jsonl"], reference["explain.jsonl"])
    rows = _rows(reference["explain.csv"])
    col = rows[0].index("bv_p_positive")
    rows[2][col] = f"{float(rows[2][col]) + 0.01:.6f}"
    changed = tmp_path / "changed.csv"
    with changed.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(AssertionError, match="bv_p_positive"):
        assert_same_csv(reference["explain.csv"], changed)
    lines = reference["explain.jsonl"].read_text(encoding="utf-8").splitlines(keepends=True)
    lost = tmp_path / "lost.jsonl"
    lost.write_text("".join(lines[:5] + lines[6:]), encoding="utf-8")
    with pytest.raises(AssertionError, match="rows lost"):
        assert_same_jsonl(reference["explain.jsonl"], lost)


# --------------------------------------------------------------------------- without ray
def test_without_ray_the_library_imports_none_and_engine_ray_says_how_to_install(monkeypatch, data, tmp_path,
                                                                                  capsys, signal_model_dir):
    code = ("import sys, bertviz_app, bertviz_app.service.ray_engine as r, bertviz_app.interpret.batch_explain, "
            "bertviz_app.evaluate.evaluation, bertviz_app.cli; print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr[-2000:]

    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed: `import ray` fails
    assert make_engine("local") is None  # the default path asks nothing of ray
    with pytest.raises(EngineError, match=r'pip install "\.\[ray\]"'):
        make_engine("ray")
    with pytest.raises(EngineError, match="pip install"):
        RayEngine(workers=1).map_chunks(None, len, [[1]])
    from bertviz_app.cli import main

    out_file = tmp_path / "out.csv"
    assert main(["predict-csv", str(data), "--out", str(out_file), "--model", str(signal_model_dir()),
                 "--engine", "ray"]) == 2
    err = capsys.readouterr().err
    assert INSTALL_HINT in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not out_file.exists()
    # positive control: the same command without --engine ray writes the file
    assert main(["predict-csv", str(data), "--out", str(out_file), "--model", str(signal_model_dir())]) == 0
    assert out_file.exists()


def test_engine_options_are_checked_before_any_work():
    with pytest.raises(InputError, match="--address is for --engine ray"):
        make_engine("local", address="auto")
    with pytest.raises(InputError, match="workers"):
        RayEngine(workers=0)
    with pytest.raises(InputError, match="address"):
        RayEngine(address="nowhere")
    assert RayEngine(address="ray://10.0.0.1:10001", workers=2).describe().startswith("Ray (ray://10.0.0.1:10001)")


# --------------------------------------------------------------------------- on a local Ray
def test_a_pool_the_cluster_cannot_hold_is_refused_before_it_starts(local_ray):
    assert RayEngine(workers=2).pool_size(local_ray) == 2
    assert RayEngine().pool_size(local_ray) == 2  # default: one actor per CPU of the cluster
    assert RayEngine(cpus_per_worker=0.5).pool_size(local_ray) == 4
    with pytest.raises(EngineError, match="need 3 CPU; the cluster has 2 CPU"):
        RayEngine(workers=3).pool_size(local_ray)  # Ray would wait for the third actor forever
    with pytest.raises(EngineError, match="GPU"):
        RayEngine(workers=1, gpus_per_worker=1).pool_size(local_ray)


def test_explain_csv_on_ray_writes_the_single_process_file(local_ray, model, data, reference, tmp_path):
    out = tmp_path / "ray.csv"
    seen: list[tuple[int, int]] = []
    res = explain_csv(model, data, out, methods="ig,saliency", n_steps=N_STEPS, tolerance=None,
                      progress=lambda done, total: seen.append((done, total)), engine=RayEngine(workers=2))
    assert res.engine == "ray" and res.explained == 39 and [r for r, _ in res.skipped] == [5]
    assert_same_csv(reference["explain.csv"], out)
    assert seen[-1] == (39, 39) and len(seen) == 3  # progress after each of the 3 chunks (16, 16, 7 rows)


def test_predict_csv_on_ray_is_byte_identical(local_ray, model, data, tmp_path, monkeypatch):
    monkeypatch.setattr(batch_explain, "PREDICT_CHUNK", 8)  # 5 chunks over the 2 actors (both paths' chunks)
    ref, out = tmp_path / "local.csv", tmp_path / "ray.csv"
    predict_csv(model, data, ref)
    res = predict_csv(model, data, out, engine=RayEngine(workers=2))
    assert res.predicted == 39 and res.engine == "ray"
    assert out.read_bytes() == ref.read_bytes()
    header = _rows(out)[0]
    assert header[:3] == ["text", "label", "note"] and header[3:6] == ["bv_row", "bv_prediction", "bv_p_negative"]
    assert "'=1+1" in out.read_text(encoding="utf-8")  # the spreadsheet guard, as in the local file


def test_evaluate_on_ray_equals_the_single_process_evaluation(local_ray, model, data):
    local = evaluate_file(model, data, words=("not",))
    seen: list[int] = []
    ray_ev = evaluate_file(model, data, words=("not",), engine=RayEngine(workers=2, chunk_rows=8),
                           progress=lambda done, total: seen.append(done))
    np.testing.assert_allclose(ray_ev.logits, local.logits, rtol=1e-5, atol=1e-6)
    assert np.array_equal(ray_ev.predicted, local.predicted) and np.array_equal(ray_ev.n_tokens, local.n_tokens)
    assert len(set(local.predicted.tolist())) == 2  # a model that says both classes: the comparison means something
    a, b = local.to_dict(), ray_ev.to_dict()
    assert dict(_strings(a)) == dict(_strings(b))
    na, nb = dict(_numbers(a)), dict(_numbers(b))
    assert na.keys() == nb.keys()
    for k in na:
        assert math.isclose(na[k], nb[k], rel_tol=1e-5, abs_tol=1e-6), k
    assert seen[-1] == 39 and len(seen) == 5  # 39 rows, 8 a chunk


def _slow_after_first(lm, chunk, *args, claim: str, original, **kwargs):
    """``explain_chunk``, but every chunk after the first one an actor starts (the first claims ``claim``)
    takes 10 minutes more, a row every 0.1 s, checking for a cancel between rows as it does: a job that only
    ends early if it is stopped (pickled by value into the actors)."""
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        for _ in range(6000):
            kwargs["stop_if_cancelled"]()
            time.sleep(0.1)
    return original(lm, chunk, *args, **kwargs)


@pytest.fixture()
def by_value(local_ray):
    """This module's functions reach the actors by value (their module is not importable there)."""
    from ray import cloudpickle

    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    yield
    cloudpickle.unregister_pickle_by_value(module)


def test_cancel_stops_the_job_frees_the_actors_and_writes_nothing(local_ray, by_value, model, data, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setattr(batch_explain, "explain_chunk",
                        partial(_slow_after_first, claim=str(tmp_path / "first"), original=batch_explain.explain_chunk))
    out = tmp_path / "cancelled.csv"
    out.write_text("an earlier file\n", encoding="utf-8")
    cancel = threading.Event()
    cancelled_at: list[float] = []

    def cancel_now(done, total):
        cancelled_at.append(time.monotonic())
        cancel.set()

    with pytest.raises(CancelledError, match="no file was written"):
        explain_csv(model, data, out, n_steps=N_STEPS, tolerance=None, cancel=cancel,
                    progress=cancel_now, engine=RayEngine(workers=2))
    returned = time.monotonic() - cancelled_at[0]
    assert out.read_text(encoding="utf-8") == "an earlier file\n"
    # the other chunks sleep 10 minutes on their actors: their CPUs come back within seconds of the cancel only if
    # the job was stopped. Timed from the cancel, not the start: a loaded machine can take minutes to start the
    # actors and finish the first chunk (151 s seen under 4x load), which says nothing of the cancel
    while local_ray.available_resources().get("CPU", 0) < 2 and time.monotonic() - cancelled_at[0] < 60:
        time.sleep(0.2)
    assert local_ray.available_resources().get("CPU", 0) == 2, "the cancelled job's actors still hold CPUs"
    assert returned < 60, f"explain_csv returned {returned:.0f} s after the cancel"
    assert local_ray.is_initialized()  # the cluster keeps running


def _dies_once(lm, chunk, *args, marker: str, original, **kwargs):
    """``explain_chunk``, but the actor that takes the chunk of ``marker``'s row while the marker exists
    removes it and exits at once (its process gone, mid-run): pickled by value into the actors."""
    try:
        chosen = Path(marker).read_text(encoding="utf-8")
    except FileNotFoundError:  # it has died once already
        chosen = None
    if str(chunk[0][0]) == chosen:
        try:
            os.remove(marker)
        except FileNotFoundError:  # the other actor took it first
            pass
        else:
            os._exit(1)
    return original(lm, chunk, *args, **kwargs)


def test_an_actor_killed_mid_run_loses_no_row_and_repeats_none(local_ray, by_value, model, data, reference,
                                                               tmp_path, monkeypatch):
    marker = tmp_path / f"die-{uuid.uuid4().hex}"
    # the third chunk's first row (rows 2-41 but 5, 16 a chunk): two chunks are done or under way by then
    marker.write_text("35", encoding="utf-8")
    monkeypatch.setattr(batch_explain, "explain_chunk",
                        partial(_dies_once, marker=str(marker), original=batch_explain.explain_chunk))
    out = tmp_path / "after-kill.jsonl"
    res = explain_csv(model, data, out, methods="ig,saliency", n_steps=N_STEPS, tolerance=None,
                      engine=RayEngine(workers=2, max_retries=2))
    assert not marker.exists(), "no actor died: the test did not test a retry"
    assert res.explained == 39
    assert_same_jsonl(reference["explain.jsonl"], out)


# --------------------------------------------------------------------------- a two-node cluster
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _session_members(sids: set[int]) -> list[int]:
    """Every live process of these sessions (``ray start`` and what it started), by id."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) in sids and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def _wait_for(log: Path, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "Ray runtime started" in log.read_text(encoding="utf-8", errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise AssertionError(f"ray start did not come up: {log.read_text(encoding='utf-8', errors='replace')[-2000:]}")


@pytest.fixture()
def two_nodes(tmp_path):
    """A head and a second node on this machine, one CPU each, in their own sessions; ended after the
    test (their whole sessions, by process id: no other Ray on the machine is touched)."""
    pytest.importorskip("ray")
    if not sys.platform.startswith("linux"):
        pytest.skip("the teardown reads /proc")
    port = _free_port()
    # a short folder: Ray's socket paths must fit in 107 characters
    temp = Path("/tmp") / f"bvray-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"]
    procs = []
    try:
        head_log = tmp_path / "head.log"
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", f"--port={port}",
             "--include-dashboard=false", f"--temp-dir={temp}", *common],
            stdout=head_log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(head_log, procs[0])
        node_log = tmp_path / "node.log"
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "ray.scripts.scripts", "start", f"--address=127.0.0.1:{port}", *common],
            stdout=node_log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(node_log, procs[1])
        yield f"127.0.0.1:{port}", env
    finally:
        sids = {p.pid for p in procs}
        # a test cluster has nothing to drain: every process of its two sessions killed at once, by id
        for _ in range(3):
            for pid in _session_members(sids):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for p in procs:
                p.wait(timeout=30)
            time.sleep(0.5)
        shutil.rmtree(temp, ignore_errors=True)
        assert not _session_members(sids), "Ray processes of the test's cluster are still running"


def test_explain_csv_on_a_two_node_cluster_through_address(two_nodes, data, reference, tmp_path, signal_model_dir):
    address, env = two_nodes
    out = tmp_path / "cluster.csv"
    run = subprocess.run(
        [sys.executable, "-m", "bertviz_app", "explain-csv", str(data), "--out", str(out), "--model",
         str(signal_model_dir()), "--methods", "ig,saliency", "--n-steps", str(N_STEPS), "--tolerance", "0",
         "--engine", "ray", "--address", address, "--workers", "2"],
        cwd=ROOT, env={**env, "BERTVIZ_MEMO_SIZE": "0"}, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "on Ray (127.0.0.1" in run.stdout and "2 actors" in run.stdout, run.stdout
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert_same_csv(reference["explain.csv"], out)
    # "2 actors x 1 CPU" ran: a pool the cluster cannot hold is refused before it starts, and each node has
    # one CPU, so the job ran on both nodes
