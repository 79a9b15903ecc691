"""Public mode served (BERTVIZ_PUBLIC=1): another visitor's run, asked for by name through the JSON
routes, the gradio API or a file URL, answers as a model that does not exist; its owner (the
X-Bertviz-Owner token) reaches it and deletes it. Runs here are the tiny model copied into
models/runs with an owner in run.json, as a fine-tune saves them (the browser test trains one)."""

from __future__ import annotations

import json
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bertviz_app import visitors  # noqa: E402

from conftest import served_app  # noqa: E402

gradio_client = pytest.importorskip("gradio_client")

A_TOKEN, B_TOKEN = visitors.new_token(), visitors.new_token()
A = visitors.owner_hash(A_TOKEN)


def own_run(models: Path, name: str, tiny_model_dir: Path, owner: str | None) -> Path:
    dest = models / "runs" / name
    shutil.copytree(tiny_model_dir, dest)
    info = {"name": f"runs/{name}", "mode": "probe", "base": "encoder", "labels": ["negative", "positive"]}
    if owner:
        info["owner"] = owner
    (dest / "run.json").write_text(json.dumps(info))
    return dest


@pytest.fixture(scope="module")
def public_app(tiny_model_dir, tmp_path_factory):
    models = tmp_path_factory.mktemp("public-registry")
    own_run(models, "a-secret", tiny_model_dir, A)
    own_run(models, "a-other", tiny_model_dir, A)
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=models, BERTVIZ_PUBLIC=1,
                    BERTVIZ_MAX_UPLOADS_PER_HOUR=4, BERTVIZ_MAX_UPLOAD_MB=1) as url:
        yield url, models


