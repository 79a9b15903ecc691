"""Public mode's core (bertviz_app/models/visitors.py): owners, access, quotas, deletion, the sweeper, the
fine-tune queue and upload counts, on run folders written here (no training except one probe run)
and small limits. Plus: a Hub token typed for a push is found nowhere afterwards."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bertviz_app.errors import InputError, LimitError, ModelNotFoundError
from bertviz_app.models import visitors as v

A_TOKEN, B_TOKEN = v.new_token(), v.new_token()
A, B = v.owner_hash(A_TOKEN), v.owner_hash(B_TOKEN)


def fake_run(runs: Path, name: str, owner: str | None, size: int = 10, mtime: float | None = None) -> Path:
    """A run folder as run_finetune leaves it, as far as ownership goes (config.json, run.json)."""
    p = runs / name
    p.mkdir(parents=True)
    (p / "config.json").write_text("{}")
    info = {"name": f"runs/{name}", **({"owner": owner} if owner else {})}
    (p / "run.json").write_text(json.dumps(info))
    (p / "model.safetensors").write_bytes(b"\0" * size)
    if mtime is not None:
        os.utime(p / "run.json", (mtime, mtime))
        os.utime(p, (mtime, mtime))
    return p


def test_tokens_are_random_and_only_their_hash_names_an_owner():
    assert A_TOKEN != B_TOKEN and len(A_TOKEN) == 64 and A != B
    assert A != A_TOKEN and len(A) == 64 and v.owner_hash(A_TOKEN) == A
    for bad in (None, "", "alice", "../" + A_TOKEN, A_TOKEN.upper(), A_TOKEN + "0", 42):
        assert v.owner_hash(bad) == v.NOBODY  # a bad token owns nothing, it never fails open


def test_the_core_module_imports_neither_gradio_nor_torch():
    code = "import sys, bertviz_app.models.visitors; print('gradio' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_each_owner_sees_and_opens_only_its_runs(tmp_path):
    runs = tmp_path / "runs"
    fake_run(runs, "a1", A)
    fake_run(runs, "b1", B)
    fake_run(runs, "cli", None)  # saved without an owner (the operator's CLI): nobody's in public mode
    models = [{"name": "default"}, {"name": "encoder"}, {"name": "runs/a1"}, {"name": "runs/b1"}, {"name": "runs/cli"}]
    assert [m["name"] for m in v.visible(models, A, runs)] == ["default", "encoder", "runs/a1"]
    assert [m["name"] for m in v.visible(models, v.NOBODY, runs)] == ["default", "encoder"]
    assert v.visible(models, None, runs) == models  # local mode: everything, as before
    assert v.check_access("runs/a1", A, runs) == runs / "a1"
    assert v.check_access("default", A, runs) is None and v.check_access("runs/b1", None, runs) is None

    def refused(name, owner=A):
        with pytest.raises(ModelNotFoundError) as e:
            v.check_access(name, owner, runs)
        return str(e.value).replace(repr(name.strip()[:80]), "NAME")

    # another visitor's run answers word for word as a run that does not exist
    assert refused("runs/b1") == refused("runs/no-such-run") == refused("runs/cli") == refused(" runs//b1")
    assert "b1" not in refused("runs/no-such-run") and "runs/a1" in refused("runs/b1")
    for name in ("runs/../runs/b1", "runs/b1/../a1", "runs/../../etc"):
        refused(name)
    refused("runs/a1", v.NOBODY)


def test_registry_messages_lose_other_visitors_run_names():
    msg = "No registered model 'x'. Available: default, runs/a1, runs/b1, runs/b1x, runs/c.d."
    assert v.hide_names(msg, ["runs/b1", "runs/c.d"]) == (
        "No registered model 'x'. Available: default, runs/a1, runs/b1x.")


def test_quota_per_visitor_in_all_and_on_disk(tmp_path):
    runs = tmp_path / "runs"
    now = time.time()
    fake_run(runs, "a-old", A, mtime=now - 100)
    fake_run(runs, "a-new", A, mtime=now - 10)
    small = v.Limits(runs_per_owner=2, runs_total=4, disk_bytes=10**6)
    v.check_quota(runs, None, small)  # local mode: no limits
    with pytest.raises(LimitError) as e:
        v.check_quota(runs, A, small)
    assert e.value.oldest == "runs/a-old" and "Delete 1 first: your oldest is runs/a-old" in str(e.value)
    v.check_quota(runs, B, small, new_runs=2)
    with pytest.raises(LimitError, match="a visitor may keep 2"):  # mode "both" saves two
        v.check_quota(runs, B, small, new_runs=3)
    fake_run(runs, "b1", B)
    fake_run(runs, "b2", B)
    c = v.owner_hash(v.new_token())
    with pytest.raises(LimitError, match="holds 4 visitors' runs, its limit is 4"):
        v.check_quota(runs, c, small)
    with pytest.raises(LimitError, match=r"take 0\.00 GB of the 0\.00 GB allowed"):
        v.check_quota(runs, c, v.Limits(disk_bytes=40))


def test_delete_removes_only_the_owners_runs_and_folders(tmp_path):
    runs = tmp_path / "runs"
    fake_run(runs, "a1", A)
    fake_run(runs, "a2", A)
    fake_run(runs, "b1", B)
    with pytest.raises(ModelNotFoundError, match="No run 'runs/b1' among your runs"):
        v.delete_run(runs, "runs/b1", A)
    with pytest.raises(InputError):
        v.delete_run(runs, "../b1", A)
    assert v.delete_run(runs, "runs/a1", A) == "runs/a1" and not (runs / "a1").exists()
    extra = tmp_path / "zips-a"
    extra.mkdir()
    (extra / "a2.zip").write_bytes(b"zip")
    assert v.delete_owner_data(runs, A, [extra]) == ["runs/a2", str(extra)]
    assert sorted(p.name for p in runs.iterdir()) == ["b1"] and not extra.exists()
    for nobody in (None, v.NOBODY, ""):
        with pytest.raises(InputError):
            v.delete_owner_data(runs, nobody)
    assert (runs / "b1" / "config.json").is_file()


def test_sweeper_removes_visitors_runs_not_opened_within_the_ttl(tmp_path):
    runs = tmp_path / "runs"
    now = 1_000_000.0
    fake_run(runs, "stale", A, mtime=now - 7200)
    fake_run(runs, "opened", A, mtime=now - 7200)
    fake_run(runs, "fresh", B, mtime=now - 60)
    fake_run(runs, "operator", None, mtime=now - 10**6)  # no owner: the operator's, never swept
    v.touch(runs / "opened", now - 5)  # loading a run marks it opened
    folder_mtime = (runs / "opened").stat().st_mtime
    assert v.last_opened(runs / "opened") == now - 5 and folder_mtime == now - 7200  # the run lists keep their order
    assert v.sweep(runs, ttl_s=3600, now=now) == ["runs/stale"]
    assert sorted(p.name for p in runs.iterdir()) == ["fresh", "opened", "operator"]
    assert sorted(v.sweep(runs, ttl_s=30, now=now)) == ["runs/fresh"]


def test_one_fine_tune_per_visitor_and_a_queue_with_positions():
    q = v.FinetuneQueue(slots=1, max_waiting=2)
    ta = q.join(A)
    with pytest.raises(LimitError, match="already have a fine-tune running or waiting"):
        q.join(A)  # a second tab of the same browser
    tb = q.join(B)
    tc = q.join(v.owner_hash(v.new_token()))
    with pytest.raises(LimitError, match="2 fine-tunes are already waiting"):
        q.join(v.owner_hash(v.new_token()))
    assert (q.position(ta), q.position(tb), q.position(tc)) == (0, 1, 2)
    seen, waiting = [], threading.Event()

    def wait_turn():
        for pos in q.waiting(tb, poll=0.05):
            seen.append(pos)
            waiting.set()

    waiter = threading.Thread(target=wait_turn)
    waiter.start()
    assert waiting.wait(30)  # the waiter has told its position: it waits behind ta
    q.leave(ta)
    waiter.join(5)
    assert not waiter.is_alive() and seen and set(seen) == {1}
    assert (q.position(tb), q.position(tc)) == (0, 1)
    q.leave(tb)
    q.leave(tc)
    q.join(A)  # free again once the first has left


def test_fifty_uploads_in_a_row_are_refused_past_the_limit():
    counter = v.UploadCounter(per_hour=5)
    now = 1000.0
    refused = 0
    for i in range(50):
        try:
            counter.count(A, now + i)
        except LimitError as exc:
            refused += 1
            assert "uploaded 5 files in the last hour" in str(exc)
    assert refused == 45
    counter.count(B, now)  # another visitor is not affected
    counter.count(A, now + 3601)  # an hour later the window has moved on


def test_limits_come_from_the_settings():
    from bertviz_app.config import Settings

    assert Settings().public is False  # off by default: local behaviour unchanged
    env = {f"BERTVIZ_{k}": val for k, val in {"PUBLIC": "1", "MAX_RUNS_PER_VISITOR": "2", "MAX_RUNS_TOTAL": "5",
                                              "MAX_RUNS_DISK_GB": "0.5", "RUN_TTL_HOURS": "0.5", "FINETUNE_QUEUE": "4",
                                              "MAX_UPLOADS_PER_HOUR": "7"}.items()}
    s = Settings.from_env(env)
    assert s.public and v.Limits.from_settings(s) == v.Limits(runs_per_owner=2, runs_total=5, disk_bytes=5 * 10**8,
                                                              ttl_s=1800.0, queue=4, uploads_per_hour=7)
    with pytest.raises(ValueError, match="BERTVIZ_RUN_TTL_HOURS must be a positive number"):
        Settings.from_env({**env, "BERTVIZ_RUN_TTL_HOURS": "0"})


def test_a_probe_run_stores_its_owner_hashed_and_local_runs_none(models_dir, tiny_model_dir, tmp_path):
    from test_finetune import write_csv

    from bertviz_app.train.data import build_dataset, read_table
    from bertviz_app.train.finetune import load_run_info, run_finetune

    ds = build_dataset(read_table(write_csv(tmp_path / "r.csv", n=24)), "review", "sentiment")
    mine = run_finetune(ds, base=str(tiny_model_dir), mode="probe", name="mine", owner=A, models_dir=models_dir)
    local = run_finetune(ds, base=str(tiny_model_dir), mode="probe", name="local", models_dir=models_dir)
    assert load_run_info(mine.path)["owner"] == A and "owner" not in load_run_info(local.path)
    assert v.run_owner(mine.path) == A
    on_disk = b"".join(p.read_bytes() for p in mine.path.rglob("*") if p.is_file())
    assert A_TOKEN.encode() not in on_disk  # the token itself is never written


def test_a_hub_token_is_found_nowhere_after_a_failed_push(models_dir, tiny_model_dir, tmp_path, monkeypatch, caplog):
    """A push against an unreachable Hub: the token is not in the error, the logs, the run folder,
    its model card, or any file the app wrote."""
    from test_finetune import write_csv

    from bertviz_app.train.data import build_dataset, read_table
    from bertviz_app.train.finetune import push_run, run_finetune
    from bertviz_app.ui import finetune_tab

    token = "hf_" + "Secret" * 6
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    ds = build_dataset(read_table(write_csv(tmp_path / "r.csv", n=24)), "review", "sentiment")
    run = run_finetune(ds, base=str(tiny_model_dir), mode="probe", name="pushme", owner=A,
                       models_dir=models_dir)
    caplog.set_level(logging.DEBUG)
    started = time.time()
    messages = []
    for push in (push_run, finetune_tab.push_to_hub):
        with pytest.raises(InputError) as e:
            push(run.name, "someone/model", token, models_dir=models_dir)
        messages.append(str(e.value))
    assert all("The push to 'someone/model' failed" in m and token not in m for m in messages)
    assert token not in caplog.text
    import tempfile

    written = [p for root in (models_dir, Path(tempfile.gettempdir())) for p in _files(root)
               if p.is_file() and not p.is_symlink() and _mtime(p) >= started - 1]
    for p in [*written, *run.path.rglob("*")]:
        try:
            if p.is_file() and p.stat().st_size < 50_000_000:
                assert token.encode() not in p.read_bytes(), p
        except FileNotFoundError:  # another test's temporary file, gone since the scan
            pass
    hf_home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    assert not (hf_home / "token").is_file() or token not in (hf_home / "token").read_text()


def _files(root: Path):
    """Every file under ``root``; folders that vanish during the walk (other tests' temporary folders in the
    shared temp dir) are skipped, as os.walk does, where Path.rglob raised."""
    for folder, _, names in os.walk(root):
        for name in names:
            yield Path(folder) / name


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0
