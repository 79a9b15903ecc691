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
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bertviz_app.models import visitors  # noqa: E402

from conftest import queue_event, served_app  # noqa: E402

gradio_client = pytest.importorskip("gradio_client")
httpx = pytest.importorskip("httpx")

A_TOKEN, B_TOKEN, C_TOKEN = visitors.new_token(), visitors.new_token(), visitors.new_token()
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
    qa = {"question": "good", "context": "the film", "model": "runs/a-secret"}  # A's run is a classifier: past the
    assert post(url, "answer", qa, token=B_TOKEN)[0] == 404  # ownership check for A alone, to the head's refusal
    status, out = post(url, "answer", qa, token=A_TOKEN)
    assert status == 400 and "is a sequence classification model" in out["error"]
    # an unknown model's "Available: ..." list names no visitor's run
    status, out = post(url, "predict", {"text": "good", "model": "no-such-model"}, token=B_TOKEN)
    assert status == 404 and "runs/" not in out["error"]
    # folders by path are refused in public mode, whatever BERTVIZ_ALLOW_LOCAL_PATHS says
    status, out = post(url, "predict", {"text": "good", "model": str(public_app[1] / "runs" / "a-secret")},
                       token=B_TOKEN)
    assert status == 404 and "turned off" in out["error"]


# --- the gradio API over raw HTTP, as an attacker sends it (no gradio_client filling in or checking anything) ---
RUN_PARAMS = ("model", "model_name", "compare_with")  # the parameters that name a model (a run, in public mode)
REQUIRED = object()  # a parameter without a default


def call(url: str, api: str, data: list, token: str | None = None) -> tuple[str, object]:
    """POST /gradio_api/call/<api> with ``data`` (and the owner token), then its event stream: ("complete",
    its data) or ("error", its message); ("refused", "<status> <body>") when the POST itself is refused."""
    headers = {"X-Bertviz-Owner": token} if token else {}
    r = httpx.post(f"{url}gradio_api/call/{api}", json={"data": data}, headers=headers, timeout=30)
    if r.status_code != 200:
        return "refused", f"{r.status_code} {r.text}"
    stream = httpx.get(f"{url}gradio_api/call/{api}/{r.json()['event_id']}", headers=headers, timeout=120).text
    kind = data_line = None
    for line in stream.splitlines():  # the last event is the answer
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data_line = json.loads(line[5:])
    if kind == "error":
        return "error", (data_line or {}).get("error")
    return kind, data_line


def model_doors(url: str) -> dict[str, tuple[list, list[int], list[str]]]:
    """{api name: (its parameters' defaults, the positions of those naming a model, the parameters' names)} for
    every endpoint of the gradio API (/gradio_api/info, undocumented ones too) with a parameter that names a
    model by free text: the gr.api routes, and the page's events whose model chooser takes a typed name (a
    dropdown with ``allow_custom_value``, read from the page's /config). Dropdowns held to their choices (the
    run list) are tried in ``test_a_stale_run_list_is_no_key_to_a_run_that_is_no_longer_yours``; the Fine-tune
    tab's base (``finetune_start``) answers in its status line, not with an error, and needs a table first."""
    info = httpx.get(f"{url}gradio_api/info", params={"all_endpoints": "true"}, timeout=30).json()
    cfg = httpx.get(f"{url}config", timeout=30).json()
    comps = {c["id"]: c for c in cfg["components"]}
    events = {d.get("api_name"): d for d in cfg["dependencies"]}
    found = {}
    for name, ep in info["named_endpoints"].items():
        name = name.lstrip("/")
        params = ep["parameters"]
        dep = events.get(name)
        shown = [c for c in (dep or {}).get("inputs", []) if comps[c]["type"] != "state"]  # the API's parameters

        def free_text(i, params=params, shown=shown):
            if params[i]["component"] == "Api":
                return True
            return len(shown) == len(params) and comps[shown[i]].get("props", {}).get("allow_custom_value") is True

        slots = [i for i, p in enumerate(params) if p.get("parameter_name") in RUN_PARAMS and free_text(i)]
        if slots and name != "finetune_start":
            found[name] = ([p.get("parameter_default") if p.get("parameter_has_default") else REQUIRED for p in params],
                           slots, [p.get("parameter_name") for p in params])
    return found


def door_inputs(door: tuple[list, list[int], list[str]], slot: int, model: str, file: dict | None,
                text: str = "the film was good") -> list:
    """The door's defaults with ``model`` in ``slot``, ``file`` in a parameter named file, ``text`` in the
    other parameters without a default."""
    defaults, _, names = door
    data = [model if i == slot else file if name == "file" else text if v is REQUIRED else v
            for i, (v, name) in enumerate(zip(defaults, names))]
    return data


def upload(url: str) -> dict:
    """A labelled table sent to gradio's upload route, as FileData (the /evaluate door reads it)."""
    body = "review,sentiment\nthe film was good,positive\nthe film was bad,negative\n"
    r = httpx.post(f"{url}gradio_api/upload", files={"files": ("reviews.csv", body.encode(), "text/csv")}, timeout=30)
    r.raise_for_status()
    return {"path": r.json()[0], "meta": {"_type": "gradio.FileData"}, "orig_name": "reviews.csv"}