def post(url: str, name: str, body: dict, token: str | None = None, cookie: str | None = None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["X-Bertviz-Owner"] = token
    if cookie:
        headers["Cookie"] = f"bertviz_owner={cookie}"
    req = urllib.request.Request(f"{url}v1/{name}", data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_json_routes_answer_another_visitors_run_as_a_missing_one(public_app):
    url, _ = public_app
    asked = {"text": "the film was good", "model": "runs/a-secret"}
    status, out = post(url, "predict", asked, token=A_TOKEN)
    assert status == 200 and set(out["scores"]) == {"negative", "positive"}
    assert post(url, "predict", asked, cookie=A_TOKEN)[0] == 200  # the cookie works as the header does
    missing = post(url, "predict", {"text": "good", "model": "runs/no-such-run"}, token=B_TOKEN)
    for token in (B_TOKEN, None, "not-a-token", A):  # A's *hash* (what is on disk) is no token
        status, out = post(url, "predict", asked, token=token)
        assert status == 404 == missing[0]
        assert out["error"].replace("a-secret", "X") == missing[1]["error"].replace("no-such-run", "X")
        assert "a-other" not in out["error"]
    for name in ("summary", "explain", "attention", "compare"):
        body = {"model": "runs/a-secret"} | ({} if name == "summary" else {"text": "good"})
        assert post(url, name, body, token=B_TOKEN)[0] == 404
    # an unknown model's "Available: ..." list names no visitor's run
    status, out = post(url, "predict", {"text": "good", "model": "no-such-model"}, token=B_TOKEN)
    assert status == 404 and "runs/" not in out["error"]
    # folders by path are refused in public mode, whatever BERTVIZ_ALLOW_LOCAL_PATHS says
    status, out = post(url, "predict", {"text": "good", "model": str(public_app[1] / "runs" / "a-secret")},
                       token=B_TOKEN)
    assert status == 404 and "turned off" in out["error"]


def test_gradio_api_and_file_urls_do_not_reach_another_visitors_run(public_app):
    url, models = public_app
    client = gradio_client.Client(url, verbose=False)
    with pytest.raises(Exception, match="No run 'runs/a-secret' among your runs"):
        client.predict("good", "", "runs/a-secret", api_name="/predict")
    for api_name in ("/finetune_zip", "/delete_run", "/finetune_compare"):  # refused as a run that does not exist
        args = ("good", "") if api_name == "/finetune_compare" else ()

        def refusal(name, args=args, api_name=api_name):
            with pytest.raises(Exception) as e:
                client.predict(name, *args, api_name=api_name)
            return str(e.value).replace(name, "NAME")

        assert refusal("runs/a-secret") == refusal("runs/no-such-run")
    for path in (models / "runs" / "a-secret" / "model.safetensors", models / "runs" / "a-secret" / "run.json"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{url}gradio_api/file={path}", timeout=30)
        assert e.value.code in (403, 404)
    assert (models / "runs" / "a-other" / "config.json").is_file()


def test_an_api_client_with_the_owner_token_reaches_its_run(public_app):
    url, _ = public_app
    mine = gradio_client.Client(url, verbose=False, headers={"X-Bertviz-Owner": A_TOKEN})
    out = mine.predict("the film was good", "", "runs/a-secret", api_name="/predict")
    assert set(out["scores"]) == {"negative", "positive"}
    other = gradio_client.Client(url, verbose=False, headers={"X-Bertviz-Owner": B_TOKEN})
    with pytest.raises(Exception, match="No run 'runs/a-secret' among your runs"):
        other.predict("the film was good", "", "runs/a-secret", api_name="/predict")


def test_a_zip_bomb_renamed_csv_and_fifty_uploads_in_a_row_are_refused(public_app, tmp_path):
    import zipfile

    url, models = public_app
    bomb = tmp_path / "reviews.csv"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big.csv", "a" * 50_000_000)  # 50 MB of one letter, ~50 kB zipped
    client = gradio_client.Client(url, verbose=False)
    out = client.predict(gradio_client.handle_file(str(bomb)), api_name="/finetune_upload")
    assert "is a ZIP archive" in out[0] and "it was not opened" in out[0]  # the notices (the client skips states)
    good = tmp_path / "ok.csv"
    good.write_text("review,sentiment\ngood film,positive\nbad film,negative\n")
    refused = 0
    for _ in range(50):
        try:
            client.predict(gradio_client.handle_file(str(good)), api_name="/finetune_upload")
        except Exception as exc:  # noqa: BLE001 - the refusal, as the API client sees it
            assert "uploaded 4 files in the last hour" in str(exc)
            refused += 1
    assert refused == 47  # 4 an hour: the bomb and 3 tables, then every one refused
    big = tmp_path / "big.csv"
    big.write_text("review,sentiment\n" + "a long review,positive\n" * 60_000)  # 1.4 MB
    with pytest.raises(ValueError, match="exceeds the maximum file size of 1000000 bytes"):
        client.predict(gradio_client.handle_file(str(big)), api_name="/finetune_upload")
    import httpx  # and the server's upload route itself refuses it, whoever sends it

    r = httpx.post(f"{url}gradio_api/upload", files={"files": ("big.csv", big.read_bytes(), "text/csv")}, timeout=60)
    assert r.status_code == 413, (r.status_code, r.text[:200])
    assert (models / "runs" / "a-secret" / "config.json").is_file()


def test_delete_my_data_removes_only_the_callers_runs(public_app, tiny_model_dir):
    url, models = public_app
    own_run(models, "b-mine", tiny_model_dir, visitors.owner_hash(B_TOKEN))
    status, out = post(url, "delete_my_data", {}, token=B_TOKEN)
    assert status == 200 and "1 run(s)" in out["message"]
    assert not (models / "runs" / "b-mine").exists() and (models / "runs" / "a-secret").is_dir()
    assert post(url, "delete_my_data", {})[0] == 400  # no token: nothing to delete, and says why
    status, out = post(url, "delete_my_data", {}, token=A_TOKEN)
    assert status == 200 and "2 run(s)" in out["message"]
    assert sorted(p.name for p in (models / "runs").iterdir()) == []


def test_the_sweeper_thread_removes_stale_visitor_runs(tmp_path, tiny_model_dir):
    import os
    import time

    from bertviz_app.ui import visitor

    stale = own_run(tmp_path, "stale", tiny_model_dir, A)
    kept = own_run(tmp_path, "operator", tiny_model_dir, None)
    old = time.time() - 10
    os.utime(stale / "run.json", (old, old))
    stop = visitor.start_sweeper(tmp_path, ttl_s=5, every_s=0.1)
    try:
        deadline = time.time() + 10
        while stale.exists() and time.time() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
    assert not stale.exists() and kept.is_dir()
