"""Every door that takes a file reads only a file uploaded to it (issue 35), tried as an attacker would,
over raw HTTP, in local and in public mode.

The doors are found in the served page's own /config (every event with a file input, and the gradio API's
/evaluate), so a new one is tried too. Each is sent a ``FileData`` naming a server file by an absolute path,
a relative one, a ``../`` out of the upload folder, a symlink placed in the upload folder, another
visitor's stored evaluation and a file under the temp dir: each is refused with one message, and neither
the answer nor the server's log holds a row of the file or a traceback. The same door with an uploaded
file gets through (the positive control). Three guards stand in line (``bertviz_app.ui.uploads``); each is
also shown refusing alone, with the ones before it turned off.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("gradio")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradio.utils import get_upload_folder  # noqa: E402

import bertviz_app as bv  # noqa: E402
from bertviz_app.models import visitors  # noqa: E402
from bertviz_app.ui import uploads  # noqa: E402

from conftest import queue_event, served_app  # noqa: E402

MARK = f"secret-row-{uuid.uuid4().hex[:12]}"  # in every file an attacker asks for; never in an answer or the log
TABLE = f"text,label\n{MARK} one,negative\n{MARK} two,positive\nthe film was good,positive\nawful,negative\n"
OWNER_B = visitors.owner_hash(visitors.new_token())


def file_data(path: str) -> dict:
    return {"path": path, "meta": {"_type": "gradio.FileData"}, "orig_name": "reviews.csv"}


@pytest.fixture(scope="module")
def secrets_on_disk(tmp_path_factory):
    """The files an attacker names: another visitor's stored evaluation, a table under the temp dir, a
    symlink in gradio's upload folder pointing at it. Removed after the module."""
    models = tmp_path_factory.mktemp("doors-models")
    stored = models / "evaluations" / "eval-20261127-074901-runs-b-0123456789"
    stored.mkdir(parents=True)
    (stored / "predictions.csv").write_text(TABLE, encoding="utf-8")
    (stored / "run.json").write_text(json.dumps({"kind": "evaluation", "owner": OWNER_B}), encoding="utf-8")
    in_temp = Path(tempfile.gettempdir()) / f"bertviz-door-{uuid.uuid4().hex}.csv"
    in_temp.write_text(TABLE, encoding="utf-8")
    upload_root = Path(get_upload_folder())
    link_dir = upload_root / f"door-{uuid.uuid4().hex}"
    link_dir.mkdir(parents=True)
    (link_dir / "reviews.csv").symlink_to(in_temp)
    paths = {
        "another visitor's stored file": str(stored / "predictions.csv"),
        "a file under the temp dir": str(in_temp),
        "a relative path": os.path.relpath(in_temp, Path.cwd()),
        "../ out of the upload folder": f"{upload_root}/../{in_temp.relative_to(Path(tempfile.gettempdir()))}",
        "a symlink in the upload folder": str(link_dir / "reviews.csv"),
        "a path that does not exist": str(upload_root / "no-such-dir" / "reviews.csv"),
    }
    yield models, paths
    in_temp.unlink(missing_ok=True)
    (link_dir / "reviews.csv").unlink(missing_ok=True)
    link_dir.rmdir()


@pytest.fixture(scope="module", params=["local", "public"])
def app(request, tiny_model_dir, secrets_on_disk):
    models, paths = secrets_on_disk
    mode = {"BERTVIZ_PUBLIC": 1} if request.param == "public" else {}
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=models, **mode) as url:
        yield url, paths, doors(url)


def doors(url: str) -> dict[str, tuple[int, int, list]]:
    """{door: (fn_index, file slot, its inputs' default values)}: every event of the page with a file input,
    and the API's /evaluate (its file is its first input), as the page's /config lists them."""
    cfg = httpx.get(f"{url}config", timeout=30).json()
    comps = {c["id"]: c for c in cfg["components"]}
    found = {}
    for i, dep in enumerate(cfg["dependencies"]):
        kinds = [comps[c]["type"] for c in dep["inputs"]]
        if "file" in kinds or dep.get("api_name") == "evaluate":
            values = [comps[c].get("props", {}).get("value") for c in dep["inputs"]]
            found[dep.get("api_name") or f"event {i}"] = (i, kinds.index("file") if "file" in kinds else 0, values)
    return found