def test_the_gradio_api_over_raw_http_reaches_the_apps_ownership_check(public_app):
    """Every API door that takes a model by name, posted to /gradio_api/call/<name>: B (another visitor's token)
    and a caller without a token are refused by the app's own check, with the one answer of a run that does not
    exist; A, the owner, gets through the same door with the same request (the positive control)."""
    url, _ = public_app
    found = model_doors(url)
    assert {"predict", "attention", "explain", "compare", "summary", "evaluate", "analyze"} <= set(found), found
    for door, spec in found.items():
        for slot in spec[1]:
            def ask(model, token, door=door, spec=spec, slot=slot):
                file = upload(url) if "file" in spec[2] else None
                return call(url, door, door_inputs(spec, slot, model, file), token)

            mine = ask("runs/a-secret", A_TOKEN)
            if door in ("tag", "answer"):  # A's run is a classifier: the owner gets past the ownership check to the
                # head's refusal
                assert mine[0] == "error" and "is a sequence classification model" in str(mine[1]), (door, mine)
            else:
                assert mine[0] == "complete", (door, slot, mine)
            theirs = ask("runs/a-secret", B_TOKEN)
            assert theirs[0] == "error" and "No run 'runs/a-secret' among your runs" in str(theirs[1]), (door, theirs)
            missing = ask("runs/no-such-run", C_TOKEN)  # another visitor without runs (uploads: 4 an hour each)
            assert missing[0] == "error" and "No run 'runs/no-such-run' among your runs" in missing[1], missing
            refusals = [theirs] + ([ask("runs/a-secret", None)] if "file" not in spec[2] else [])  # and no token
            for kind, said in refusals:
                assert kind == "error", (door, slot, said)
                assert said.replace("a-secret", "X") == missing[1].replace("no-such-run", "X"), (door, said)
                assert "a-other" not in said


def join_page(url: str, token: str) -> str:
    """A page's session over raw HTTP, as the browser opens one: its owner token told on load (the page-load
    event with the BrowserState input), then the Fine-tune tab's run list filled (its page-load refresh).
    Returns the session hash."""
    session = uuid.uuid4().hex[:10]
    cfg = httpx.get(f"{url}config", timeout=30).json()
    comps = {c["id"]: c["type"] for c in cfg["components"]}
    deps = cfg["dependencies"]
    register = next(i for i, d in enumerate(deps) if [comps[c] for c in d["inputs"]] == ["browserstate"]
                    and d.get("backend_fn"))
    refresh = next(i for i, d in enumerate(deps) if d.get("api_name", "").startswith("refresh_runs")
                   and d.get("trigger_after") == register)
    for fn, data in ((register, [token]), (refresh, [None])):
        body = {"fn_index": fn, "data": data, "session_hash": session, "event_data": None, "trigger_id": None}
        r = httpx.post(f"{url}gradio_api/run/predict", json=body, timeout=30)
        assert r.status_code == 200, r.text
    return session


def page_event(url: str, api_name: str, data: list, session: str) -> dict:
    """The page's event ``api_name`` joined to gradio's queue in ``session`` and followed to its end: its
    process_completed message (``success``, ``output``)."""
    cfg = httpx.get(f"{url}config", timeout=30).json()
    fn = next(i for i, d in enumerate(cfg["dependencies"]) if d.get("api_name") == api_name)
    return queue_event(url, fn, data, session)


def test_a_stale_run_list_is_no_key_to_a_run_that_is_no_longer_yours(public_app, tiny_model_dir):
    """The run list a page holds decides nothing: B's page listed runs/b-was-mine while it was B's; its name now
    belongs to A (B's run removed, the name taken again). B's download, compare and delete, sent with the listed
    name (so gradio's own check of the list lets them through), are each refused by the app's ownership check
    with the answer for a run that does not exist, and nothing is deleted; A's page, with the same requests,
    downloads and compares it, then deletes it (the positive control)."""
    url, models = public_app
    run = own_run(models, "b-was-mine", tiny_model_dir, visitors.owner_hash(B_TOKEN))
    b_page = join_page(url, B_TOKEN)
    (run / "run.json").write_text(json.dumps(json.loads((run / "run.json").read_text()) | {"owner": A}))
    asks = {"finetune_zip": ["runs/b-was-mine"], "finetune_compare": ["runs/b-was-mine", "the film was good", ""],
            "delete_run": ["runs/b-was-mine"]}
    for api_name, data in asks.items():
        done = page_event(url, api_name, data, b_page)
        assert done["success"] is False, (api_name, done)
        said = done["output"]["error"]
        assert said.startswith("No run 'runs/b-was-mine' among your runs: it does not exist"), (api_name, said)
        assert "a-secret" not in said and "not in the list of choices" not in said
    assert (run / "model.safetensors").is_file()
    a_page = join_page(url, A_TOKEN)
    for api_name, data in asks.items():
        done = page_event(url, api_name, data, a_page)
        assert done["success"] is True, (api_name, done)
    assert not run.exists()  # A deleted it


def test_file_urls_do_not_reach_another_visitors_run(public_app):
    url, models = public_app
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


def test_the_sweeper_thread_removes_stale_visitor_runs(tmp_path, tiny_model_dir, monkeypatch):
    """The sweeper thread's first sweep (seen through the sweep it calls) removes a visitor's run not opened for
    longer than the TTL and keeps the operator's (no owner)."""
    import os
    import threading
    import time

    from bertviz_app.ui import visitor

    stale = own_run(tmp_path, "stale", tiny_model_dir, A)
    kept = own_run(tmp_path, "operator", tiny_model_dir, None)
    old = time.time() - 10
    os.utime(stale / "run.json", (old, old))
    swept, real = threading.Event(), visitors.sweep

    def watched(*args, **kwargs):
        removed = real(*args, **kwargs)
        swept.set()
        return removed

    monkeypatch.setattr(visitor.visitors, "sweep", watched)
    stop = visitor.start_sweeper(tmp_path, ttl_s=5, every_s=0.1)
    try:
        assert swept.wait(120), "the sweeper never swept"
    finally:
        stop.set()
    assert not stale.exists() and kept.is_dir()