def inputs(door: tuple[int, int, list], file: dict) -> list:
    """The door's inputs: its defaults, ``file`` in its file slot."""
    _, slot, values = door
    return [file if k == slot else v for k, v in enumerate(values)]


def upload(url: str, text: str = TABLE.replace(MARK, "mine")) -> str:
    """A file sent to gradio's upload route, as the page and gradio_client send one: its server path."""
    r = httpx.post(f"{url}gradio_api/upload", files={"files": ("reviews.csv", text.encode(), "text/csv")}, timeout=30)
    r.raise_for_status()
    return r.json()[0]


def join(url: str, fn_index: int, data: list) -> httpx.Response:
    body = {"data": data, "fn_index": fn_index, "session_hash": uuid.uuid4().hex[:10], "event_data": None,
            "trigger_id": None}
    return httpx.post(f"{url}gradio_api/queue/join", json=body, timeout=30)


def call_evaluate(url: str, file: dict, model: str = "") -> str:
    """POST /gradio_api/call/evaluate, then its event stream whole (or the refusal's body)."""
    r = httpx.post(f"{url}gradio_api/call/evaluate", json={"data": [file, "", "", "", "", model, False, ""]},
                   timeout=30)
    if r.status_code != 200:
        return f"{r.status_code} {r.text}"
    return httpx.get(f"{url}gradio_api/call/evaluate/{r.json()['event_id']}", timeout=120).text


def test_the_page_has_the_file_doors_this_test_tries(app):
    _, _, found = app
    assert "evaluate" in found and len(found) >= 6, found  # 5 upload events of the tabs + the API's /evaluate


def test_every_file_door_refuses_a_server_path_and_says_nothing_of_the_file(app, capfd, caplog):
    url, paths, found = app
    caplog.set_level(logging.INFO, logger="bertviz_app.ui")
    assert paths and found
    for door, spec in found.items():
        for what, path in paths.items():
            r = join(url, spec[0], inputs(spec, file_data(path)))
            assert r.status_code == 400, (door, what, r.text)
            assert r.json()["error"] == uploads.NOT_UPLOADED, (door, what)
            assert MARK not in r.text and "text,label" not in r.text
        # the positive control: the same door, a file uploaded to it, gets through
        ok = join(url, spec[0], inputs(spec, file_data(upload(url))))
        assert ok.status_code == 200 and "event_id" in ok.json(), (door, ok.text)
    for what, path in paths.items():  # the API's named route
        out = call_evaluate(url, file_data(path))
        assert out.startswith("400 ") and uploads.NOT_UPLOADED in json.loads(out[4:])["error"], (what, out)
    log = "".join(capfd.readouterr()) + caplog.text
    assert MARK not in log
    assert "Traceback" not in log
    refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Refused 1 file path(s)")]
    assert len(refusals) == len(paths) * (len(found) + 1)  # one line each, without the path
    assert not any(p in line for p in paths.values() for line in refusals)


def test_the_evaluate_api_reads_an_uploaded_file(app):
    url, _, _ = app
    out = call_evaluate(url, file_data(upload(url)))
    assert "event: complete" in out and '"accuracy"' in out and '"rows": 4' in out, out[:500]


def run_event(url: str, fn_index: int, data: list) -> dict:
    """An event joined to gradio's queue in a new session and followed to its end."""
    return queue_event(url, fn_index, data)


@pytest.mark.parametrize("guards_off", [["PathGuard"], ["PathGuard", "gradio"]],
                         ids=["gradio's own check", "the handlers' check"])
def test_each_guard_refuses_alone(guards_off, tiny_model_dir, secrets_on_disk, monkeypatch, capfd):
    """With the guards before it turned off, gradio's check (``has_launched``) and then the handlers'
    ``upload_path`` still refuse, and still let an uploaded file through."""
    models, paths = secrets_on_disk

    async def passthrough(self, scope, receive, send):
        await self.app(scope, receive, send)

    checked = []  # the handlers' check, watched: what it was asked and whether it refused
    real = uploads.upload_path

    def watched(value):
        try:
            out = real(value)
        except bv.InputError:
            checked.append("refused")
            raise
        checked.append("accepted")
        return out

    monkeypatch.setattr(uploads.PathGuard, "__call__", passthrough)
    monkeypatch.setattr(uploads, "upload_path", watched)
    if "gradio" in guards_off:
        monkeypatch.setattr(uploads, "enforce_gradio_checks", lambda demo: None)
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=models, BERTVIZ_PUBLIC=1) as url:
        door = doors(url)["evaluate"]
        for what in ("another visitor's stored file", "a file under the temp dir", "a symlink in the upload folder"):
            done = run_event(url, door[0], inputs(door, file_data(paths[what])))
            assert done["success"] is False, (what, done)
            assert MARK not in json.dumps(done)
            if "gradio" in guards_off:  # the handler's own refusal, which says what to do
                assert done["output"]["error"] == uploads.NOT_UPLOADED, done
                assert checked[-1] == "refused"
            else:  # refused by gradio before the handler ran
                assert checked == [], checked
        good = run_event(url, door[0], inputs(door, file_data(upload(url))))
        assert good["success"] is True and good["output"]["data"][0]["rows"] == 4
        assert checked[-1] == "accepted"
    assert MARK not in "".join(capfd.readouterr())


def test_upload_path_accepts_only_a_file_in_the_upload_folder(tmp_path):
    root = Path(get_upload_folder())
    inside = root / f"unit-{uuid.uuid4().hex}"
    inside.mkdir(parents=True)
    good = inside / "reviews.csv"
    good.write_text("text,label\na,b\n", encoding="utf-8")
    outside = tmp_path / "secret.csv"
    outside.write_text(TABLE, encoding="utf-8")
    (inside / "link.csv").symlink_to(outside)
    try:
        assert uploads.upload_path(str(good)) == str(good.resolve())  # positive controls: str, dict, Path
        assert uploads.upload_path({"path": str(good)}) == uploads.upload_path(good) == str(good.resolve())
        for bad in (str(outside), str(inside / "link.csv"), f"{inside}/../../{outside.name}", str(inside),
                    str(root), str(inside / "missing.csv"), "reviews.csv", "/etc/passwd", "http://127.0.0.1/x.csv"):
            with pytest.raises(bv.InputError) as err:
                uploads.upload_path(bad)
            assert str(err.value) == uploads.NOT_UPLOADED  # one message: nothing said of the file
    finally:
        for p in (good, inside / "link.csv"):
            p.unlink()
        inside.rmdir()


def test_gradio_never_copies_or_serves_the_models_folder(tmp_path):
    from bertviz_app.config import Settings

    blocked = uploads.blocked_paths(Settings(models_dir=tmp_path / "models"))
    assert str((tmp_path / "models").resolve()) in blocked
    assert str(Path(uploads.__file__).resolve().parent.parent) in blocked  # the package's own files


def test_a_file_dropped_while_the_last_ones_clear_runs_is_read_too(tiny_model_dir, settings):
    """Every upload box's listener (its upload and its clear) runs a trigger that comes while one is pending
    after it ("always_last"), not gradio's default "once", which dropped it: in a loaded CI run a refused file put
    in after Clear was never read and its refusal never shown. Control: Analyze keeps "once" (no second click
    queued while one runs)."""
    from bertviz_app.ui import build_app

    demo = build_app(settings, str(tiny_model_dir))
    deps = demo.get_config_file()["dependencies"]
    ids = {c._id: getattr(c, "elem_id", None) for c in demo.blocks.values()}
    boxes = {"bv-ft-upload", "bv-ft-val-upload", "bv-ev-upload", "bv-bx-upload"}
    found = {}
    for d in deps:
        for target, event in d["targets"]:
            if ids.get(target) in boxes and event in ("upload", "clear"):
                found[ids[target], event] = d["trigger_mode"]
    assert set(found) == {(b, e) for b in boxes for e in ("upload", "clear")}, found
    assert set(found.values()) == {"always_last"}, found
    assert next(d for d in deps if d.get("api_name") == "analyze")["trigger_mode"] == "once"
